public import Foundation

/// Why a sign-in through ``OpenIDRelyingParty`` did not succeed. Each case's ``description``
/// says what was wrong in words for a log or an error page; none carries a token or a secret.
public enum OpenIDRelyingPartyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The relying party's own configuration or a caller's argument is unusable.
    case invalidConfiguration(String)
    /// The provider could not be reached, or did not answer in time, or answered too much.
    case providerUnreachable(url: String, reason: String)
    /// The provider answered something that is not what the protocol asks for.
    case invalidProviderResponse(url: String, reason: String)
    /// The discovery document's `issuer` is not the configured issuer (Discovery 1.0 §4.3).
    case discoveryMismatch(expected: String, published: String)
    /// The provider sent the browser back with an error instead of a code (Core 1.0 §3.1.2.6).
    case authorizationRefused(error: String, description: String?)
    /// The browser's callback does not belong to the stored authorization request: another
    /// `state`, another issuer (RFC 9207), or no code.
    case callbackMismatch(String)
    /// The token endpoint refused the code (RFC 6749 §5.2): `invalid_grant`, `invalid_client`, …
    case tokenEndpointRefused(error: String, description: String?)
    /// The ID token failed a check of Core 1.0 §3.1.3.7; `reason` names which.
    case idTokenRefused(reason: String)
    /// The userinfo endpoint refused the access token, or its answer is not the ID token's user.
    case userInfoRefused(reason: String)

    /// What went wrong, in words.
    public var description: String {
        switch self {
        case .invalidConfiguration(let reason): "OpenID relying party configuration: \(reason)"
        case .providerUnreachable(let url, let reason): "the OpenID provider at \(url) is unreachable: \(reason)"
        case .invalidProviderResponse(let url, let reason):
            "the OpenID provider's answer from \(url) is refused: \(reason)"
        case .discoveryMismatch(let expected, let published):
            "the discovery document names the issuer \(IDTokenValidator.quoted(published)), not the configured "
                + "\(IDTokenValidator.quoted(expected)); they must be equal, character for character"
        case .authorizationRefused(let error, let description):
            "the OpenID provider refused the sign-in: \(IDTokenValidator.quoted(error))"
                + (description.map { " (\(IDTokenValidator.quoted($0)))" } ?? "")
        case .callbackMismatch(let reason): "the sign-in callback is refused: \(reason)"
        case .tokenEndpointRefused(let error, let description):
            "the token endpoint refused the code: \(IDTokenValidator.quoted(error))"
                + (description.map { " (\(IDTokenValidator.quoted($0)))" } ?? "")
        case .idTokenRefused(let reason): "the ID token is refused: \(reason)"
        case .userInfoRefused(let reason): "the userinfo answer is refused: \(reason)"
        }
    }
}

/// How the relying party authenticates at the token endpoint (Core 1.0 §9).
public enum OpenIDClientAuthentication: String, Codable, Sendable {
    /// The client id and secret in an HTTP Basic `Authorization` header (the default).
    case clientSecretBasic = "client_secret_basic"
    /// The client id and secret as form fields of the token request.
    case clientSecretPost = "client_secret_post"
    /// A public client: only `client_id` in the form; PKCE protects the code.
    case none
}

/// What a sign-in's authorization request adds to the required parameters.
public struct OpenIDAuthorizationOptions: Sendable, Equatable {
    /// `prompt`: `login`, `consent`, `none`, `select_account` (space-separated for several).
    public var prompt: String?
    /// `login_hint`: the user's identifier, if the caller knows it.
    public var loginHint: String?
    /// `max_age`: the longest, in seconds, since the user last authenticated at the provider;
    /// the ID token's `auth_time` is then required and checked.
    public var maxAge: Int?
    /// Scopes for this request instead of the configuration's (`openid` is added when missing).
    public var scopes: [String]?
    /// Further parameters (`ui_locales`, `acr_values`, …); the ones this type sets itself are refused.
    public var additionalParameters: [String: String]

    /// Options; all empty by default.
    public init(
        prompt: String? = nil,
        loginHint: String? = nil,
        maxAge: Int? = nil,
        scopes: [String]? = nil,
        additionalParameters: [String: String] = [:]
    ) {
        self.prompt = prompt
        self.loginHint = loginHint
        self.maxAge = maxAge
        self.scopes = scopes
        self.additionalParameters = additionalParameters
    }
}

/// One sign-in's authorization request: the URL the browser is sent to, and the secrets the
/// callback is checked with. The caller keeps it until the callback (a server in its database,
/// a web app in a signed or encrypted cookie) and hands it to
/// ``OpenIDRelyingParty/finish(code:state:request:fetchUserInfo:)``; it must not reach the
/// browser readable, since `codeVerifier` is what makes a stolen code useless.
public struct OpenIDAuthorizationRequest: Codable, Sendable, Equatable {
    /// The provider's authorization endpoint with every parameter: where the browser goes.
    public var url: String
    /// The `state` sent; the callback must return it.
    public var state: String
    /// The `nonce` sent; the ID token must carry it.
    public var nonce: String
    /// The PKCE verifier (RFC 7636) whose S256 challenge was sent.
    public var codeVerifier: String
    /// The `redirect_uri` sent; the token request repeats it.
    public var redirectURI: String
    /// The `max_age` sent, if any.
    public var maxAge: Int?
    /// The issuer the request was made for.
    public var issuer: String
    /// The client id the request was made for.
    public var clientID: String
    /// When the request was made (the configured clock's time).
    public var createdAt: Date

    /// A request with these members (as read back from a caller's store).
    public init(
        url: String,
        state: String,
        nonce: String,
        codeVerifier: String,
        redirectURI: String,
        maxAge: Int?,
        issuer: String,
        clientID: String,
        createdAt: Date
    ) {
        self.url = url
        self.state = state
        self.nonce = nonce
        self.codeVerifier = codeVerifier
        self.redirectURI = redirectURI
        self.maxAge = maxAge
        self.issuer = issuer
        self.clientID = clientID
        self.createdAt = createdAt
    }
}

/// A finished sign-in: the ID token's checked claims and the tokens the provider issued.
public struct OpenIDSignIn: Sendable {
    /// The ID token's claims, every check passed.
    public var claims: IDTokenClaims
    /// The ID token as issued (for `id_token_hint` at logout).
    public var idToken: String
    /// The access token for the provider's APIs (userinfo).
    public var accessToken: String
    /// The access token's type (`Bearer`).
    public var tokenType: String
    /// The refresh token, when the provider issued one.
    public var refreshToken: String?
    /// Seconds the access token lives, when the provider said.
    public var expiresIn: Int?
    /// The scopes granted, when the provider said.
    public var scope: String?
    /// The userinfo answer, when it was asked for (its `sub` is the ID token's).
    public var userInfo: OpenIDUserInfo?

    /// A sign-in with these members.
    public init(
        claims: IDTokenClaims,
        idToken: String,
        accessToken: String,
        tokenType: String,
        refreshToken: String?,
        expiresIn: Int?,
        scope: String?,
        userInfo: OpenIDUserInfo?
    ) {
        self.claims = claims
        self.idToken = idToken
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.refreshToken = refreshToken
        self.expiresIn = expiresIn
        self.scope = scope
        self.userInfo = userInfo
    }
}

/// The userinfo endpoint's answer (Core 1.0 §5.3.2): the standard claims read, and the whole
/// JSON object kept for any other.
public struct OpenIDUserInfo: Decodable, Sendable, Equatable {
    /// The subject; equal to the ID token's `sub`, or the answer is refused.
    public var sub: String
    /// The full name.
    public var name: String?
    /// Given name(s).
    public var givenName: String?
    /// Surname(s).
    public var familyName: String?
    /// The name the user goes by at the provider.
    public var preferredUsername: String?
    /// The email address.
    public var email: String?
    /// Whether the provider verified the address (`true` or the string `"true"`).
    public var emailVerified: Bool?
    /// A picture's URL.
    public var picture: String?
    /// The user's locale (`de-CH`).
    public var locale: String?
    /// The answer's JSON as received, for claims not read above.
    public var json: Data

    private enum CodingKeys: String, CodingKey {
        case sub, name, email, picture, locale
        case givenName = "given_name"
        case familyName = "family_name"
        case preferredUsername = "preferred_username"
        case emailVerified = "email_verified"
    }

    /// Reads the standard claims; ``json`` is set by the relying party afterwards.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sub = try container.decode(String.self, forKey: .sub)
        name = try? container.decodeIfPresent(String.self, forKey: .name)
        givenName = try? container.decodeIfPresent(String.self, forKey: .givenName)
        familyName = try? container.decodeIfPresent(String.self, forKey: .familyName)
        preferredUsername = try? container.decodeIfPresent(String.self, forKey: .preferredUsername)
        email = try? container.decodeIfPresent(String.self, forKey: .email)
        picture = try? container.decodeIfPresent(String.self, forKey: .picture)
        locale = try? container.decodeIfPresent(String.self, forKey: .locale)
        if let flag = try? container.decodeIfPresent(Bool.self, forKey: .emailVerified) {
            emailVerified = flag
        } else if let text = try? container.decodeIfPresent(String.self, forKey: .emailVerified) {
            emailVerified = text.lowercased() == "true"
        }
        json = Data()
    }
}
