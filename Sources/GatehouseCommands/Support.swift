import ArgumentParser
import BiometricAuthenticator
import CustomAPIIdentityProvider
import Foundation
import GatehouseAdminConsole
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehousePlugins
import GatehouseProtocol
import GatehouseServer
import GatehouseYAML
import Logging

/// Options every command that reads a manifest shares.
struct ManifestOptions: ParsableArguments {
    @Option(
        help: """
            A manifest (JSON or YAML) naming the plugins. Device commands default to what the server publishes at \
            /v1/configuration; `demo`, `users` and `signing-keys` to $GATEHOUSE_MANIFEST, else the built-in example \
            server.yaml (`gatehouse manifest example server`).
            """
    )
    var manifest: String?

    /// The manifest a server-side command (users, signing-keys) reads: the file named, else the
    /// built-in example `server.yaml`, as `demo` and `serve`'s README use it, from any folder.
    func serverManifest() throws -> (manifest: Manifest, source: String) {
        guard let path = EnvironmentSettings().resolve(manifest, "manifest") else {
            return (
                try ExampleManifests.manifest("server.yaml", publicURL: EmbeddedTokenServer.defaultURL),
                "server.yaml (built in)"
            )
        }
        return (try CommandSupport.manifest(path), path)
    }

    /// The manifest `demo` runs: the file named, else the built-in example `server.yaml` (`gatehouse
    /// manifest example server`), so the demo needs no checkout.
    func demoManifest() throws -> Manifest {
        guard let path = EnvironmentSettings().resolve(manifest, "manifest") else {
            return try ExampleManifests.manifest("server.yaml", publicURL: EmbeddedTokenServer.defaultURL)
        }
        return try CommandSupport.manifest(path)
    }
}

/// Options of the device commands.
struct DeviceOptions: ParsableArguments {
    @Option(
        name: .customLong("server"),
        help: "The token server's URL (default: $GATEHOUSE_SERVER, else http://127.0.0.1:8080)."
    )
    var serverOption: String?

    /// `--server`, else `GATEHOUSE_SERVER`, else the default address of `serve`.
    var server: String {
        EnvironmentSettings().resolve(serverOption, "server") ?? "http://127.0.0.1:8080"
    }

    @Option(help: "Where this device keeps its profiles and keys.")
    var dataDir: String = DataFolders.device.path

    @Option(help: "The application id the server knows.")
    var appID: String = "gatehouse-example"
}

enum CommandSupport {
    /// Services that manifests may name: the demo's in-process custom registration API and
    /// simulated sensor, with the integrator's laid over them.
    static var services: PluginServices {
        PluginServices()
            .setting(CustomRegistrationAPIKey.self, named: "one-time-code", to: OneTimeCodeRegistrationAPI())
            .setting(SimulatedBiometricSensorKey.self, named: "simulated-sensor", to: simulatedSensor)
            .merging(GatehouseCommandLine.context?.services ?? PluginServices())
    }

    /// The simulated biometric sensor manifests may name as `simulated-sensor`: it matches unless
    /// the demo scripts it otherwise.
    static let simulatedSensor = SimulatedBiometricSensor()

    /// The plugin types the running command knows.
    static var registry: PluginRegistry {
        get throws {
            if let registry = GatehouseCommandLine.context?.registry { return registry }
            return try PluginRegistry.builtIn
        }
    }

    static func logger(_ label: String, level: Logger.Level = .warning) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }

    /// The sections a server-side manifest may have besides the plugins.
    static let serverSections: Set<String> = ["server", "xignin", "login", "adminConsole"]

    /// The manifest at `path`, with `${publicURL}` resolved to its `server.publicURL`, else to
    /// `publicURL` (where the server is reached).
    static func manifest(_ path: String, publicURL: String = EmbeddedTokenServer.defaultURL) throws -> Manifest {
        guard FileManager.default.fileExists(atPath: path) else {
            throw ManifestError(
                source: path,
                problem: "the manifest does not exist; name one with --manifest or GATEHOUSE_MANIFEST "
                    + "(`gatehouse manifest example server > server.yaml` writes the example)"
            )
        }
        let loaded = try ManifestLoader.jsonAndYAML.load(path: path, additionalSections: serverSections)
        guard ManifestPlaceholders.uses(loaded) else { return loaded }
        return try ManifestPlaceholders.resolve(loaded, served: publicURL, additionalSections: serverSections)
    }

    /// The name under which the hosted login is offered to `idp.browser`, under
    /// `BrowserLoginServiceKey`.
    static let loginService = "gatehouse-login"

    /// The tables of the extensions `manifest` mounts, to open the server's storage with.
    static func migrations(for manifest: Manifest) -> [MigrationGroup] {
        (manifest.sections["login"] != nil ? [LoginStore.migrations] : [])
            + (manifest.sections["adminConsole"] != nil ? [AdminConsoleStore.migrations] : [])
    }

    /// The admin console of `manifest`'s `adminConsole` section, signing operators in at `login`;
    /// nil without the section. A console without the hosted login is a manifest error.
    static func adminConsole(
        _ manifest: Manifest,
        login: LoginServer?,
        storage: ServerStorage,
        environment: PluginEnvironment
    ) throws -> AdminConsole? {
        guard manifest.sections["adminConsole"] != nil else { return nil }
        guard let login else {
            throw ManifestError(
                source: manifest.source,
                path: "adminConsole",
                problem: "the admin console signs operators in at the hosted login: add a login section"
            )
        }
        return try AdminConsole(manifest: manifest, login: login, storage: storage, environment: environment)
    }

    /// The hosted login of `manifest`'s `login` section, its state in the server's `storage`. On
    /// SQLite, the users an earlier version kept in `login/login.sqlite` beside the database are
    /// imported first, once (the file is then renamed `login.sqlite.imported`).
    static func login(
        _ manifest: Manifest,
        storage: ServerStorage,
        environment: PluginEnvironment,
        servedURL: URL? = nil
    ) async throws -> LoginServer? {
        guard manifest.sections["login"] != nil else { return nil }
        let login = try LoginServer(
            manifest: manifest,
            storage: storage,
            environment: environment,
            servedURL: servedURL
        )
        if case .sqlite(let path) = storage.database {
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("login")
            do {
                _ = try await login.importEarlierUsers(from: folder)
            } catch {
                throw DatabaseFailure.sqlite(folder.appendingPathComponent("login.sqlite").path, .opening, error)
            }
        }
        return login
    }

    static func environment(logger: Logger) -> PluginEnvironment {
        PluginEnvironment(logger: logger, services: services)
    }

    /// A client for a server over HTTP, with the client halves of the server's plugins: as the
    /// server publishes them at `/v1/configuration`, or from `--manifest` when given.
    static func client(_ device: DeviceOptions, manifest: ManifestOptions) async throws -> UserClient {
        let logger = logger("gatehouse.client")
        let transport = HTTPTransport(baseURL: device.server)
        let source: Manifest
        if let path = manifest.manifest {
            source = try self.manifest(path)
        } else {
            source = try await published(by: transport)
        }
        let plugins = try registry.load(source, environment: environment(logger: logger), sides: .client)
        let client = try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: URL(fileURLWithPath: device.dataDir),
                transport: transport,
                appID: device.appID,
                plugins: plugins,
                logger: logger
            )
        )
        // Ctrl-C cancels the flow in progress at the server before the command exits.
        Interruption.cancelsFlows(of: client)
        return client
    }

    /// A client for what stays on the device (its profiles): no server, no plugins.
    static func offlineClient(_ device: DeviceOptions) throws -> UserClient {
        // The server's URL names whose profiles to list: it must be one a device could use.
        try HTTPTransport.checkBaseURL(device.server)
        return try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: URL(fileURLWithPath: device.dataDir),
                transport: HTTPTransport(baseURL: device.server),
                appID: device.appID,
                plugins: .none,
                logger: logger("gatehouse.client")
            )
        )
    }

    /// The server's authenticators and identity providers as a manifest of their client halves,
    /// with this device's own settings added (the command line's shared simulated sensor).
    static func published(by transport: HTTPTransport) async throws -> Manifest {
        let response = try await transport.send(WireRequest(method: "GET", path: Endpoint.configuration))
        guard response.status == 200 else {
            throw GenericError(
                .serverNotReachable,
                message: "\(transport.baseURL)\(Endpoint.configuration) answered HTTP \(response.status)."
            )
        }
        let published = try WireCoding.decode(ServerConfigurationResponse.self, from: response.body)
        func entry(_ id: String, _ type: String, _ name: String, _ config: ConfigValue?) -> ConfigValue {
            var values: [String: ConfigValue] = [:]
            if case .object(let object) = config { values = object }
            for (key, value) in deviceSettings[type] ?? [:] { values[key] = value }
            return .object(["id": .string(id), "type": .string(type), "name": .string(name), "config": .object(values)])
        }
        let value = ConfigValue.object([
            "authenticators": .list(published.authenticators.map { entry($0.id, $0.type, $0.name, $0.config) }),
            "identityProviders": .list(published.identityProviders.map { entry($0.id, $0.type, $0.name, $0.config) }),
        ])
        return try Manifest(value, source: "the configuration of \(transport.baseURL)")
    }

    /// Settings that belong to this device rather than to the server, by plugin type.
    static let deviceSettings: [String: [String: ConfigValue]] = [
        "biometric.simulated": ["sensor": "simulated-sensor"]
    ]

    /// The profile named by `--profile`, else the device's default for this server (`profiles
    /// default`), else its only one.
    static func profile(_ option: String?, of client: UserClient, device: DeviceOptions) async throws -> UserProfile {
        if let option { return UserProfile(id: option) }
        let profiles = try await client.userProfiles()
        if let chosen = DefaultProfiles(device).profile, profiles.contains(UserProfile(id: chosen)) {
            return UserProfile(id: chosen)
        }
        guard profiles.count == 1, let only = profiles.first else {
            // One line and status 64 (a usage problem), without the usage ArgumentParser would add.
            throw SettingError(
                profiles.isEmpty
                    ? "This device has no profile for \(device.server); register one with `gatehouse register`."
                    : "This device has \(profiles.count) profiles for \(device.server): name one with --profile, "
                        + "or choose a default with `gatehouse profiles default ID`."
            )
        }
        return only
    }

    /// Writes a line to standard output at once (unbuffered), for commands that wait afterwards
    /// and scripts that read them as they go.
    static func output(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Prints a usage problem (a setting out of range, a port in use) as one line, and exits 64
    /// (EX_USAGE).
    static func usageError(_ message: String) -> ExitCode {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
        return ExitCode(64)
    }

    /// Runs a command's work: a failure is printed as one sentence (`error: …`, no usage text)
    /// and becomes the command's exit status; an `ExitCode` the work chose passes through.
    static func reportingFailures(_ work: () async throws -> Void) async throws {
        do {
            try await work()
        } catch let exit as ExitCode {
            throw exit
        } catch {
            throw fail(error)
        }
    }

    /// Prints an error as one line (a Gatehouse error with its code), and exits with its status
    /// from the table in the README.
    static func fail(_ error: any Error) -> ExitCode {
        // Ctrl-C ended the command's flow: it exits 130 without a line about the cancellation.
        if Interruption.isInterrupted { Interruption.exitInterrupted() }
        FileHandle.standardError.write(Data("error: \(sentence(error))\n".utf8))
        return ExitCode(status(of: error))
    }

    /// What a person reads about `error`: its message, never a Swift description.
    static func sentence(_ error: any Error) -> String {
        switch error {
        case let error as any DomainError:
            return "\(error.message) [\(error.domainName).\(error.codeName) \(error.codeNumber)]"
        case let error as ValidationError:
            return error.message
        case let error as SettingError:
            return error.description
        case let error as DatabaseLock.Held:
            return error.description
        case let error as ServerDatabaseError:
            return error.description
        case let error as PrivateFileError:
            return "Cannot write \(error.path): \(error.problem.prefix(1).lowercased() + error.problem.dropFirst())."
        case let error as any LocalizedError:
            if let description = error.errorDescription { return description }
        default:
            break
        }
        return "something unexpected failed (\(String(reflecting: type(of: error))))."
    }

    /// The exit status for `error` (README, "Exit statuses").
    static func status(of error: any Error) -> Int32 {
        switch error {
        case is ValidationError, is SettingError: return ExitStatus.usage
        case is ManifestError: return ExitStatus.configuration
        case is ServerDatabaseError, is DatabaseFailure, is PrivateFileError: return ExitStatus.unavailable
        case is DatabaseLock.Held: return ExitStatus.temporaryFailure
        case let error as GenericError:
            switch error.code {
            case .networkConnectivityFailure, .serverNotReachable, .dataStorageNotAvailable:
                return ExitStatus.unavailable
            case .configurationInvalid: return ExitStatus.configuration
            case .unknown, .unrecoverableDataState: return ExitStatus.software
            default: return ExitStatus.refused
            }
        case is any DomainError: return ExitStatus.refused
        default: return ExitStatus.software
        }
    }
}

/// The profile a device uses for a server when none is named: `gatehouse profiles default ID`
/// writes it to `default-profiles.json` in the device's folder, one per server URL.
struct DefaultProfiles {
    let file: URL
    let server: String

    init(_ device: DeviceOptions) {
        file = URL(fileURLWithPath: device.dataDir).appendingPathComponent("default-profiles.json")
        server = device.server
    }

    private var all: [String: String] {
        guard let data = try? Data(contentsOf: file) else { return [:] }
        return (try? JSONDecoder().decode([String: String].self, from: data)) ?? [:]
    }

    var profile: String? { all[server] }

    func set(_ profile: String?) throws {
        var all = self.all
        all[server] = profile
        try PrivateFiles.createFolder(file.deletingLastPathComponent())
        try PrivateFiles.replace(try JSONEncoder().encode(all), at: file.path)
    }
}

/// The exit statuses every command uses, after BSD's sysexits (README, "Exit statuses").
enum ExitStatus {
    /// The server or the device refused what was asked: a wrong PIN, a refused registration.
    static let refused: Int32 = 1
    /// `fetch`: the resource answered, with a status outside 2xx.
    static let resourceRefused: Int32 = 2
    /// `portal push`: the user denied the request, or it expired.
    static let denied: Int32 = 3
    /// EX_USAGE: a flag, an argument or a setting is wrong; the address cannot be listened on.
    static let usage: Int32 = 64
    /// EX_UNAVAILABLE: the server or the database cannot be reached.
    static let unavailable: Int32 = 69
    /// EX_SOFTWARE: something failed that should not (a server's 500, an unexpected answer).
    static let software: Int32 = 70
    /// EX_TEMPFAIL: try again later: the SQLite database is in use by another `serve`.
    static let temporaryFailure: Int32 = 75
    /// EX_CONFIG: the manifest cannot be used.
    static let configuration: Int32 = 78
    /// Ctrl-C stopped a device command (its flow cancelled at the server), or a second one
    /// stopped `serve` at once (128 + SIGINT, as shells report it).
    static let interrupted: Int32 = 130
}
