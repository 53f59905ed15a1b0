package import ArgumentParser
public import GatehouseKernel

/// `gatehouse-server`: the token server's command alone, without the client SDK and the device
/// commands — what operators deploy. An integrator's server with plugins of its own
/// is a `main.swift` of one line:
///
/// ```swift
/// await GatehouseServerCommandLine.main(registry: try PluginRegistry.builtIn.registering(MyPlugin.self))
/// ```
///
/// It takes the options and `GATEHOUSE_*` variables of `gatehouse serve`, which runs the same code.
public enum GatehouseServerCommandLine {
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

    /// The version `gatehouse --version` and `gatehouse-server --version` print.
    public static let version = "0.11.0"

    /// The context of the running command; scoped to a `main`, never global.
    @TaskLocal package static var context: Context?

    /// Parses the process's arguments as `gatehouse-server`'s and runs the server with
    /// `registry`'s plugins; `services` are added to the built-in ones for manifests to name.
    /// A leading `serve` is taken away, so a command line written for `gatehouse serve` (a
    /// container's `serve --port 9000`, a unit's `ExecStart`) runs unchanged.
    public static func main(registry: PluginRegistry, services: PluginServices = PluginServices()) async {
        var arguments = CommandLine.arguments.dropFirst()
        if arguments.first == "serve" { arguments = arguments.dropFirst() }
        await $context.withValue(Context(registry: registry, services: services)) {
            await run(ServerCommand.self, arguments) { CommandSupport.fail($0) }
        }
    }

    /// ArgumentParser's `main()`, with one difference: a command line it cannot parse (or that a
    /// command's `validate()` refuses) prints the problem with the usage, as ArgumentParser does,
    /// while a failure once the command runs is `fail`'s: one sentence and the exit status of the
    /// README's table. A database that cannot be reached is not a usage mistake, and no person
    /// should read a Swift type's description.
    package static func run<Root: ParsableCommand>(
        _ root: Root.Type,
        _ arguments: ArraySlice<String>,
        fail: (any Error) -> ExitCode
    ) async {
        var command: any ParsableCommand
        do {
            command = try Root.parseAsRoot(Array(arguments))
        } catch {
            Root.exit(withError: error)
        }
        do {
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch let error as ExitCode {
            Root.exit(withError: error)
        } catch let error as CleanExit {
            Root.exit(withError: error)
        } catch let error where isArgumentParserSignal(error) {
            Root.exit(withError: error)
        } catch {
            Root.exit(withError: fail(error))
        }
    }
}

/// `gatehouse-server [options]`: `gatehouse serve` as a command of its own.
struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse-server",
        abstract: "Run the Gatehouse token server over HTTP (the same server as `gatehouse serve`).",
        discussion: ServeOptions.discussion,
        version: GatehouseServerCommandLine.version
    )

    @OptionGroup var options: ServeOptions

    func run() async throws { try await options.serve() }
}

/// Whether `error` is one of ArgumentParser's own (its `help` command and `--help` routed there
/// signal with such), which only ArgumentParser knows how to print. A `ValidationError` that a
/// command throws while it runs is one of ours: a sentence like the rest.
private func isArgumentParserSignal(_ error: any Error) -> Bool {
    !(error is ValidationError) && String(reflecting: type(of: error)).hasPrefix("ArgumentParser.")
}
