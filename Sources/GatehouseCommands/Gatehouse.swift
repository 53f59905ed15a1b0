import ArgumentParser
public import GatehouseKernel

/// The `gatehouse` command line as a library: an integrator's own executable runs the same
/// commands (`serve`, the device commands, `demo`) with its own plugin registry.
///
/// ```swift
/// // main.swift of an integrator's executable
/// let registry = try PluginRegistry.builtIn.registering(MyAuthenticatorPlugin.self)
/// await GatehouseCommandLine.main(registry: registry)
/// ```
public enum GatehouseCommandLine {
    /// What the commands build plugins from: the registry, and services manifests may name.
    public struct Context: Sendable {
        public var registry: PluginRegistry
        public var services: [String: any Sendable]

        public init(registry: PluginRegistry, services: [String: any Sendable] = [:]) {
            self.registry = registry
            self.services = services
        }
    }

    /// The version `gatehouse --version` prints.
    public static let version = "0.11.0"

    /// The context of the running command; scoped to ``main(registry:services:)``, never global.
    @TaskLocal static var context: Context?

    /// Parses the process's arguments and runs the command with `registry`'s plugins. `services`
    /// are added to the built-in ones (the demo's registration API) for manifests to name.
    public static func main(registry: PluginRegistry, services: [String: any Sendable] = [:]) async {
        await $context.withValue(Context(registry: registry, services: services)) {
            await Gatehouse.main()
        }
    }
}

struct Gatehouse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "Gatehouse token server, demo and device commands.",
        version: GatehouseCommandLine.version,
        subcommands: [
            Serve.self, Demo.self, Register.self, Login.self, Profiles.self, Deregister.self, Authenticators.self,
            ChangePin.self, Fetch.self, WebLogin.self, XignIn.self, DeviceCommands.self, PortalCommands.self,
            UserCommands.self, ManifestCommands.self,
        ]
    )
}
