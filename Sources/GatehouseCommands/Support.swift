import ArgumentParser
import BiometricAuthenticator
import CustomAPIIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehousePlugins
import GatehouseProtocol
import GatehouseYAML
import Logging

/// Options every command that reads a manifest shares.
struct ManifestOptions: ParsableArguments {
    @Option(
        help: """
            A manifest (JSON or YAML) naming the plugins. Device commands default to what the server publishes at \
            /v1/configuration; server-side commands to $GATEHOUSE_MANIFEST, else Examples/manifests/server.yaml.
            """
    )
    var manifest: String?

    /// The manifest a server-side command (demo, users) reads.
    var serverManifest: String {
        EnvironmentSettings().resolve(manifest, "manifest") ?? "Examples/manifests/server.yaml"
    }
}

/// Options of the device commands.
struct DeviceOptions: ParsableArguments {
    @Option(help: "The token server's URL.")
    var server: String = "http://127.0.0.1:8080"

    @Option(help: "Where this device keeps its profiles and keys.")
    var dataDir: String = DataFolders.device.path

    @Option(help: "The application id the server knows.")
    var appID: String = "gatehouse-example"
}

enum CommandSupport {
    /// Services that manifests may name: the demo's in-process custom registration API, plus
    /// the integrator's.
    static var services: [String: any Sendable] {
        var services: [String: any Sendable] = [
            "one-time-code": OneTimeCodeRegistrationAPI(), "simulated-sensor": simulatedSensor,
        ]
        for (name, service) in GatehouseCommandLine.context?.services ?? [:] { services[name] = service }
        return services
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

    static func manifest(_ path: String) throws -> Manifest {
        guard FileManager.default.fileExists(atPath: path) else {
            throw ValidationError("the manifest \(path) does not exist; name one with --manifest or GATEHOUSE_MANIFEST")
        }
        return try ManifestLoader.jsonAndYAML.load(path: path, additionalSections: ["server", "xignin", "login"])
    }

    /// The name under which the hosted login is offered to `idp.browser`.
    static let loginService = "gatehouse-login"

    /// The hosted login of `manifest`'s `login` section, its state in `login/` beside `database`.
    static func login(_ manifest: Manifest, database: String, environment: PluginEnvironment) throws -> LoginServer? {
        guard manifest.sections["login"] != nil else { return nil }
        let directory = URL(fileURLWithPath: database).deletingLastPathComponent().appendingPathComponent("login")
        return try LoginServer(manifest: manifest, directory: directory, environment: environment)
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
        return try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: URL(fileURLWithPath: device.dataDir),
                transport: transport,
                appID: device.appID,
                plugins: plugins,
                logger: logger
            )
        )
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

    /// The profile named by `--profile`, or the device's only one.
    static func profile(_ option: String?, of client: UserClient) async throws -> UserProfile {
        let profiles = try await client.userProfiles()
        guard let chosen = option.map(UserProfile.init) ?? (profiles.count == 1 ? profiles.first : nil) else {
            throw ValidationError("Name the profile with --profile; this device has \(profiles.count).")
        }
        return chosen
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

    /// Prints a Gatehouse error as one line with its code, and exits non-zero.
    static func fail(_ error: any Error) -> ExitCode {
        if let error = error as? any DomainError {
            FileHandle.standardError.write(
                Data("error: \(error.message) [\(error.domainName).\(error.codeName) \(error.codeNumber)]\n".utf8)
            )
        } else {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        }
        return ExitCode.failure
    }
}
