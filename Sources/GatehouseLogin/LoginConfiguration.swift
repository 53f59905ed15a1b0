import Foundation
import GatehouseKernel
public import GatehouseOpenID
import GatehouseOutbound

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
    }
}

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
        /// A confidential client's secret (at least 16 characters), sent to the token endpoint
        /// with HTTP Basic (`client_secret_basic`) or in the form (`client_secret_post`). A client
        /// without one is public: it proves itself with PKCE alone.
        public var secret: String?
        /// Where RP-initiated logout may send the browser afterwards, compared exactly.
        public var postLogoutRedirectURIs: [String]
        /// Where the login POSTs a logout token when a session this client took part in ends
        /// (OpenID Connect Back-Channel Logout 1.0); http(s) only.
        public var backchannelLogoutURI: String?
        /// `public` (default): `sub` is the user's Gatehouse subject, the same for every client;
        /// `pairwise`: a value of its own for this client's redirect host (Core 1.0 §8.1).
        public var subjectType: SubjectType
        /// How its ID tokens are signed: RS256 (default) or ES256.
        public var idTokenSigningAlgorithm: JSONWebSignature.Algorithm
        /// Whether the token endpoint gives this client refresh tokens (default true).
        public var refreshTokens: Bool
        /// The id of a `federation` provider this client's users sign in with, without the
        /// login's own form (an app's `idp.browser` registering through an organisation's
        /// provider); nil: the login page, with a button for each provider.
        public var federation: String?
        /// How users may sign in to this client (`signInMethods`): by default every method the
        /// login offers (the password, and `push`, `qr` and `passkey` when configured).
        public var signInMethods: [SignInMethod]?

        /// How `sub` is chosen for a client.
        public enum SubjectType: String, Decodable, Sendable {
            /// The user's subject, the same at every client.
            case `public`
            /// A value of the user's own for each sector (the redirect URIs' host).
            case pairwise
        }

        /// Whether the client has a secret (it is confidential).
        public var isConfidential: Bool { secret != nil }

        private enum CodingKeys: String, CodingKey {
            case id, name, redirectURIs, loopbackRedirectPaths, consent, scopes, secret, postLogoutRedirectURIs,
                backchannelLogoutURI, subjectType, idTokenSigningAlgorithm, refreshTokens, federation, signInMethods
        }

        /// Reads the client; only `id` is required (`name` defaults to it). Throws when a scope
        /// is not printable ASCII without space, quote or backslash, when there is neither a
        /// redirect URI nor a loopback redirect path, or when a loopback path does not start with `/`.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            // `@…` names the login's own clients.
            guard !id.hasPrefix("@") else { throw container.invalid(.id, "a client id cannot start with @") }
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
            secret = try container.decodeIfPresent(String.self, forKey: .secret)
            if let secret, secret.utf8.count < 16 { throw container.invalid(.secret, "use at least 16 characters") }
            postLogoutRedirectURIs = try container.decode([String].self, forKey: .postLogoutRedirectURIs, default: [])
            for uri in redirectURIs + postLogoutRedirectURIs where !Self.isAbsoluteURI(uri) {
                throw container.invalid(.redirectURIs, "\"\(uri)\" is not an absolute URI without a fragment")
            }
            backchannelLogoutURI = try container.decodeIfPresent(String.self, forKey: .backchannelLogoutURI)
            if let uri = backchannelLogoutURI {
                do { _ = try OutboundURL(uri) } catch {
                    throw container.invalid(.backchannelLogoutURI, "\"\(uri)\": \(error.reason)")
                }
            }
            subjectType = try container.decode(SubjectType.self, forKey: .subjectType, default: .public)
            idTokenSigningAlgorithm = try container.decode(
                JSONWebSignature.Algorithm.self,
                forKey: .idTokenSigningAlgorithm,
                default: .rs256
            )
            refreshTokens = try container.decode(Bool.self, forKey: .refreshTokens, default: true)
            federation = try container.decodeIfPresent(String.self, forKey: .federation)
            signInMethods = try container.decodeIfPresent([SignInMethod].self, forKey: .signInMethods)
            if let methods = signInMethods, methods.isEmpty || Set(methods).count != methods.count {
                throw container.invalid(.signInMethods, "list one or more methods, each once")
            }
            if subjectType == .pairwise, Set(redirectURIs.compactMap { URLComponents(string: $0)?.host }).count > 1 {
                throw container.invalid(.subjectType, "pairwise subjects need all redirect URIs on one host")
            }
        }

        /// The sector of a pairwise client: its redirect URIs' host.
        var sector: String {
            redirectURIs.first.flatMap { URLComponents(string: $0)?.host?.lowercased() } ?? "loopback"
        }

        /// `scheme://…` with a scheme and no fragment, RFC 3986 characters only.
        static func isAbsoluteURI(_ uri: String) -> Bool {
            guard uri.utf8.count <= 2048, !uri.contains("#"),
                uri.utf8.allSatisfy({
                    (0x21...0x7E).contains($0) && $0 != 0x5C && $0 != 0x22 && $0 != 0x3C && $0 != 0x3E
                }),
                let parts = URLComponents(string: uri), let scheme = parts.scheme, !scheme.isEmpty
            else { return false }
            return true
        }
    }

    /// An external OpenID provider users may sign in through (federation): an organisation's
    /// own. The login is its client, with the redirect URI `<server>/login/federation/callback`.
    public struct FederatedProvider: Decodable, Sendable {
        /// Names it in the manifest and in URLs: letters, digits, `-` and `_`.
        public var id: String
        /// The button's label: "Sign in with <name>".
        public var name: String
        /// The provider's issuer; discovery is read from `<issuer>/.well-known/openid-configuration`.
        public var issuer: String
        /// The login's client id there.
        public var clientID: String
        /// The login's client secret there (nil: a public client, PKCE alone).
        public var clientSecret: String?
        /// The scopes asked for (default openid email profile).
        public var scopes: [String]
        /// Refuse a user whose e-mail address the provider has not verified (default false).
        public var requireVerifiedEmail: Bool
        /// A user whose verified e-mail address is a username of the directory signs in as that
        /// user (default false: each provider's users are subjects of their own,
        /// `<id>|<sub>`). Only for a provider trusted to verify addresses.
        public var linkVerifiedEmail: Bool

        private enum CodingKeys: String, CodingKey {
            case id, name, issuer, clientID, clientSecret, scopes, requireVerifiedEmail, linkVerifiedEmail
        }

        /// Reads a provider; throws on an id that is not a plain name, or an issuer that is not an
        /// absolute URL without query or fragment.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            guard (1...64).contains(id.utf8.count),
                id.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") })
            else { throw container.invalid(.id, "use 1 to 64 letters, digits, - and _") }
            name = try container.decode(String.self, forKey: .name, default: id)
            issuer = try container.decode(String.self, forKey: .issuer)
            guard Client.isAbsoluteURI(issuer), !issuer.contains("?") else {
                throw container.invalid(.issuer, "\"\(issuer)\" is not an absolute URL without query or fragment")
            }
            clientID = try container.decode(String.self, forKey: .clientID)
            clientSecret = try container.decodeIfPresent(String.self, forKey: .clientSecret)
            scopes = try container.decode([String].self, forKey: .scopes, default: ["openid", "email", "profile"])
            requireVerifiedEmail = try container.decode(Bool.self, forKey: .requireVerifiedEmail, default: false)
            linkVerifiedEmail = try container.decode(Bool.self, forKey: .linkVerifiedEmail, default: false)
        }
    }

    /// The hosted login's signing keys: each algorithm has a key that signs and a next key that is
    /// published beforehand, so a relying party that caches the key set knows it before it signs.
    public struct SigningKeys: Decodable, Sendable {
        /// Seconds a key signs before the next one takes over (3600–31536000, default 30 days).
        public var rotationPeriod: Int

        private enum CodingKeys: String, CodingKey { case rotationPeriod }

        /// The defaults.
        public init() { rotationPeriod = 30 * 86400 }

        /// Reads the section; throws on a period out of range.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            rotationPeriod = try container.decode(
                Int.self,
                forKey: .rotationPeriod,
                default: 30 * 86400,
                in: 3600...31_536_000
            )
        }
    }

    /// A way to sign in at the hosted login.
    public enum SignInMethod: String, Decodable, Sendable, CaseIterable {
        /// The directory's e-mail address and password.
        case password
        /// "Approve on your phone": a push with number matching to the user's enrolled devices.
        case push
        /// "Scan with your phone": a QR code on the page that an enrolled phone scans and approves.
        case qr
        /// A passkey (WebAuthn) registered on a "your passkeys" page.
        case passkey
    }

    /// Signing in with an enrolled phone (`phone`): the mobile authentication types it uses.
    public struct Phone: Decodable, Sendable {
        /// A `server.mobileAuth` type with `delivery: push` (`pushType`): "approve on your phone".
        public var pushType: String?
        /// A `server.mobileAuth` type with `delivery: otp` (`qrType`): "scan with your phone".
        public var qrType: String?
        /// Sign-in pushes one user may be sent in a burst (1–20, default 5), then one a minute; one
        /// waits at a time.
        public var pushesPerUser: Int
        /// QR codes one client address may ask for a minute (1–600, default 10).
        public var qrCodesPerMinute: Int

        private enum CodingKeys: String, CodingKey { case pushType, qrType, pushesPerUser, qrCodesPerMinute }

        /// Reads the section; at least one of `pushType` and `qrType`.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            pushType = try container.decodeIfPresent(String.self, forKey: .pushType)
            qrType = try container.decodeIfPresent(String.self, forKey: .qrType)
            pushesPerUser = try container.decode(Int.self, forKey: .pushesPerUser, default: 5, in: 1...20)
            qrCodesPerMinute = try container.decode(Int.self, forKey: .qrCodesPerMinute, default: 10, in: 1...600)
            guard pushType != nil || qrType != nil else {
                throw container.invalid(.pushType, "name a pushType, a qrType or both")
            }
        }
    }

    /// Passkeys (`passkeys`): WebAuthn Level 2 registration and sign-in.
    public struct Passkeys: Decodable, Sendable {
        /// The WebAuthn relying party id (`relyingPartyID`): by default the host of the server's
        /// public URL. Browsers take only a domain (`localhost` included), never an IP address.
        public var relyingPartyID: String?
        /// The name browsers show for the relying party (default "Gatehouse").
        public var relyingPartyName: String
        /// Passkey sign-in attempts one client address may make a minute (1–600, default 30).
        public var attemptsPerMinute: Int

        private enum CodingKeys: String, CodingKey { case relyingPartyID, relyingPartyName, attemptsPerMinute }

        /// Every setting has a default.
        public init() {
            relyingPartyID = nil
            relyingPartyName = "Gatehouse"
            attemptsPerMinute = 30
        }

        /// Reads the section.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            relyingPartyID = try container.decodeIfPresent(String.self, forKey: .relyingPartyID)
            relyingPartyName = try container.decode(String.self, forKey: .relyingPartyName, default: "Gatehouse")
            attemptsPerMinute = try container.decode(Int.self, forKey: .attemptsPerMinute, default: 30, in: 1...600)
            if let id = relyingPartyID,
                id.isEmpty
                    || !id.utf8.allSatisfy({
                        (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x2E
                    })
            {
                throw container.invalid(.relyingPartyID, "a lower-case host name such as login.example.com")
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
    /// Seconds an ID token is valid (60–3600, default 300).
    public var idTokenLifetime: Int
    /// Seconds an access token for the userinfo endpoint is valid (60–3600, default 300).
    public var accessTokenLifetime: Int
    /// Seconds a web client's refresh token is valid (300–31536000, default 30 days); each use
    /// rotates it, and using a spent one again revokes the grant.
    public var refreshTokenLifetime: Int
    /// Seconds a browser stays signed in at the login (300–2592000, default 10 hours).
    public var sessionLifetime: Int
    /// Key rotation.
    public var signingKeys: SigningKeys
    /// External OpenID providers users may sign in through.
    public var federation: [FederatedProvider]
    /// Signing in with an enrolled phone; nil: not offered.
    public var phone: Phone?
    /// Passkeys; nil: not offered.
    public var passkeys: Passkeys?

    private enum CodingKeys: String, CodingKey {
        case clients, codeLifetime, pageLifetime, maxFailedLogins, lockoutDuration, passwordCost,
            passwordChecksPerMinute, pagesPerMinute, idTokenLifetime, accessTokenLifetime, refreshTokenLifetime,
            sessionLifetime, signingKeys, federation, phone, passkeys
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
        idTokenLifetime = try container.decode(Int.self, forKey: .idTokenLifetime, default: 300, in: 60...3600)
        accessTokenLifetime = try container.decode(Int.self, forKey: .accessTokenLifetime, default: 300, in: 60...3600)
        refreshTokenLifetime = try container.decode(
            Int.self,
            forKey: .refreshTokenLifetime,
            default: 30 * 86400,
            in: 300...31_536_000
        )
        sessionLifetime = try container.decode(Int.self, forKey: .sessionLifetime, default: 36000, in: 300...2_592_000)
        signingKeys = try container.decode(SigningKeys.self, forKey: .signingKeys, default: SigningKeys())
        federation = try container.decode([FederatedProvider].self, forKey: .federation, default: [])
        phone = try container.decodeIfPresent(Phone.self, forKey: .phone)
        passkeys = try container.decodeIfPresent(Passkeys.self, forKey: .passkeys)
        for client in clients {
            for method in client.signInMethods ?? [] where !offers(method) {
                throw container.invalid(
                    .clients,
                    "client \(client.id) lists the sign-in method \(method.rawValue), which the login does not offer"
                        + " (configure \(method == .passkey ? "passkeys" : "phone.\(method.rawValue)Type"))"
                )
            }
        }
        guard Set(federation.map(\.id)).count == federation.count else {
            throw container.invalid(.federation, "each provider id must be unique")
        }
        for client in clients where client.federation != nil {
            guard federation.contains(where: { $0.id == client.federation }) else {
                throw container.invalid(
                    .clients,
                    "client \(client.id) names federation \(client.federation ?? ""), which is not listed"
                )
            }
        }
        guard !clients.isEmpty else { throw container.invalid(.clients, "list at least one client") }
        guard Set(clients.map(\.id)).count == clients.count else {
            throw container.invalid(.clients, "each client id must be unique")
        }
    }

    /// Whether the login is configured for `method`.
    public func offers(_ method: SignInMethod) -> Bool {
        switch method {
        case .password: true
        case .push: phone?.pushType != nil
        case .qr: phone?.qrType != nil
        case .passkey: passkeys != nil
        }
    }

    /// How users may sign in to `client`: its own list, else every method the login offers.
    public func signInMethods(for client: Client) -> [SignInMethod] {
        client.signInMethods ?? SignInMethod.allCases.filter(offers)
    }

    /// Whether `redirectURI` is one of `client`'s: an exact match, or a loopback redirect on any
    /// port with one of its paths.
    public static func allows(_ redirectURI: String, for client: Client) -> Bool {
        // Byte for byte: Swift's == takes canonically equivalent texts (a Kelvin sign for K) as
        // equal, and a URI the browser is sent to must be exactly the registered one.
        guard redirectURI.utf8.allSatisfy({ $0 < 0x80 }) else { return false }
        if client.redirectURIs.contains(where: { $0.utf8.elementsEqual(redirectURI.utf8) }) { return true }
        for path in client.loopbackRedirectPaths {
            for host in ["http://127.0.0.1:", "http://[::1]:"] where redirectURI.hasPrefix(host) {
                let rest = redirectURI.dropFirst(host.count)
                let port = rest.prefix { $0.isASCII && $0.isNumber }
                guard (1...5).contains(port.count), let number = Int(port), (1...65535).contains(number) else {
                    continue
                }
                if rest.dropFirst(port.count).utf8.elementsEqual(path.utf8) { return true }
            }
        }
        return false
    }
}
