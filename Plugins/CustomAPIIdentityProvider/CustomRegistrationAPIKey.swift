public import GatehouseKernel

/// The key under which a host provides in-process ``CustomRegistrationAPI`` values in
/// `PluginEnvironment.services`, each named for manifests to pick: `idp.customAPI`'s `handler`
/// names one.
///
/// ```swift
/// environment.services[CustomRegistrationAPIKey.self, named: "one-time-code"] = api
/// ```
public enum CustomRegistrationAPIKey: PluginServiceKey {
    /// Any registration API the host runs in its own process.
    public typealias Value = any CustomRegistrationAPI
    /// Reads "the host provides no custom registration API named …" when a manifest names a
    /// missing one.
    public static let name = "custom registration API"
}
