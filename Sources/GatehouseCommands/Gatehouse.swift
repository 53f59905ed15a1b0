import ArgumentParser
public import GatehouseKernel
public import GatehouseServerCommand

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
    public typealias Context = GatehouseServerCommandLine.Context

    /// The version `gatehouse --version` prints.
    public static let version = GatehouseServerCommandLine.version

    /// Parses the process's arguments and runs the command with `registry`'s plugins. `services`
    /// are added to the built-in ones (the demo's registration API) for manifests to name.
    public static func main(registry: PluginRegistry, services: PluginServices = PluginServices()) async {
        await GatehouseServerCommandLine.$context.withValue(Context(registry: registry, services: services)) {
            await run(CommandLine.arguments.dropFirst())
        }
    }

    /// ArgumentParser's `main()` with failures as one sentence and the README's exit status
    /// (``GatehouseServerCommandLine``'s); Ctrl-C during a device command's flow exits 130
    /// without a line about the cancellation.
    static func run(_ arguments: ArraySlice<String>) async {
        await GatehouseServerCommandLine.run(Gatehouse.self, arguments, fail: CommandSupport.failAfterInterruption)
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
            AdminCommands.self, UserCommands.self, SigningKeyCommands.self, ManifestCommands.self,
        ]
    )
}
