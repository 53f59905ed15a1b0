/// Identifies one kind of service a host provides to plugins, and the type a plugin gets back.
///
/// Declare a key beside the service's protocol, the way SwiftUI declares an `EnvironmentKey` and
/// swift-service-context a `ServiceContextKey`:
///
/// ```swift
/// public enum BrowserLoginServiceKey: PluginServiceKey {
///     public typealias Value = any BrowserLoginService
///     public static let name = "browser login"
/// }
/// ```
///
/// The host sets a value under the key in ``PluginEnvironment/services`` and the plugin reads it
/// back as `Value`, with no cast. Keys are told apart by their type, never by ``name``: two keys
/// with the same name are two different services.
public protocol PluginServiceKey: Sendable {
    /// The type of the service: usually a protocol's existential (`any BrowserLoginService`), so a
    /// host may provide any conforming value.
    associatedtype Value: Sendable

    /// What the service is, for people: a missing one is reported as "the host provides no
    /// \(name) named …". Never used to look a service up.
    static var name: String { get }
}

/// The services a host provides to plugins: backends a plugin cannot build from its configuration
/// alone (a hosted login, an in-process registration API, a shared sensor).
///
/// Each value is stored under a ``PluginServiceKey`` type, which fixes the value's type, and an
/// optional instance name. A host that offers several services of one kind names them, and a
/// manifest entry picks one by that name (`idp.browser`'s `login: gatehouse-login`); a service the
/// host offers once may go without a name.
///
/// ```swift
/// // The host
/// var environment = PluginEnvironment(logger: logger)
/// environment.services[BrowserLoginServiceKey.self, named: "gatehouse-login"] = login
///
/// // A plugin's factory: the configuration's `login` names the instance.
/// let login = try context.services.require(
///     BrowserLoginServiceKey.self,
///     named: configuration.login,
///     forConfigurationKey: "login"
/// )
/// ```
public struct PluginServices: Sendable {
    /// Where one value is stored: the key type's identity, never its name, so two keys that share
    /// a name cannot collide.
    private struct Slot: Hashable {
        var key: ObjectIdentifier
        var instance: String?

        init<Key: PluginServiceKey>(_ key: Key.Type, _ instance: String?) {
            self.key = ObjectIdentifier(key)
            self.instance = instance
        }
    }

    private var values: [Slot: any Sendable] = [:]

    /// No services.
    public init() {}

    /// The service stored under `key` and `instance`, or `nil` if the host provides none there.
    /// Setting `nil` removes it.
    ///
    /// - Parameters:
    ///   - key: The kind of service, which fixes the value's type.
    ///   - instance: The name a manifest picks the service by; `nil` for the one unnamed service
    ///     of this kind.
    public subscript<Key: PluginServiceKey>(key: Key.Type, named instance: String? = nil) -> Key.Value? {
        get {
            // Values enter only through this subscript (`merging` copies them slot for slot), each
            // in the slot of its own key type, so the cast cannot fail.
            values[Slot(key, instance)] as? Key.Value
        }
        set {
            values[Slot(key, instance)] = newValue
        }
    }

    /// These services with `value` stored under `key` and `instance`, for building services in
    /// one expression:
    ///
    /// ```swift
    /// PluginEnvironment(services: PluginServices().setting(SimulatedBiometricSensorKey.self,
    /// named: "lab", to: sensor))
    /// ```
    ///
    /// - Parameters:
    ///   - key: The kind of service.
    ///   - instance: The name a manifest picks the service by; `nil` for the unnamed one.
    ///   - value: The service.
    /// - Returns: A copy with `value` stored, replacing any value already in that place.
    public func setting<Key: PluginServiceKey>(
        _ key: Key.Type,
        named instance: String? = nil,
        to value: Key.Value
    ) -> PluginServices {
        var copy = self
        copy[key, named: instance] = value
        return copy
    }

    /// These services with `other`'s added; where both have a value under the same key and
    /// instance name, `other`'s is kept. A host uses it to lay an integrator's services over its
    /// own defaults.
    public func merging(_ other: PluginServices) -> PluginServices {
        var merged = self
        merged.values.merge(other.values) { _, theirs in theirs }
        return merged
    }

    /// The instance names under which services of `key`'s kind are provided, sorted. The unnamed
    /// service, if any, is not listed.
    public func names<Key: PluginServiceKey>(of key: Key.Type) -> [String] {
        let key = ObjectIdentifier(key)
        return values.keys.filter { $0.key == key }.compactMap(\.instance).sorted()
    }

    /// The service a plugin cannot work without, or the configuration error a host reports when
    /// it is missing: it names the kind of service (``PluginServiceKey/name``), the instance asked
    /// for and the instances the host does provide.
    ///
    /// Throw the error from a plugin factory as it is: a ``PluginRegistry`` reports it against the
    /// manifest entry, e.g.
    /// `authenticators[0] (id "face"): config.sensor: the host provides no simulated biometric
    /// sensor named "lab"; it provides: shared`.
    ///
    /// - Parameters:
    ///   - key: The kind of service.
    ///   - instance: The name the plugin's configuration gives; `nil` for the unnamed service.
    ///   - configurationKey: The configuration key that gave `instance`, where the error points;
    ///     `nil` when the configuration does not name the service.
    /// - Returns: The service.
    /// - Throws: ``ConfigurationError`` when the host provides no such service.
    public func require<Key: PluginServiceKey>(
        _ key: Key.Type,
        named instance: String? = nil,
        forConfigurationKey configurationKey: String? = nil
    ) throws(ConfigurationError) -> Key.Value {
        if let value = self[key, named: instance] { return value }
        let provided = names(of: key)
        let problem: String
        if let instance {
            problem =
                "the host provides no \(Key.name) named \"\(instance)\""
                + (provided.isEmpty ? "" : "; it provides: \(provided.joined(separator: ", "))")
        } else {
            problem =
                "the host provides no \(Key.name)"
                + (provided.isEmpty ? "" : "; it provides only named ones: \(provided.joined(separator: ", "))")
        }
        throw ConfigurationError(path: configurationKey.map { [.key($0)] } ?? [], problem: problem)
    }
}
