import Logging

/// The plugin types a host knows, by type identifier. A value: build it at start-up, pass it on.
///
/// ```swift
/// var registry = PluginRegistry.builtIn          // from GatehousePlugins
/// try registry.register(PostalCodeValidatorPlugin.self)   // an integrator's own, one line
/// let plugins = try registry.load(manifest)
/// ```
/// Each type identifier may be registered once, whatever its kind.
public struct PluginRegistry: Sendable {
    private var registrations: [PluginTypeIdentifier: Registration] = [:]

    /// An empty registry; `PluginRegistry.builtIn` (GatehousePlugins) is the one with Gatehouse's
    /// own plugins.
    public init() {}

    /// A registry of the given plugin types; throws on a duplicate type identifier.
    public init(
        validators: [any ValidatorPlugin.Type] = [],
        authenticators: [any AuthenticatorPlugin.Type] = [],
        identityProviders: [any IdentityProviderPlugin.Type] = []
    ) throws(PluginRegistryError) {
        for plugin in validators { try register(plugin) }
        for plugin in authenticators { try register(plugin) }
        for plugin in identityProviders { try register(plugin) }
    }

    /// Adds a validator plugin type under its ``Plugin/typeIdentifier``; throws if that identifier
    /// is already registered.
    public mutating func register<P: ValidatorPlugin>(_ plugin: P.Type) throws(PluginRegistryError) {
        try add(
            Registration(kind: .validator, plugin: plugin) { configuration, context, _ in
                .validator(try P.makeValidator(configuration: configuration, context: context))
            }
        )
    }

    /// Adds an authenticator plugin type under its ``Plugin/typeIdentifier``; throws if that
    /// identifier is already registered.
    public mutating func register<P: AuthenticatorPlugin>(_ plugin: P.Type) throws(PluginRegistryError) {
        try add(
            Registration(kind: .authenticator, plugin: plugin) { configuration, context, sides in
                .authenticator(
                    P.authenticatorKind,
                    sides.contains(.client)
                        ? try P.makeAuthenticator(configuration: configuration, context: context) : nil,
                    sides.contains(.server) ? try P.makeVerifier(configuration: configuration, context: context) : nil
                )
            }
        )
    }

    /// Adds an identity provider plugin type under its ``Plugin/typeIdentifier``; throws if that
    /// identifier is already registered.
    public mutating func register<P: IdentityProviderPlugin>(_ plugin: P.Type) throws(PluginRegistryError) {
        try add(
            Registration(kind: .identityProvider, plugin: plugin) { configuration, context, sides in
                .identityProvider(
                    sides.contains(.client)
                        ? try P.makeIdentityProvider(configuration: configuration, context: context) : nil,
                    sides.contains(.server) ? try P.makeHost(configuration: configuration, context: context) : nil
                )
            }
        )
    }

    /// Registers an authenticator type made from instances rather than a plugin type; its
    /// manifest entries take no `config`.
    mutating func register(
        type: PluginTypeIdentifier,
        kind: AuthenticatorKind,
        summary: String,
        makeAuthenticator: @escaping @Sendable (PluginContext) -> any Authenticator,
        makeVerifier: @escaping @Sendable (PluginContext) -> any AuthenticatorVerifier
    ) throws(PluginRegistryError) {
        try add(
            Registration(kind: .authenticator, type: type, summary: summary, implementation: "\(type)") {
                context,
                sides in
                .authenticator(
                    kind,
                    sides.contains(.client) ? makeAuthenticator(context) : nil,
                    sides.contains(.server) ? makeVerifier(context) : nil
                )
            }
        )
    }

    /// This registry with `plugin` added, for chaining.
    public func registering<P: ValidatorPlugin>(_ plugin: P.Type) throws(PluginRegistryError) -> PluginRegistry {
        var copy = self
        try copy.register(plugin)
        return copy
    }

    /// This registry with the authenticator `plugin` added, for chaining.
    public func registering<P: AuthenticatorPlugin>(_ plugin: P.Type) throws(PluginRegistryError) -> PluginRegistry {
        var copy = self
        try copy.register(plugin)
        return copy
    }

    /// This registry with the identity provider `plugin` added, for chaining.
    public func registering<P: IdentityProviderPlugin>(_ plugin: P.Type) throws(PluginRegistryError) -> PluginRegistry {
        var copy = self
        try copy.register(plugin)
        return copy
    }

    /// The registered types of one kind, sorted.
    public func types(of kind: PluginKind) -> [PluginTypeIdentifier] {
        registrations.values.filter { $0.kind == kind }.map(\.type).sorted()
    }

    /// One line per registered type: kind, type identifier and summary.
    public var catalogue: [String] {
        registrations.values.sorted { ($0.kind.rawValue, $0.type) < ($1.kind.rawValue, $1.type) }.map {
            "\($0.kind) \($0.type): \($0.summary)"
        }
    }

    /// The part of `entry`'s configuration its type publishes (``Plugin/publishedConfigurationKeys``):
    /// what an app needs to build the client half, never a secret.
    public func publishedConfiguration(of entry: Manifest.Entry) -> ConfigValue {
        guard let keys = registrations[entry.type]?.publishedKeys, case .object(let values) = entry.configuration
        else { return .object([:]) }
        return .object(values.filter { keys.contains($0.key) })
    }

    /// Checks every entry of `manifest` and builds its plugins. Nothing is built unless every
    /// entry is valid; the first problem is thrown as a ``ManifestError`` naming the entry.
    /// - Parameters:
    ///   - manifest: The manifest whose entries to build.
    ///   - environment: What every plugin is handed: logger, clock, CPU work, services.
    ///   - sides: Which halves of authenticators and identity providers to build: an app needs
    ///     the client halves, the token server the server halves. Configuration is checked either
    ///     way.
    public func load(
        _ manifest: Manifest,
        environment: PluginEnvironment = PluginEnvironment(),
        sides: PluginSides = [.client, .server]
    ) throws(ManifestError)
        -> LoadedPlugins
    {
        // Check every entry's type and configuration before building anything.
        var checked: [(Manifest.Entry, Registration, any Sendable)] = []
        for entry in manifest.entries {
            guard let registration = registrations[entry.type], registration.kind == entry.kind else {
                let known = types(of: entry.kind).map(\.rawValue).map(quoted).joined(separator: ", ")
                throw ManifestError(
                    source: manifest.source,
                    entry: entry.location,
                    path: "type",
                    problem:
                        "unknown \(entry.kind) type \(quoted(entry.type.rawValue)); known types: \(known.isEmpty ? "none" : known)"
                )
            }
            let decoded: (configuration: any Sendable, askedKeys: Set<String>)
            do {
                decoded = try registration.decode(entry.configuration)
            } catch {
                throw ManifestError(
                    source: manifest.source,
                    entry: entry.location,
                    path: ConfigurationPathComponent.render([.key("config")] + error.path),
                    problem: error.problem
                )
            }
            // A published key the configuration never reads is a plugin's typo: its value would
            // reach apps unchecked, or never.
            if let unread = registration.publishedKeys.subtracting(decoded.askedKeys).sorted().first {
                throw ManifestError(
                    source: manifest.source,
                    entry: entry.location,
                    path: "type",
                    problem:
                        "\(registration.implementation) publishes the configuration key \(quoted(unread)), which its "
                        + "configuration never reads; fix its publishedConfigurationKeys"
                )
            }
            checked.append((entry, registration, decoded.configuration))
        }

        var loaded = LoadedPlugins(source: manifest.source)
        for (entry, registration, configuration) in checked {
            let context = PluginContext(id: entry.id, name: entry.name, type: entry.type, environment: environment)
            let instance: Instance
            do {
                instance = try registration.make(configuration, context, sides)
            } catch let error as ConfigurationError {
                throw ManifestError(
                    source: manifest.source,
                    entry: entry.location,
                    path: ConfigurationPathComponent.render([.key("config")] + error.path),
                    problem: error.problem
                )
            } catch {
                throw ManifestError(
                    source: manifest.source,
                    entry: entry.location,
                    path: "config",
                    problem: String(describing: error)
                )
            }
            loaded.add(instance, entry: entry)
        }
        let pins = loaded.authenticators.filter { $0.kind == .pin }.map(\.descriptor.id)
        guard pins.count <= 1 else {
            throw ManifestError(
                source: manifest.source,
                path: "authenticators",
                problem:
                    "only one PIN authenticator may be configured; found \(pins.map(quoted).joined(separator: ", "))"
            )
        }
        environment.logger.info(
            "Loaded plugins",
            metadata: [
                "manifest": "\(manifest.source)",
                "plugins": "\(loaded.report.joined(separator: "; "))",
            ]
        )
        return loaded
    }

    private mutating func add(_ registration: Registration) throws(PluginRegistryError) {
        if let existing = registrations[registration.type] {
            throw PluginRegistryError(
                type: registration.type,
                problem: "is already registered by \(existing.implementation) (\(existing.kind))"
            )
        }
        registrations[registration.type] = registration
    }

    enum Instance {
        case validator(any Validator<String>)
        case authenticator(AuthenticatorKind, (any Authenticator)?, (any AuthenticatorVerifier)?)
        case identityProvider((any IdentityProvider)?, (any IdentityProviderHost)?)
    }

    /// A registered type with its configuration decoding and instance making, type-erased.
    private struct Registration: Sendable {
        let kind: PluginKind
        let type: PluginTypeIdentifier
        let summary: String
        let implementation: String
        let decode: @Sendable (ConfigValue) throws(ConfigurationError) -> (any Sendable, askedKeys: Set<String>)
        let make: @Sendable (any Sendable, PluginContext, PluginSides) throws -> Instance
        var publishedKeys: Set<String> = []

        /// A registration without configuration: entries must have no `config` keys.
        init(
            kind: PluginKind,
            type: PluginTypeIdentifier,
            summary: String,
            implementation: String,
            make: @escaping @Sendable (PluginContext, PluginSides) throws -> Instance
        ) {
            self.kind = kind
            self.type = type
            self.summary = summary
            self.implementation = implementation
            self.decode = { (value: ConfigValue) throws(ConfigurationError) -> (any Sendable, askedKeys: Set<String>) in
                (try ConfigurationDecoder().decode(NoConfiguration.self, from: value), [])
            }
            self.make = { _, context, sides in try make(context, sides) }
        }

        init<P: Plugin>(
            kind: PluginKind,
            plugin: P.Type,
            make: @escaping @Sendable (P.Configuration, PluginContext, PluginSides) throws -> Instance
        ) {
            self.kind = kind
            self.type = P.typeIdentifier
            self.summary = P.summary
            self.implementation = String(describing: plugin)
            self.publishedKeys = P.publishedConfigurationKeys
            self.decode = { (value: ConfigValue) throws(ConfigurationError) -> (any Sendable, askedKeys: Set<String>) in
                let (configuration, asked) = try ConfigurationDecoder().decodeReportingKeys(
                    P.Configuration.self,
                    from: value
                )
                return (configuration, asked)
            }
            self.make = { configuration, context, sides in
                guard let typed = configuration as? P.Configuration else {
                    throw ConfigurationError(path: [], problem: "internal error: configuration of the wrong type")
                }
                return try make(typed, context, sides)
            }
        }
    }
}

/// The configuration of a plugin that takes none: any key is refused.
struct NoConfiguration: Decodable, Sendable {}
