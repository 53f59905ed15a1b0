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
    public var clock: any WallClock
    public var logger: Logger

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
    public var profile: UserProfile
    public var identityProvider: IdentityProviderDescriptor
    /// What a custom-API identity provider reported.
    public var info: CustomInfo?
}

/// An authenticator as the app sees it for one profile.
public struct AuthenticatorInfo: Sendable, Hashable {
    public var descriptor: AuthenticatorDescriptor
    public var kind: AuthenticatorKind
    public var isRegistered: Bool
    public var isPreferred: Bool

    public var id: String { descriptor.id }
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
    public var profile: UserProfile
    /// The id of the identity provider the user registered with.
    public var identityProvider: String
    /// The user's identifier at that identity provider (nil for a profile registered before the
    /// device kept it).
    public var subject: String?
    public var registeredAt: Date
}
