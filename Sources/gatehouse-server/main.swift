import Foundation
import GatehouseKernel
import GatehousePlugins
import GatehouseServerCommand

// `gatehouse-server`: the token server with the built-in plugins, and nothing of the client SDK
// or the device commands. An integrator's server does the same with its own registry.
do {
    await GatehouseServerCommandLine.main(registry: try PluginRegistry.builtIn)
} catch {
    // Only the built-in registry can fail here, before the server starts: a bug in this build.
    FileHandle.standardError.write(Data("error: the built-in plugins could not be registered: \(error)\n".utf8))
    exit(70)
}
