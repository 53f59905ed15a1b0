import Crypto
public import Foundation
public import GatehouseKernel
public import GatehouseProtocol
public import Logging

/// How a ``UserClient`` is set up.
public struct ClientConfiguration: Sendable {
    /// Where the client keeps its database and, by default, its key file.
    public var dataDirectory: URL
    /// How the token server is reached: ``HTTPTransport`` or an embedded server.
    public var transport: any TokenServerTransport
    /// The application id the server knows (a `clients` entry of its manifest).
    public var appID: String
    /// The app's plugins; only their client halves are used (load with `sides: .client`).
    public var plugins: LoadedPlugins
    /// Where the key sealing the client's secrets comes from. Default: a 0600 key file in
    /// ``dataDirectory``.
    public var keyStore: any KeyStore
    /// The clock for DPoP proof times and token expiry. Default: the system clock.
    public var clock: any WallClock
    /// Where the client logs; it never logs secrets. Default label: `gatehouse.client`.
    public var logger: Logger

    /// Creates a configuration; a `nil` key store keeps the key in `client.key` inside `dataDirectory`.
    public init(
        dataDirectory: URL,
        transport: any TokenServerTransport,
        appID: String,
        plugins: LoadedPlugins,
        keyStore: (any KeyStore)? = nil,
        clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "gatehouse.client")
    ) {
        self.dataDirectory = dataDirectory
        self.transport = transport
        self.appID = appID
        self.plugins = plugins
        self.keyStore = keyStore ?? FileKeyStore(path: dataDirectory.appendingPathComponent("client.key").path)
        self.clock = clock
        self.logger = logger
    }
}

/// A successful registration.
public struct RegistrationSuccess: Sendable {
    /// The profile the registration made.
    public var profile: UserProfile
    /// The identity provider the user registered with.
    public var identityProvider: IdentityProviderDescriptor
    /// What a custom-API identity provider reported.
    public var info: CustomInfo?
}

/// An authenticator as the app sees it for one profile.
public struct AuthenticatorInfo: Sendable, Hashable {
    /// The authenticator's manifest id, type and name, as the server offers it.
    public var descriptor: AuthenticatorDescriptor
    /// Whether the authenticator is the PIN, a biometric or a custom one.
    public var kind: AuthenticatorKind
    /// Whether the profile has registered this authenticator on this device.
    public var isRegistered: Bool
    /// Whether authentication uses this one when no authenticator is named; the PIN until another is chosen.
    public var isPreferred: Bool

    /// The authenticator's manifest id.
    public var id: String { descriptor.id }
    /// The authenticator's display name from the manifest.
    public var name: String { descriptor.name }
}

/// Which authenticators to list.
public enum AuthenticatorFilter: Sendable {
    case registered
    case nonRegistered
    case all
}

/// A profile as the device knows it, without its secrets.
public struct ProfileSummary: Sendable, Hashable {
    /// The profile, as the server named it.
    public var profile: UserProfile
    /// The id of the identity provider the user registered with.
    public var identityProvider: String
    /// The user's identifier at that identity provider (nil for a profile registered before the
    /// device kept it).
    public var subject: String?
    /// When the profile was registered on this device.
    public var registeredAt: Date
}
