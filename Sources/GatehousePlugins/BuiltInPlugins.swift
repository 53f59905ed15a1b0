import BiometricAuthenticator
import BrowserIdentityProvider
import CustomAPIIdentityProvider
public import GatehouseKernel
import PINAuthenticator
import XignInValidators

extension PluginRegistry {
    /// Every plugin type that ships with Gatehouse, ready for a manifest to pick from. Nothing is
    /// built unless a manifest names it (`biometric.simulated` included).
    /// Add your own with one line: `try registry.register(MyPlugin.self)`.
    public static var builtIn: PluginRegistry {
        get throws(PluginRegistryError) {
            try PluginRegistry(
                validators: XignInValidators.plugins + [PinPolicyValidatorPlugin.self],
                authenticators: [PINAuthenticatorPlugin.self, BiometricAuthenticatorPlugin.self],
                identityProviders: [CustomAPIIdentityProviderPlugin.self, BrowserIdentityProviderPlugin.self]
            )
        }
    }
}
