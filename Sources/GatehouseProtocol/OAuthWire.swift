// The OAuth surface: the token, revocation and introspection endpoints and the server's metadata.

/// `POST /v1/token`, as a form or JSON, with a DPoP proof: `refresh_token` (the profile key),
/// ``GrantType/implicit`` (the profile key, `profile_id`), `client_credentials` (the
/// installation's key: device authentication).
public struct TokenRequest: Codable, Sendable {
    public var grantType: String
    public var refreshToken: String?
    /// Space-separated scopes asked for (implicit and client credentials).
    public var scope: String?
    /// The profile an implicit token is for.
    public var profileID: String?

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
    public static let refreshToken = "refresh_token"
    public static let clientCredentials = "client_credentials"
    /// A registered profile's access token without user interaction, for non-sensitive data.
    public static let implicit = "urn:gatehouse:params:oauth:grant-type:implicit"
    public static let all = [refreshToken, clientCredentials, implicit]
}

/// An access token without a refresh token: implicit and device tokens.
public struct AccessTokenResponse: Codable, Sendable, Equatable {
    public var accessToken: String
    public var tokenType: String
    public var expiresIn: Int
    public var scope: String

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
    public var token: String
    public var tokenTypeHint: String?

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
        public var jkt: String
        public init(jkt: String) { self.jkt = jkt }
    }

    public var active: Bool
    public var scope: String?
    public var clientID: String?
    /// The user as the identity provider names them; absent for device tokens.
    public var sub: String?
    /// The identity provider that named `sub`.
    public var identityProvider: String?
    public var tokenType: String?
    public var exp: Int?
    public var iat: Int?
    public var iss: String?
    public var cnf: Confirmation?
    public var kind: Kind?
    /// The application (manifest `server.clients[].id`) the installation belongs to.
    public var appID: String?

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
    public var issuer: String
    public var tokenEndpoint: String
    public var revocationEndpoint: String
    public var introspectionEndpoint: String
    public var responseTypesSupported: [String]
    public var grantTypesSupported: [String]
    public var scopesSupported: [String]
    public var codeChallengeMethodsSupported: [String]
    public var tokenEndpointAuthMethodsSupported: [String]
    public var revocationEndpointAuthMethodsSupported: [String]
    public var introspectionEndpointAuthMethodsSupported: [String]
    public var dpopSigningAlgValuesSupported: [String]

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
    public var accessToken: String
    public var tokenType: String
    public var expiresIn: Int
    public var refreshToken: String
    public var scope: String

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
    public var token: String
    public var tokenTypeHint: String?

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
    public var targetURL: String
    public init(targetURL: String) { self.targetURL = targetURL }
    enum CodingKeys: String, CodingKey { case targetURL = "target_url" }
}

/// The browser opens `redirectURL` (it carries `token`) and lands on the target, signed in.
public struct WebLoginResponse: Codable, Sendable, Equatable {
    public var redirectURL: String
    public var token: String
    public var expiresIn: Int

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
