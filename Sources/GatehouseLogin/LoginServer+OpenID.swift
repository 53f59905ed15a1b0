import Crypto
public import Foundation
import GatehouseKernel
public import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

/// PKCE (RFC 7636, S256), which the login checks and GatehouseOpenID's relying party makes;
/// kept under this name for the login's users.
public typealias PKCE = GatehouseOpenID.PKCE

// The OpenID provider's documents and tokens: discovery (what is honoured, exactly), the key
// set, ID tokens and the claims each scope reveals.

extension LoginServer {
    /// The claims the provider may return, by scope.
    static let claimsByScope: [String: [String]] = [
        "openid": ["sub"],
        "profile": ["name", "preferred_username"],
        "email": ["email", "email_verified"],
    ]

    /// The discovery document: only what this provider does.
    func metadata() -> OpenIDProviderMetadata {
        let base = String(issuer.dropLast("/login".count))
        var document = OpenIDProviderMetadata(
            issuer: issuer,
            authorizationEndpoint: base + Self.authorizePath,
            jwksURI: base + Self.jwksPath,
            responseTypesSupported: ["code"],
            subjectTypesSupported: ["public", "pairwise"],
            idTokenSigningAlgValuesSupported: JSONWebSignature.Algorithm.allCases.map(\.rawValue)
        )
        document.tokenEndpoint = base + Self.tokenPath
        document.userinfoEndpoint = base + Self.userinfoPath
        document.endSessionEndpoint = base + Self.logoutPath
        document.grantTypesSupported = ["authorization_code", "refresh_token"]
        document.scopesSupported = Array(
            Set(configuration.clients.flatMap(\.scopes)).intersection(Self.claimsByScope.keys)
        ).sorted()
        document.tokenEndpointAuthMethodsSupported = ["client_secret_basic", "client_secret_post", "none"]
        document.claimsSupported = [
            "iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "acr", "amr", "sid", "name", "preferred_username",
            "email", "email_verified",
        ]
        document.codeChallengeMethodsSupported = ["S256"]
        document.responseModesSupported = ["query"]
        document.promptValuesSupported = ["none", "login", "consent"]
        // Passkeys configured on an IP address are never offered (browsers refuse the RP id).
        document.acrValuesSupported = Self.offeredACRs(configuration).filter {
            $0 != Self.passkeyACR || webAuthnRelyingParty != nil
        }
        document.backchannelLogoutSupported = true
        document.backchannelLogoutSessionSupported = true
        document.authorizationResponseIssParameterSupported = true
        document.claimsParameterSupported = false
        document.requestParameterSupported = false
        document.requestURIParameterSupported = false
        return document
    }

    func discovery() throws -> WireResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return WireResponse(
            status: 200,
            headers: ["Content-Type": "application/json", "Cache-Control": "public, max-age=3600"],
            body: try encoder.encode(metadata())
        )
    }

    func jwks() async throws -> WireResponse {
        let keys = try await keyRing.keys(now: now)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Cached briefly: a rotation publishes the next key a whole period before it signs.
        return WireResponse(
            status: 200,
            headers: ["Content-Type": "application/jwk-set+json", "Cache-Control": "public, max-age=300"],
            body: try encoder.encode(keys.published)
        )
    }

    /// The keys published now, for tests and operators.
    public func publishedKeys() async throws -> JSONWebKeySet { try await keyRing.keys(now: now).published }

    /// Rotates the signing keys now (the next keys, published already, sign from now on).
    public func rotateSigningKeys() async throws { try await keyRing.rotate(now: now) }

    /// A published signing key, for operators.
    public struct SigningKeyStatus: Sendable, Equatable {
        /// Its key id.
        public var kid: String
        /// `RS256` or `ES256`.
        public var algorithm: String
        /// `signing`, `next` (published, not signing yet) or `retired` (published until
        /// `publishedUntil`, signs nothing).
        public var state: String
        /// When a retired key leaves the key set.
        public var publishedUntil: Date?
    }

    /// The published signing keys (made first if there are none yet).
    public func signingKeyStatus() async throws -> [SigningKeyStatus] {
        _ = try await keyRing.keys(now: now, refresh: true)
        return try await store.publishedSigningKeys(now: now).map { key in
            SigningKeyStatus(
                kid: key.kid,
                algorithm: key.algorithm.rawValue,
                state: key.isSigning ? "signing" : key.isNext ? "next" : "retired",
                publishedUntil: key.publishedUntil.map { Date(timeIntervalSince1970: $0) }
            )
        }
    }

    /// An ID token for `grant`, signed with `client`'s algorithm.
    func idToken(
        _ grant: LoginStore.TokenGrant,
        for client: LoginConfiguration.Client,
        accessToken: String?,
        nonce: String?
    ) async throws -> String {
        let issuedAt = Int(now)
        var claims = IDTokenClaims(
            iss: issuer,
            sub: try await publicSubject(grant.subject, for: client),
            aud: client.id,
            exp: issuedAt + configuration.idTokenLifetime,
            iat: issuedAt
        )
        claims.authTime = Int(grant.details.authTime)
        claims.nonce = nonce
        claims.amr = grant.details.amr
        claims.acr = grant.details.acr
        if let sid = grant.details.sessionID { claims.sid = try await publicSessionID(sid, for: client) }
        let profile = try await profile(grant.subject, scope: grant.scope)
        claims.name = profile.name
        claims.preferredUsername = profile.preferredUsername
        claims.email = profile.email
        claims.emailVerified = profile.emailVerified
        let keys = try await keyRing.keys(now: now)
        guard let key = keys.signing[client.idTokenSigningAlgorithm] else {
            throw LoginError("No signing key for \(client.idTokenSigningAlgorithm.rawValue).")
        }
        var signed = SignedIDToken(claims: claims)
        if let accessToken {
            // at_hash (Core 1.0 §3.1.3.6): the left half of the access token's SHA-256.
            signed.atHash = Data(SHA256.hash(data: Data(accessToken.utf8))).prefix(16).base64URLEncodedString
        }
        return try JSONWebSignature.sign(signed, with: key)
    }

    /// The claims of an ID token this provider signed with a key it still publishes, issued by
    /// it; expiry is not checked (a hint may be old). Throws otherwise.
    func verifiedIDToken(_ token: String) async throws -> IDTokenClaims {
        let jws = try JSONWebSignature(compact: token)
        // Only ID tokens: a logout token, signed with the same keys, is no hint.
        guard jws.header.typ == "JWT" else { throw JSONWebSignature.Refusal("not an ID token") }
        var keys = try await keyRing.keys(now: now)
        if let kid = jws.header.kid, !keys.published.keys.contains(where: { $0.kid == kid }) {
            keys = try await keyRing.keys(now: now, refresh: true)
        }
        try jws.verify(with: keys.published)
        let claims = try jws.claims(as: IDTokenClaims.self)
        guard claims.iss == issuer else { throw JSONWebSignature.Refusal("issued by another provider") }
        return claims
    }

    /// What is known of a user, by scope. A directory user's username is an e-mail address the
    /// user typed, not one anyone verified; a federated user's address is the provider's, with
    /// its verdict; a user of another identity provider (`provider|subject`) has none here.
    func profile(_ subject: String, scope: String) async throws -> UserProfile {
        let scopes = Set(scope.split(separator: " "))
        var profile = UserProfile(sub: subject)
        if scopes.contains("profile") {
            profile.name = subject
            profile.preferredUsername = subject
        }
        guard scopes.contains("email") else { return profile }
        if !subject.contains("|") {
            if subject.contains("@") {
                profile.email = subject
                profile.emailVerified = false
            }
        } else if let known = try await store.federatedEmail(of: subject) {
            profile.email = known.email
            profile.emailVerified = known.verified
        }
        return profile
    }

    /// A JSON answer with the headers every token-endpoint answer carries.
    func json(_ status: Int, _ body: some Encodable, headers extra: [String: String] = [:]) -> WireResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var headers = ["Content-Type": "application/json", "Cache-Control": "no-store", "Pragma": "no-cache"]
        headers.merge(extra) { $1 }
        return WireResponse(status: status, headers: headers, body: (try? encoder.encode(body)) ?? Data("{}".utf8))
    }
}

/// The claims userinfo answers, and the profile members an ID token carries.
struct UserProfile: Codable, Sendable {
    var sub: String
    var name: String?
    var preferredUsername: String?
    var email: String?
    var emailVerified: Bool?

    enum CodingKeys: String, CodingKey {
        case sub, name, email
        case preferredUsername = "preferred_username"
        case emailVerified = "email_verified"
    }
}

/// An ID token's claims with `at_hash`.
struct SignedIDToken: Encodable {
    var claims: IDTokenClaims
    var atHash: String?

    private enum CodingKeys: String, CodingKey { case atHash = "at_hash" }

    func encode(to encoder: any Encoder) throws {
        try claims.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(atHash, forKey: .atHash)
    }
}
