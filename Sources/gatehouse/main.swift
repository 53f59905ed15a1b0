import GatehouseCommands
import GatehouseKernel
import GatehousePlugins

// `gatehouse`: the built-in plugins. An integrator's executable does the same with its own
// registry (Examples/ThirdPartyAuthenticator).
do {
    await GatehouseCommandLine.main(registry: try PluginRegistry.builtIn)
} catch {
    print("error: \(error)")
}
