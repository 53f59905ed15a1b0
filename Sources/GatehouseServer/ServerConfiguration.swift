public import Foundation
import GatehouseKernel

/// The token server's own settings: the manifest's `server` section. Every key has a default.
public struct ServerConfiguration: Decodable, Sendable {
    /// An application (OAuth client) allowed to register installations.
    public struct Client: Decodable, Sendable, Equatable {
        /// The application's id, which an installation registers with as `app_id`.
        public var id: String
        /// Scopes granted when a registration asks for none.
        public var defaultScopes: [String]
        /// Scopes a registration may ask for.
        public var allowedScopes: [String]
        /// Scopes an implicit token (no user interaction) may carry, among the registration's own;
        /// empty (the default): implicit authentication is off.
        public var implicitScopes: [String]
        /// Scopes a device token (client credentials: the installation, no user) may carry; empty
        /// (the default): device authentication is off.
        public var deviceScopes: [String]
        /// Seconds a registration lasts; then the user must register again (absent: for ever).
        public var registrationValidity: Int?
        /// Whether the app may register users statelessly: one session kept in memory, no
        /// profile stored on the device, no authenticators, no mobile authentication.
        public var statelessRegistration: Bool
        /// App-to-web single sign-on: the web addresses a signed-in user may be sent to, each an
        /// `http(s)://host[:port]/path` the target must match in scheme, host and port and start
        /// with in its path. Empty (the default): single sign-on is off.
        public var webLoginTargets: [String]

        /// Creates an application in code; unlike decoding, nothing is checked here.
        public init(
            id: String,
            defaultScopes: [String],
            allowedScopes: [String],
            implicitScopes: [String] = [],
            deviceScopes: [String] = [],
            registrationValidity: Int? = nil,
            statelessRegistration: Bool = false,
            webLoginTargets: [String] = []
        ) {
            self.id = id
            self.defaultScopes = defaultScopes
            self.allowedScopes = allowedScopes
            self.implicitScopes = implicitScopes
            self.deviceScopes = deviceScopes
            self.registrationValidity = registrationValidity
            self.statelessRegistration = statelessRegistration
            self.webLoginTargets = webLoginTargets
        }

        private enum CodingKeys: String, CodingKey {
            case id, defaultScopes, allowedScopes, implicitScopes, deviceScopes, registrationValidity
            case statelessRegistration, webLoginTargets
        }

        /// Decodes a `clients` entry; throws when a default or implicit scope is not allowed, a scope is malformed,
        /// `registrationValidity` is outside 60–315360000 seconds, or a web login target is not
        /// `http(s)://host[:port]/path`. `allowedScopes` defaults to `read`, `defaultScopes` to all allowed ones.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            allowedScopes = try container.decode([String].self, forKey: .allowedScopes, default: ["read"])
            defaultScopes = try container.decode([String].self, forKey: .defaultScopes, default: allowedScopes)
            guard Set(defaultScopes).isSubset(of: allowedScopes) else {
                throw container.invalid(.defaultScopes, "every default scope must be among allowedScopes")
            }
            implicitScopes = try container.decode([String].self, forKey: .implicitScopes, default: [])
            guard Set(implicitScopes).isSubset(of: allowedScopes) else {
                throw container.invalid(.implicitScopes, "every implicit scope must be among allowedScopes")
            }
            deviceScopes = try container.decode([String].self, forKey: .deviceScopes, default: [])
            registrationValidity = try container.decodeIfPresent(Int.self, forKey: .registrationValidity)
            if let validity = registrationValidity, !(60...315_360_000).contains(validity) {
                throw container.invalid(.registrationValidity, "expected 60 to 315360000 seconds, found \(validity)")
            }
            statelessRegistration = try container.decode(Bool.self, forKey: .statelessRegistration, default: false)
            webLoginTargets = try container.decode([String].self, forKey: .webLoginTargets, default: [])
            for target in webLoginTargets {
                guard let url = URLComponents(string: target), ["http", "https"].contains(url.scheme ?? ""),
                    url.host?.isEmpty == false, url.user == nil, url.query == nil, url.fragment == nil,
                    url.path.hasPrefix("/")
                else {
                    throw container.invalid(
                        .webLoginTargets,
                        "expected http(s)://host[:port]/path, found \"\(target)\""
                    )
                }
            }
            for (key, scopes) in [(CodingKeys.allowedScopes, allowedScopes), (.deviceScopes, deviceScopes)] {
                for scope in scopes where !Self.isScopeToken(scope) {
                    throw container.invalid(
                        key,
                        "\"\(scope)\" is not a scope (RFC 6749 §3.3: printable ASCII, no space, quote or backslash)"
                    )
                }
            }
        }

        /// RFC 6749 §3.3 scope-token: %x21 / %x23-5B / %x5D-7E, at least one.
        static func isScopeToken(_ scope: String) -> Bool {
            !scope.isEmpty
                && scope.utf8.allSatisfy { $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }
        }
    }

    /// Applications allowed to register. Default: one, `gatehouse-example`, with scopes read and write.
    public var clients: [Client]
    /// The identity provider used when a registration names none. Default: the first listed.
    public var defaultIdentityProvider: String?
    /// Seconds an access token lives (10–86400, default 300).
    public var accessTokenLifetime: Int
    /// Seconds a refresh token lives (60–31536000, default 86400).
    public var refreshTokenLifetime: Int
    /// Seconds a registration or authentication flow may take (10–3600, default 300).
    public var flowLifetime: Int
    /// Wrong attempts before the user is deregistered (0 = unlimited, up to 100; default 5).
    public var maxPinFailures: Int
    /// The largest request body accepted, in bytes (1024–1048576, default 65536).
    public var maxRequestBytes: Int
    /// The authenticators a registration enrols, in order, by manifest id. Default: the PIN only.
    /// Must start with the PIN.
    public var registrationAuthenticators: [String]?
    /// Mobile authentication with push; absent: not offered.
    public var mobileAuth: MobileAuthConfiguration?
    /// The URL clients reach the server at (behind a proxy, the proxy's), e.g.
    /// `https://auth.example.com`. Cookies the server sets are `Secure` when it is https.
    public var publicURL: URL?
    /// Whether DPoP proofs must carry a nonce the server gave out (RFC 9449 §8; default false).
    /// The server sends a fresh one in every response's `DPoP-Nonce` header.
    public var requireDPoPNonce: Bool
    /// Resource servers (APIs) that may introspect tokens (RFC 7662), with HTTP Basic credentials.
    public var resourceServers: [ResourceServer]
    /// Seconds a web session opened by app-to-web single sign-on lasts (60–86400, default 3600).
    public var webSessionLifetime: Int
    /// Seconds between sweeps of expired state (1–3600, default 60).
    public var cleanupInterval: Int
    /// Rows of each kind one sweep removes at most (10–100000, default 1000).
    public var cleanupBatch: Int
    /// Seconds an installation that has nothing left (no profile, device token or flow) is kept
    /// after it registered (3600–31536000, default 30 days).
    public var idleInstallationLifetime: Int
    /// Installations one client address may register a minute (0–100000, default 30; 0: no
    /// limit), after a burst of `rateLimitBurst` (1–100000, default 30). Over HTTP only: an
    /// embedded server has no addresses. Behind a proxy every request has the proxy's address.
    public var rateLimitPerMinute: Int
    /// Installations one client address may register at once before `rateLimitPerMinute` applies (1–100000, default
    /// 30).
    public var rateLimitBurst: Int
    /// Mobile-auth events channels open at once on one instance, all profiles together
    /// (1–100000, default 256); over HTTP never more than half the connection slots.
    public var maxEventChannels: Int
    /// Wrong HTTP Basic secrets (portal API, introspection) one client address may send a minute,
    /// after as many at once (0–100000, default 10; 0: no limit). Past it every Basic request
    /// from the address is refused with 429, the right secret too, until the bucket refills.
    /// Over HTTP only; behind a proxy every request has the proxy's address.
    public var clientAuthenticationFailuresPerMinute: Int
    /// The admin API's clients and what admins may do (`server.admin`).
    public var admin: AdminConfiguration
    /// How long the audit trail keeps its events (`server.audit`).
    public var audit: AuditConfiguration

    /// An API that checks Gatehouse tokens by introspection.
    public struct ResourceServer: Decodable, Sendable, Equatable {
        /// The resource server's id, its HTTP Basic user name: not empty, without `:`.
        public var id: String
        /// At least 16 characters; compared by digest in constant time.
        public var secret: String

        /// Creates a resource server in code; unlike decoding, the secret's length is not checked here.
        public init(id: String, secret: String) {
            self.id = id
            self.secret = secret
        }

        private enum CodingKeys: String, CodingKey { case id, secret }

        /// Decodes a `resourceServers` entry; throws for an empty id, an id with `:`, or a secret under 16 bytes.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            secret = try container.decode(String.self, forKey: .secret)
            guard !id.isEmpty, !id.contains(":") else { throw container.invalid(.id, "a non-empty id without \":\"") }
            guard secret.utf8.count >= 16 else { throw container.invalid(.secret, "use at least 16 characters") }
        }
    }

    private enum CodingKeys: String, CodingKey {
        case clients, defaultIdentityProvider, accessTokenLifetime, refreshTokenLifetime, flowLifetime, maxPinFailures,
            maxRequestBytes, registrationAuthenticators, mobileAuth, publicURL, requireDPoPNonce, resourceServers,
            cleanupInterval, cleanupBatch, idleInstallationLifetime, webSessionLifetime, rateLimitPerMinute,
            rateLimitBurst, maxEventChannels, clientAuthenticationFailuresPerMinute, admin, audit
    }

    /// The defaults of every setting, as for a manifest whose `server` section is empty.
    public init() {
        clients = [Client(id: "gatehouse-example", defaultScopes: ["read"], allowedScopes: ["read", "write"])]
        defaultIdentityProvider = nil
        accessTokenLifetime = 300
        refreshTokenLifetime = 86400
        flowLifetime = 300
        maxPinFailures = 5
        maxRequestBytes = 65536
        registrationAuthenticators = nil
        mobileAuth = nil
        publicURL = nil
        requireDPoPNonce = false
        resourceServers = []
        webSessionLifetime = 3600
        cleanupInterval = 60
        cleanupBatch = 1000
        idleInstallationLifetime = 30 * 86400
        rateLimitPerMinute = 30
        rateLimitBurst = 30
        maxEventChannels = 256
        clientAuthenticationFailuresPerMinute = 10
        admin = AdminConfiguration()
        audit = AuditConfiguration()
    }

    /// Decodes the manifest's `server` section; a missing key takes its default, and a value out of its range throws,
    /// naming the key.
    public init(from decoder: any Decoder) throws {
        let defaults = ServerConfiguration()
        let container = try decoder.container(keyedBy: CodingKeys.self)
        clients = try container.decode([Client].self, forKey: .clients, default: defaults.clients)
        guard !clients.isEmpty else { throw container.invalid(.clients, "list at least one client") }
        defaultIdentityProvider = try container.decodeIfPresent(String.self, forKey: .defaultIdentityProvider)
        accessTokenLifetime = try container.decode(Int.self, forKey: .accessTokenLifetime, default: 300, in: 10...86400)
        refreshTokenLifetime = try container.decode(
            Int.self,
            forKey: .refreshTokenLifetime,
            default: 86400,
            in: 60...31_536_000
        )
        flowLifetime = try container.decode(Int.self, forKey: .flowLifetime, default: 300, in: 10...3600)
        maxPinFailures = try container.decode(Int.self, forKey: .maxPinFailures, default: 5, in: 0...100)
        maxRequestBytes = try container.decode(Int.self, forKey: .maxRequestBytes, default: 65536, in: 1024...1_048_576)
        registrationAuthenticators = try container.decodeIfPresent([String].self, forKey: .registrationAuthenticators)
        if let listed = registrationAuthenticators, listed.isEmpty || Set(listed).count != listed.count {
            throw container.invalid(.registrationAuthenticators, "list each authenticator once, the PIN first")
        }
        mobileAuth = try container.decodeIfPresent(MobileAuthConfiguration.self, forKey: .mobileAuth)
        if let text = try container.decodeIfPresent(String.self, forKey: .publicURL) {
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
                url.query == nil, url.fragment == nil, url.user == nil
            else {
                throw container.invalid(.publicURL, "expected an http or https URL without query, found \"\(text)\"")
            }
            // Kept without a trailing slash: endpoint paths are appended to it.
            publicURL = text.hasSuffix("/") ? URL(string: String(text.dropLast())) : url
        }
        requireDPoPNonce = try container.decode(Bool.self, forKey: .requireDPoPNonce, default: false)
        resourceServers = try container.decode([ResourceServer].self, forKey: .resourceServers, default: [])
        webSessionLifetime = try container.decode(Int.self, forKey: .webSessionLifetime, default: 3600, in: 60...86400)
        cleanupInterval = try container.decode(Int.self, forKey: .cleanupInterval, default: 60, in: 1...3600)
        cleanupBatch = try container.decode(Int.self, forKey: .cleanupBatch, default: 1000, in: 10...100_000)
        idleInstallationLifetime = try container.decode(
            Int.self,
            forKey: .idleInstallationLifetime,
            default: 30 * 86400,
            in: 3600...31_536_000
        )
        rateLimitPerMinute = try container.decode(Int.self, forKey: .rateLimitPerMinute, default: 30, in: 0...100_000)
        rateLimitBurst = try container.decode(Int.self, forKey: .rateLimitBurst, default: 30, in: 1...100_000)
        maxEventChannels = try container.decode(Int.self, forKey: .maxEventChannels, default: 256, in: 1...100_000)
        clientAuthenticationFailuresPerMinute = try container.decode(
            Int.self,
            forKey: .clientAuthenticationFailuresPerMinute,
            default: 10,
            in: 0...100_000
        )
        admin = try container.decode(AdminConfiguration.self, forKey: .admin, default: defaults.admin)
        audit = try container.decode(AuditConfiguration.self, forKey: .audit, default: defaults.audit)
        guard Set(resourceServers.map(\.id)).count == resourceServers.count else {
            throw container.invalid(.resourceServers, "each resource server id must be unique")
        }
    }
}
