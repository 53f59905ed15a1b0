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
import GatehouseServerCommand
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

extension CommandSupport {
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

    /// Runs a command's work: a failure is printed as one sentence (`error: …`, no usage text)
    /// and becomes the command's exit status; an `ExitCode` the work chose passes through.
    static func reportingFailures(_ work: () async throws -> Void) async throws {
        do {
            try await work()
        } catch let exit as ExitCode {
            throw exit
        } catch {
            throw failAfterInterruption(error)
        }
    }

    /// ``fail(_:)``, except that a failure Ctrl-C caused (a device command's flow cancelled)
    /// exits 130 without a line about the cancellation.
    static func failAfterInterruption(_ error: any Error) -> ExitCode {
        if Interruption.isInterrupted { Interruption.exitInterrupted() }
        return fail(error)
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
