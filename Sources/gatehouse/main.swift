import Foundation
import GatehouseCommands
import GatehouseKernel
import GatehousePlugins

// `gatehouse`: the built-in plugins. An integrator's executable does the same with its own
// registry (Examples/ThirdPartyAuthenticator).
do {
    await GatehouseCommandLine.main(registry: try PluginRegistry.builtIn)
} catch {
    // Only the built-in registry can fail here, before any command runs: a bug in this build.
    FileHandle.standardError.write(Data("error: the built-in plugins could not be registered: \(error)\n".utf8))
    exit(70)
}
