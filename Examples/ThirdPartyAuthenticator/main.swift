import GatehouseCommands
import GatehouseKernel
import GatehousePlugins
import InvitationIdentityProvider
import TOTPAuthenticator

// `totp-gatehouse`: an integrator's own build of the `gatehouse` commands. The server (`serve`)
// and the device commands (`register`, `login`, `authenticators`) are Gatehouse's; the only
// statement that is the integrator's registers their authenticator and their identity provider,
// which no Gatehouse source names.
do {
    let registry = try PluginRegistry.builtIn.registering(TOTPAuthenticatorPlugin.self)
        .registering(InvitationIdentityProviderPlugin.self)
    await GatehouseCommandLine.main(registry: registry)
} catch {
    print("error: \(error)")
}
