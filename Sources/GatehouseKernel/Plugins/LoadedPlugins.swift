// What PluginRegistry.load hands back, the sides it builds, and the error of registering a type.

/// Which halves of two-sided plugins to build.
public struct PluginSides: OptionSet, Sendable {
    /// The bits of the set: 1 for ``client``, 2 for ``server``.
    public let rawValue: Int
    /// Makes a set from its bits; use ``client`` and ``server`` instead.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The halves an app runs: `Authenticator`, `IdentityProvider`.
    public static let client = PluginSides(rawValue: 1)
    /// The halves the token server runs: `AuthenticatorVerifier`, `IdentityProviderHost`.
    public static let server = PluginSides(rawValue: 2)
}

/// A plugin type could not be registered.
public struct PluginRegistryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The plugin type identifier that could not be registered.
    public var type: PluginTypeIdentifier
    /// What is wrong, as the end of a sentence that starts with the type: "is already registered by
    /// …".
    public var problem: String

    /// The type and the problem, e.g. `plugin type "acme.voice" is already registered by
    /// VoicePlugin (authenticator)`.
    public var description: String { "plugin type \(quoted(type.rawValue)) \(problem)" }
}

/// The plugins a manifest asked for, built and ready.
public struct LoadedPlugins: Sendable {
    /// A validator with its manifest entry.
    public struct LoadedValidator: Sendable {
        /// The validator's id in the manifest, which other plugins' configuration names it by.
        public var id: String
        /// The validator's plugin type.
        public var type: PluginTypeIdentifier
        /// The validator, checking strings.
        public var validator: any Validator<String>
    }

    /// The halves of an authenticator that were asked for.
    public struct LoadedAuthenticator: Sendable {
        /// The authenticator's manifest id, name and plugin type.
        public var descriptor: AuthenticatorDescriptor
        /// PIN, biometric or custom.
        public var kind: AuthenticatorKind
        /// The client half; `nil` when loaded for the server only.
        public var authenticator: (any Authenticator)?
        /// The server half; `nil` when loaded for the client only.
        public var verifier: (any AuthenticatorVerifier)?
    }

    /// The halves of an identity provider that were asked for.
    public struct LoadedIdentityProvider: Sendable {
        /// The identity provider's manifest id, name and plugin type.
        public var descriptor: IdentityProviderDescriptor
        /// The client half; `nil` when loaded for the server only.
        public var identityProvider: (any IdentityProvider)?
        /// The server half; `nil` when loaded for the client only.
        public var host: (any IdentityProviderHost)?
    }

    /// Where the manifest came from (a path, or a name for one built in code), for messages and
    /// logs.
    public let source: String
    /// The validators, in manifest order.
    public private(set) var validators: [LoadedValidator] = []
    /// The authenticators, in manifest order; at most one is of kind ``AuthenticatorKind/pin``.
    public private(set) var authenticators: [LoadedAuthenticator] = []
    /// The identity providers, in manifest order.
    public private(set) var identityProviders: [LoadedIdentityProvider] = []

    init(source: String) { self.source = source }

    /// No plugins: for a client that only reads what its device holds (its profiles).
    public static var none: LoadedPlugins { LoadedPlugins(source: "no plugins") }

    /// The authenticator with manifest id `id`.
    public func authenticator(id: String) -> LoadedAuthenticator? {
        authenticators.first { $0.descriptor.id == id }
    }

    /// The PIN authenticator: the one entry of kind ``AuthenticatorKind/pin``.
    public var pinAuthenticator: LoadedAuthenticator? {
        authenticators.first { $0.kind == .pin }
    }

    /// The validator with manifest id `id`.
    public func validator(id: String) -> (any Validator<String>)? {
        validators.first { $0.id == id }?.validator
    }

    /// What was loaded, one line per plugin: `validator email (xignin.email)`.
    public var report: [String] {
        validators.map { "validator \($0.id) (\($0.type))" }
            + authenticators.map { "authenticator \($0.descriptor)" }
            + identityProviders.map { "identity provider \($0.descriptor)" }
    }

    mutating func add(_ instance: PluginRegistry.Instance, entry: Manifest.Entry) {
        let name = entry.name ?? entry.id
        switch instance {
        case .validator(let validator):
            validators.append(LoadedValidator(id: entry.id, type: entry.type, validator: validator))
        case .authenticator(let kind, let authenticator, let verifier):
            authenticators.append(
                LoadedAuthenticator(
                    descriptor: AuthenticatorDescriptor(id: entry.id, type: entry.type, name: name),
                    kind: kind,
                    authenticator: authenticator,
                    verifier: verifier
                )
            )
        case .identityProvider(let identityProvider, let host):
            identityProviders.append(
                LoadedIdentityProvider(
                    descriptor: IdentityProviderDescriptor(id: entry.id, type: entry.type, name: name),
                    identityProvider: identityProvider,
                    host: host
                )
            )
        }
    }
}
