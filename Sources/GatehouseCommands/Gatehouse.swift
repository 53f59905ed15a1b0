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
        /// The plugin types a manifest may name: `PluginRegistry.builtIn` or the integrator's own.
        public var registry: PluginRegistry
        /// Services for manifests to name, under their typed keys; laid over the built-in ones.
        public var services: PluginServices

        /// A context with `registry`'s plugin types and `services` (default: none beyond the built-in ones).
        public init(registry: PluginRegistry, services: PluginServices = PluginServices()) {
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
    public static func main(registry: PluginRegistry, services: PluginServices = PluginServices()) async {
        await $context.withValue(Context(registry: registry, services: services)) {
            await run(CommandLine.arguments.dropFirst())
        }
    }

    /// ArgumentParser's `main()`, with one difference: a command line it cannot parse (or that a
    /// command's `validate()` refuses) prints the problem with the usage, as ArgumentParser does,
    /// while a failure once the command runs prints one sentence (``CommandSupport/fail(_:)``) and
    /// exits with its status (README, "Exit statuses"): a refused login, an unreachable database
    /// or a file that cannot be read is not a usage mistake, and no person should read a Swift
    /// type's description.
    static func run(_ arguments: ArraySlice<String>) async {
        var command: any ParsableCommand
        do {
            command = try Gatehouse.parseAsRoot(Array(arguments))
        } catch {
            Gatehouse.exit(withError: error)
        }
        do {
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch let error as ExitCode {
            Gatehouse.exit(withError: error)
        } catch let error as CleanExit {
            Gatehouse.exit(withError: error)
        } catch let error where isArgumentParserSignal(error) {
            Gatehouse.exit(withError: error)
        } catch {
            Gatehouse.exit(withError: CommandSupport.fail(error))
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
            AdminCommands.self, UserCommands.self, SigningKeyCommands.self, ManifestCommands.self,
        ]
    )
}

/// Whether `error` is one of ArgumentParser's own (its `help` command and `--help` routed there
/// signal with such), which only ArgumentParser knows how to print. A `ValidationError` that a
/// command throws while it runs is one of ours: a sentence like the rest.
private func isArgumentParserSignal(_ error: any Error) -> Bool {
    !(error is ValidationError) && String(reflecting: type(of: error)).hasPrefix("ArgumentParser.")
}
