public import GatehouseKernel

/// The key under which a host provides ``BrowserLoginService`` values in `PluginEnvironment.services`,
/// each named for manifests to pick: `idp.browser`'s `login` names one (`gatehouse serve` offers
/// its hosted login as `gatehouse-login`).
///
/// ```swift
/// environment.services[BrowserLoginServiceKey.self, named: "gatehouse-login"] = login
/// ```
public enum BrowserLoginServiceKey: PluginServiceKey {
    /// Any login that redeems the codes it issued.
    public typealias Value = any BrowserLoginService
    /// Reads "the host provides no browser login named …" when a manifest names a missing one.
    public static let name = "browser login"
}
