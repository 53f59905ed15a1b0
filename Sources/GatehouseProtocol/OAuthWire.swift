public import Foundation
// The OAuth surface: the token, revocation and introspection endpoints and the server's metadata.

/// `POST /v1/token`, as a form or JSON, with a DPoP proof: `refresh_token` (the profile key),
/// ``GrantType/implicit`` (the profile key, `profile_id`), `client_credentials` (the
/// installation's key: device authentication).
public struct TokenRequest: Codable, Sendable {
    /// The grant asked for (`grant_type`): one of the ``GrantType`` values.
    public var grantType: String
    /// The refresh token to redeem (`refresh_token`); only for ``GrantType/refreshToken``.
    public var refreshToken: String?
    /// Space-separated scopes asked for (implicit and client credentials).
    public var scope: String?
    /// The profile an implicit token is for.
    public var profileID: String?

    /// Creates a token request; the fields a grant does not use stay `nil` and are left out.
    public init(grantType: String, refreshToken: String? = nil, scope: String? = nil, profileID: String? = nil) {
        self.grantType = grantType
        self.refreshToken = refreshToken
        self.scope = scope
        self.profileID = profileID
    }

    enum CodingKeys: String, CodingKey {
        case grantType = "grant_type"
        case refreshToken = "refresh_token"
        case scope
        case profileID = "profile_id"
    }
}

/// The grant types of `POST /v1/token`.
public enum GrantType {
    /// Redeems a refresh token for a new access token and a new refresh token (rotation).
    public static let refreshToken = "refresh_token"
    /// An installation's own access token, with no user: device authentication.
    public static let clientCredentials = "client_credentials"
    /// A registered profile's access token without user interaction, for non-sensitive data.
    public static let implicit = "urn:gatehouse:params:oauth:grant-type:implicit"
    /// Every grant type the server accepts, as its metadata lists them.
    public static let all = [refreshToken, clientCredentials, implicit]
}

/// An access token without a refresh token: implicit and device tokens.
public struct AccessTokenResponse: Codable, Sendable, Equatable {
    /// The access token (`access_token`), sent with a DPoP proof of the key it is bound to.
    public var accessToken: String
    /// The token type (`token_type`), always `DPoP`.
    public var tokenType: String
    /// Seconds until the access token expires (`expires_in`).
    public var expiresIn: Int
    /// The scopes granted, space-separated.
    public var scope: String

    /// Creates the answer for an access token.
    public init(accessToken: String, tokenType: String, expiresIn: Int, scope: String) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.scope = scope
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case scope
    }
}

/// `POST /v1/introspect` (RFC 7662), as a form or JSON, by a resource server with HTTP Basic.
public struct IntrospectionRequest: Codable, Sendable {
    /// The access or refresh token to look up.
    public var token: String
    /// The caller's guess at the token's type (`token_type_hint`); ignored.
    public var tokenTypeHint: String?

    /// Creates an introspection request for a token.
    public init(token: String, tokenTypeHint: String? = nil) {
        self.token = token
        self.tokenTypeHint = tokenTypeHint
    }

    enum CodingKeys: String, CodingKey {
        case token
        case tokenTypeHint = "token_type_hint"
    }
}

/// What introspection says of a token (RFC 7662 §2.2). An inactive token says nothing else.
public struct IntrospectionResponse: Codable, Sendable, Equatable {
    /// Who an access token acts for.
    public enum Kind: String, Codable, Sendable {
        /// A user's session (a PIN, biometric or custom authenticator, or a registration).
        case user
        /// A user's token obtained without interaction: non-sensitive data only.
        case implicit
        /// An installation's token (client credentials): no user.
        case device
        /// A stateless registration's one session.
        case stateless
    }

    /// RFC 7800 confirmation: the thumbprint of the DPoP key the token is bound to (RFC 9449 §6.2).
    public struct Confirmation: Codable, Sendable, Equatable {
        /// The base64url SHA-256 thumbprint of the key's JWK (RFC 7638), as a DPoP proof's key must match.
        public var jkt: String
        /// Creates a confirmation for a key thumbprint.
        public init(jkt: String) { self.jkt = jkt }
    }

    /// Whether the token is valid now; when `false`, every other field is `nil`.
    public var active: Bool
    /// The token's scopes, space-separated.
    public var scope: String?
    /// The installation the token was issued to (`client_id`).
    public var clientID: String?
    /// The user as the identity provider names them; absent for device tokens.
    public var sub: String?
    /// The identity provider that named `sub`.
    public var identityProvider: String?
    /// The token type (`token_type`), always `DPoP` for an active token.
    public var tokenType: String?
    /// When the token expires, in seconds since 1970.
    public var exp: Int?
    /// When the token was issued, in seconds since 1970.
    public var iat: Int?
    /// The issuer: the token server's public base URL.
    public var iss: String?
    /// The key the token is bound to; a request must carry a DPoP proof signed with it.
    public var cnf: Confirmation?
    /// Who the token acts for: a user, an implicit grant, a device or a stateless session.
    public var kind: Kind?
    /// The application (manifest `server.clients[].id`) the installation belongs to.
    public var appID: String?

    /// Creates an introspection answer; an inactive one should be ``inactive``.
    public init(
        active: Bool,
        scope: String? = nil,
        clientID: String? = nil,
        sub: String? = nil,
        identityProvider: String? = nil,
        tokenType: String? = nil,
        exp: Int? = nil,
        iat: Int? = nil,
        iss: String? = nil,
        cnf: Confirmation? = nil,
        kind: Kind? = nil,
        appID: String? = nil
    ) {
        self.active = active
        self.scope = scope
        self.clientID = clientID
        self.sub = sub
        self.identityProvider = identityProvider
        self.tokenType = tokenType
        self.exp = exp
        self.iat = iat
        self.iss = iss
        self.cnf = cnf
        self.kind = kind
        self.appID = appID
    }

    /// The answer for a token that is unknown, expired or revoked: `{"active": false}` and nothing else.
    public static let inactive = IntrospectionResponse(active: false)

    enum CodingKeys: String, CodingKey {
        case active, scope, sub, exp, iat, iss, cnf, kind
        case clientID = "client_id"
        case identityProvider = "idp"
        case tokenType = "token_type"
        case appID = "app_id"
    }
}

/// RFC 8414 authorization server metadata, at `/.well-known/oauth-authorization-server`.
public struct AuthorizationServerMetadata: Codable, Sendable, Equatable {
    /// The token server's public base URL, which tokens name as `iss`.
    public var issuer: String
    /// The full URL of `POST /v1/token` (`token_endpoint`).
    public var tokenEndpoint: String
    /// The full URL of `POST /v1/revoke` (`revocation_endpoint`).
    public var revocationEndpoint: String
    /// The full URL of `POST /v1/introspect` (`introspection_endpoint`).
    public var introspectionEndpoint: String
    /// Authorization response types (`response_types_supported`); empty, as the server has no authorization endpoint.
    public var responseTypesSupported: [String]
    /// The grant types the token endpoint accepts (`grant_types_supported`): ``GrantType/all``.
    public var grantTypesSupported: [String]
    /// Every scope some application may ask for (`scopes_supported`).
    public var scopesSupported: [String]
    /// The PKCE methods the hosted login accepts (`code_challenge_methods_supported`): `S256`.
    public var codeChallengeMethodsSupported: [String]
    /// How clients authenticate at the token endpoint: `none`, as each proves its key with DPoP instead.
    public var tokenEndpointAuthMethodsSupported: [String]
    /// How clients authenticate at the revocation endpoint: `none`, as with the token endpoint.
    public var revocationEndpointAuthMethodsSupported: [String]
    /// How resource servers authenticate at the introspection endpoint: `client_secret_basic` (HTTP Basic).
    public var introspectionEndpointAuthMethodsSupported: [String]
    /// The algorithms a DPoP proof may be signed with (`dpop_signing_alg_values_supported`): ES256, ES384, EdDSA.
    public var dpopSigningAlgValuesSupported: [String]

    /// Creates the metadata document.
    public init(
        issuer: String,
        tokenEndpoint: String,
        revocationEndpoint: String,
        introspectionEndpoint: String,
        responseTypesSupported: [String],
        grantTypesSupported: [String],
        scopesSupported: [String],
        codeChallengeMethodsSupported: [String],
        tokenEndpointAuthMethodsSupported: [String],
        revocationEndpointAuthMethodsSupported: [String],
        introspectionEndpointAuthMethodsSupported: [String],
        dpopSigningAlgValuesSupported: [String]
    ) {
        self.issuer = issuer
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.introspectionEndpoint = introspectionEndpoint
        self.responseTypesSupported = responseTypesSupported
        self.grantTypesSupported = grantTypesSupported
        self.scopesSupported = scopesSupported
        self.codeChallengeMethodsSupported = codeChallengeMethodsSupported
        self.tokenEndpointAuthMethodsSupported = tokenEndpointAuthMethodsSupported
        self.revocationEndpointAuthMethodsSupported = revocationEndpointAuthMethodsSupported
        self.introspectionEndpointAuthMethodsSupported = introspectionEndpointAuthMethodsSupported
        self.dpopSigningAlgValuesSupported = dpopSigningAlgValuesSupported
    }

    enum CodingKeys: String, CodingKey {
        case issuer
        case tokenEndpoint = "token_endpoint"
        case revocationEndpoint = "revocation_endpoint"
        case introspectionEndpoint = "introspection_endpoint"
        case responseTypesSupported = "response_types_supported"
        case grantTypesSupported = "grant_types_supported"
        case scopesSupported = "scopes_supported"
        case codeChallengeMethodsSupported = "code_challenge_methods_supported"
        case tokenEndpointAuthMethodsSupported = "token_endpoint_auth_methods_supported"
        case revocationEndpointAuthMethodsSupported = "revocation_endpoint_auth_methods_supported"
        case introspectionEndpointAuthMethodsSupported = "introspection_endpoint_auth_methods_supported"
        case dpopSigningAlgValuesSupported = "dpop_signing_alg_values_supported"
    }
}

/// Tokens bound to the profile key (`token_type` DPoP).
public struct TokenResponse: Codable, Sendable, Equatable {
    /// The access token (`access_token`), sent with a DPoP proof of the profile key.
    public var accessToken: String
    /// The token type (`token_type`), always `DPoP`.
    public var tokenType: String
    /// Seconds until the access token expires (`expires_in`); the refresh token's lifetime is the server's own.
    public var expiresIn: Int
    /// The refresh token (`refresh_token`); each use answers a new one and retires this one.
    public var refreshToken: String
    /// The scopes granted, space-separated.
    public var scope: String

    /// Creates the answer for a session's tokens.
    public init(accessToken: String, tokenType: String, expiresIn: Int, refreshToken: String, scope: String) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
        self.scope = scope
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case scope
    }
}

/// `POST /v1/revoke` (RFC 7009; DPoP with the profile key).
public struct RevocationRequest: Codable, Sendable {
    /// The access or refresh token to revoke.
    public var token: String
    /// `access_token` or `refresh_token` (`token_type_hint`); another hint is ignored.
    public var tokenTypeHint: String?

    /// Creates a revocation request for a token.
    public init(token: String, tokenTypeHint: String? = nil) {
        self.token = token
        self.tokenTypeHint = tokenTypeHint
    }

    enum CodingKeys: String, CodingKey {
        case token
        case tokenTypeHint = "token_type_hint"
    }
}

/// Where a resource server learns what an access token is: the token server in-process
/// (`TokenServer` conforms) or its introspection endpoint over HTTP.
public protocol TokenIntrospecting: Sendable {
    /// What the token server says of `token` now (RFC 7662); inactive for anything unknown.
    func introspect(_ token: String) async throws -> IntrospectionResponse
}

/// `POST /v1/web-login` (the user's access token, DPoP): a one-time login token for a web page.
public struct WebLoginRequest: Codable, Sendable {
    /// The page to sign in to (`target_url`): RFC 3986 characters only, at most 2048, within the application's
    /// `webLoginTargets`.
    public var targetURL: String
    /// Creates a web login request for a target page.
    public init(targetURL: String) { self.targetURL = targetURL }
    enum CodingKeys: String, CodingKey { case targetURL = "target_url" }
}

/// The browser opens `redirectURL` (it carries `token`) and lands on the target, signed in.
public struct WebLoginResponse: Codable, Sendable, Equatable {
    /// The URL the browser opens (`redirect_url`): the server's sign-in page with `token` in its query.
    public var redirectURL: String
    /// The one-time login token, also in `redirectURL`.
    public var token: String
    /// Seconds the login token may be used for (`expires_in`).
    public var expiresIn: Int

    /// Creates the answer for a web login.
    public init(redirectURL: String, token: String, expiresIn: Int) {
        self.redirectURL = redirectURL
        self.token = token
        self.expiresIn = expiresIn
    }

    enum CodingKeys: String, CodingKey {
        case redirectURL = "redirect_url"
        case token
        case expiresIn = "expires_in"
    }
}

extension IntrospectionResponse {
    /// The answer as ``WireCoding/encode(_:)`` writes it, byte for byte (sorted keys, `/`
    /// escaped), without going through `JSONEncoder`: introspection is the busiest endpoint of a
    /// resource server's, and the encoder was a tenth of its CPU.
    public var wireJSON: Data {
        var json = JSONObjectWriter()
        json.bool("active", active)
        json.string("app_id", appID)
        json.string("client_id", clientID)
        if let cnf {
            json.key("cnf")
            var confirmation = JSONObjectWriter()
            confirmation.string("jkt", cnf.jkt)
            json.raw(confirmation.finished)
        }
        json.integer("exp", exp)
        json.integer("iat", iat)
        json.string("idp", identityProvider)
        json.string("iss", iss)
        json.string("kind", kind?.rawValue)
        json.string("scope", scope)
        json.string("sub", sub)
        json.string("token_type", tokenType)
        return Data(json.finished)
    }
}

/// Writes one JSON object, its members in the order given (the caller sorts them), strings
/// escaped as Foundation's `JSONEncoder` escapes them.
struct JSONObjectWriter {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    private var empty = true

    init() { bytes.reserveCapacity(384) }

    var finished: [UInt8] { bytes + [UInt8(ascii: "}")] }

    mutating func key(_ key: String) {
        if !empty { bytes.append(UInt8(ascii: ",")) }
        empty = false
        Self.quote(key, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func raw(_ json: [UInt8]) { bytes += json }

    mutating func bool(_ key: String, _ value: Bool) {
        self.key(key)
        bytes += (value ? "true" : "false").utf8
    }

    mutating func integer(_ key: String, _ value: Int?) {
        guard let value else { return }
        self.key(key)
        bytes += String(value).utf8
    }

    mutating func string(_ key: String, _ value: String?) {
        guard let value else { return }
        self.key(key)
        Self.quote(value, into: &bytes)
    }

    /// UTF-8 passes through; the quote, the backslash, `/` and the control characters are
    /// escaped (the two-character forms where JSON has them, else `\u00XX`).
    static func quote(_ string: String, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"):
                bytes += [UInt8(ascii: "\\"), byte]
            case 0x0A: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x08: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
            case 0x0C: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
            case 0..<0x20:
                bytes += Array("\\u00".utf8) + [hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
