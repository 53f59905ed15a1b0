import GatehouseKernel

/// The manifest's `login` section: the hosted login's OAuth clients, code lifetime and lockout.
public struct LoginConfiguration: Decodable, Sendable {
    /// An OAuth client of the hosted login (the token server's `idp.browser` is one).
    public struct Client: Decodable, Sendable {
        /// The OAuth `client_id`. Unique among the clients.
        public var id: String
        /// Shown on the login and consent pages.
        public var name: String
        /// Redirect URIs compared exactly (RFC 9700 §4.1.1).
        public var redirectURIs: [String]
        /// Native apps' loopback redirects (`http://127.0.0.1:<any port>/<path>`, RFC 8252 §7.3):
        /// the port may differ, nothing else.
        public var loopbackRedirectPaths: [String]
        /// Ask the user to allow the client before a code is issued.
        public var consent: Bool
        /// The scopes the client may ask for (default: openid); any other is refused.
        public var scopes: [String]

        private enum CodingKeys: String, CodingKey {
            case id, name, redirectURIs, loopbackRedirectPaths, consent, scopes
        }

        /// Reads the client; only `id` is required (`name` defaults to it). Throws when a scope
        /// is not printable ASCII without space, quote or backslash, when there is neither a
        /// redirect URI nor a loopback redirect path, or when a loopback path does not start with `/`.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            name = try container.decode(String.self, forKey: .name, default: id)
            redirectURIs = try container.decode([String].self, forKey: .redirectURIs, default: [])
            loopbackRedirectPaths = try container.decode([String].self, forKey: .loopbackRedirectPaths, default: [])
            consent = try container.decode(Bool.self, forKey: .consent, default: false)
            scopes = try container.decode([String].self, forKey: .scopes, default: ["openid"])
            for scope in scopes
            where scope.isEmpty || !scope.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C }) {
                throw container.invalid(
                    .scopes,
                    "\"\(scope)\" is not a scope (printable ASCII, no space, quote or backslash)"
                )
            }
            guard !redirectURIs.isEmpty || !loopbackRedirectPaths.isEmpty else {
                throw container.invalid(.redirectURIs, "list a redirect URI or a loopback redirect path")
            }
            for path in loopbackRedirectPaths where !path.hasPrefix("/") {
                throw container.invalid(.loopbackRedirectPaths, "\"\(path)\" must start with /")
            }
        }
    }

    /// The OAuth clients that may use the hosted login (`clients`, at least one).
    public var clients: [Client]
    /// Seconds an authorization code may wait to be redeemed (10–600, default 60; RFC 9700 asks
    /// for short-lived codes, at most 10 minutes).
    public var codeLifetime: Int
    /// Seconds the login page stays valid once shown (60–3600, default 600).
    public var pageLifetime: Int
    /// Wrong passwords in a row before the account is locked (1–20, default 5).
    public var maxFailedLogins: Int
    /// Seconds an account stays locked (60–86400, default 900).
    public var lockoutDuration: Int
    /// The password hash's cost, as log2 of scrypt's N (14–20, default 15).
    public var passwordCost: Int
    /// Password checks one client address may ask for a minute, whatever the usernames
    /// (0–10000, default 30; 0: no limit). The lockout counts per username; this stops one
    /// source from spreading guesses over many.
    public var passwordChecksPerMinute: Int
    /// Sign-in pages one client address may open a minute (each stores the authorization request
    /// for `pageLifetime`; 0–10000, default 60; 0: no limit).
    public var pagesPerMinute: Int

    private enum CodingKeys: String, CodingKey {
        case clients, codeLifetime, pageLifetime, maxFailedLogins, lockoutDuration, passwordCost,
            passwordChecksPerMinute, pagesPerMinute
    }

    /// Reads the section. Throws on a value out of its range, when `clients` is missing or empty,
    /// or when two clients share an id.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        clients = try container.decode([Client].self, forKey: .clients)
        codeLifetime = try container.decode(Int.self, forKey: .codeLifetime, default: 60, in: 10...600)
        pageLifetime = try container.decode(Int.self, forKey: .pageLifetime, default: 600, in: 60...3600)
        maxFailedLogins = try container.decode(Int.self, forKey: .maxFailedLogins, default: 5, in: 1...20)
        lockoutDuration = try container.decode(Int.self, forKey: .lockoutDuration, default: 900, in: 60...86400)
        passwordCost = try container.decode(Int.self, forKey: .passwordCost, default: 15, in: 14...20)
        pagesPerMinute = try container.decode(Int.self, forKey: .pagesPerMinute, default: 60, in: 0...10000)
        passwordChecksPerMinute = try container.decode(
            Int.self,
            forKey: .passwordChecksPerMinute,
            default: 30,
            in: 0...10000
        )
        guard !clients.isEmpty else { throw container.invalid(.clients, "list at least one client") }
        guard Set(clients.map(\.id)).count == clients.count else {
            throw container.invalid(.clients, "each client id must be unique")
        }
    }

    /// Whether `redirectURI` is one of `client`'s: an exact match, or a loopback redirect on any
    /// port with one of its paths.
    public static func allows(_ redirectURI: String, for client: Client) -> Bool {
        if client.redirectURIs.contains(redirectURI) { return true }
        for path in client.loopbackRedirectPaths {
            for host in ["http://127.0.0.1:", "http://[::1]:"] where redirectURI.hasPrefix(host) {
                let rest = redirectURI.dropFirst(host.count)
                let port = rest.prefix { $0.isASCII && $0.isNumber }
                guard (1...5).contains(port.count), let number = Int(port), (1...65535).contains(number) else {
                    continue
                }
                if rest.dropFirst(port.count) == path { return true }
            }
        }
        return false
    }
}
