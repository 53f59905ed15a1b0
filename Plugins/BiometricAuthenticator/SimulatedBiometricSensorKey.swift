public import GatehouseKernel

/// The key under which a host provides shared ``SimulatedBiometricSensor`` values in
/// `PluginEnvironment.services`, each named for manifests to pick: `biometric.simulated`'s
/// `sensor` names one, which the host (a demo, a test) then scripts at run time.
///
/// ```swift
/// environment.services[SimulatedBiometricSensorKey.self, named: "lab"] = sensor
/// ```
public enum SimulatedBiometricSensorKey: PluginServiceKey {
    /// The simulated sensor itself: a host shares one instance with the plugin.
    public typealias Value = SimulatedBiometricSensor
    /// Reads "the host provides no simulated biometric sensor named …" when a manifest names a
    /// missing one.
    public static let name = "simulated biometric sensor"
}
