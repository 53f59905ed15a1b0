/// The stable name of a plugin type, such as `"pin"`, `"biometric.simulated"` or `"xignin.email"`.
///
/// Manifests refer to plugin types by this name, so it must never change once published.
/// Names are short, lowercase, dot-separated words.
public struct PluginTypeIdentifier: RawRepresentable, Hashable, Comparable, Sendable, Codable,
    ExpressibleByStringLiteral, CustomStringConvertible
{
    /// The name itself, e.g. `"xignin.email"`.
    public let rawValue: String

    /// Makes an identifier from its name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Makes an identifier from its name.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// Makes an identifier from a literal, as in `static let typeIdentifier: PluginTypeIdentifier =
    /// "acme.voice"`.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// The name itself.
    public var description: String { rawValue }
    /// Orders identifiers by name, for sorted listings.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The three kinds of plugin the kernel knows. A closed set: every plugin is one of them.
public enum PluginKind: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Checks a factor of the user: the PIN, biometrics, a custom authenticator.
    case authenticator
    /// Establishes who the user is at registration.
    case identityProvider
    /// Checks what a person typed.
    case validator

    /// The manifest section that lists plugins of this kind.
    public var manifestSection: String {
        switch self {
        case .authenticator: "authenticators"
        case .identityProvider: "identityProviders"
        case .validator: "validators"
        }
    }

    /// The kind in words, as messages use it: `"identity provider"`.
    public var description: String {
        switch self {
        case .authenticator: "authenticator"
        case .identityProvider: "identity provider"
        case .validator: "validator"
        }
    }
}

/// What an app sees of a configured authenticator or identity provider: the manifest id, the
/// plugin type and a display name.
public struct PluginDescriptor: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The id of the manifest entry, unique in the manifest, e.g. `"pin"` or `"employees"`.
    public var id: String
    /// The plugin type, e.g. `"pin"` or `"idp.customAPI"`.
    public var type: PluginTypeIdentifier
    /// A name to show to people.
    public var name: String

    /// Makes a descriptor.
    public init(id: String, type: PluginTypeIdentifier, name: String) {
        self.id = id
        self.type = type
        self.name = name
    }

    /// The id and the type, e.g. `"pin (pin)"`.
    public var description: String { "\(id) (\(type))" }
}
