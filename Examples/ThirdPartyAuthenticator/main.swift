import GatehouseCommands
import GatehouseKernel
import GatehousePlugins
import TOTPAuthenticator

// `totp-gatehouse`: an integrator's own build of the `gatehouse` commands. The server (`serve`)
// and the device commands (`register`, `login`, `authenticators`) are Gatehouse's; the only line
// that is the integrator's registers their authenticator, which no Gatehouse source names.
do {
    let registry = try PluginRegistry.builtIn.registering(TOTPAuthenticatorPlugin.self)
    await GatehouseCommandLine.main(registry: registry)
} catch {
    print("error: \(error)")
}
