import Foundation

/// An OpenID provider's discovery document (Discovery 1.0 §3, RFC 8414 §2): the members
/// Gatehouse publishes as a provider and reads as a relying party. Unknown members are ignored.
public struct OpenIDProviderMetadata: Codable, Sendable, Equatable {
    /// The issuer identifier; ID tokens' `iss` must equal it.
    public var issuer: String
    /// Where the browser is sent to sign in.
    public var authorizationEndpoint: String
    /// Where codes and refresh tokens are exchanged.
    public var tokenEndpoint: String?
    /// Where an access token reads the user's claims.
    public var userinfoEndpoint: String?
    /// The provider's signing keys.
    public var jwksURI: String
    /// RP-initiated logout (RP-Initiated Logout 1.0).
    public var endSessionEndpoint: String?
    /// `code`, and whatever else the provider allows.
    public var responseTypesSupported: [String]
    /// `authorization_code`, `refresh_token`, …
    public var grantTypesSupported: [String]?
    /// `public`, `pairwise`.
    public var subjectTypesSupported: [String]
    /// The algorithms ID tokens may be signed with.
    public var idTokenSigningAlgValuesSupported: [String]
    /// The scopes the provider knows.
    public var scopesSupported: [String]?
    /// How clients authenticate at the token endpoint.
    public var tokenEndpointAuthMethodsSupported: [String]?
    /// The claims the provider may return.
    public var claimsSupported: [String]?
    /// The PKCE methods (`S256`).
    public var codeChallengeMethodsSupported: [String]?
    /// `query`, …
    public var responseModesSupported: [String]?
    /// The `prompt` values honoured.
    public var promptValuesSupported: [String]?
    /// The authentication context classes the provider can produce (`acr_values_supported`).
    public var acrValuesSupported: [String]?
    /// Back-Channel Logout 1.0 §2.1.
    public var backchannelLogoutSupported: Bool?
    /// Whether logout tokens carry `sid`.
    public var backchannelLogoutSessionSupported: Bool?
    /// Whether the authorization response carries `iss` (RFC 9207).
    public var authorizationResponseIssParameterSupported: Bool?
    /// Whether the `claims` request parameter is honoured (it is not, here).
    public var claimsParameterSupported: Bool?
    /// Whether `request` objects are honoured (they are not, here).
    public var requestParameterSupported: Bool?
    /// Whether `request_uri` is honoured (it is not, here).
    public var requestURIParameterSupported: Bool?

    private enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case userinfoEndpoint = "userinfo_endpoint"
        case jwksURI = "jwks_uri"
        case endSessionEndpoint = "end_session_endpoint"
        case responseTypesSupported = "response_types_supported"
        case grantTypesSupported = "grant_types_supported"
        case subjectTypesSupported = "subject_types_supported"
        case idTokenSigningAlgValuesSupported = "id_token_signing_alg_values_supported"
        case scopesSupported = "scopes_supported"
        case tokenEndpointAuthMethodsSupported = "token_endpoint_auth_methods_supported"
        case claimsSupported = "claims_supported"
        case codeChallengeMethodsSupported = "code_challenge_methods_supported"
        case responseModesSupported = "response_modes_supported"
        case promptValuesSupported = "prompt_values_supported"
        case acrValuesSupported = "acr_values_supported"
        case backchannelLogoutSupported = "backchannel_logout_supported"
        case backchannelLogoutSessionSupported = "backchannel_logout_session_supported"
        case authorizationResponseIssParameterSupported = "authorization_response_iss_parameter_supported"
        case claimsParameterSupported = "claims_parameter_supported"
        case requestParameterSupported = "request_parameter_supported"
        case requestURIParameterSupported = "request_uri_parameter_supported"
    }

    /// A document with the required members; the optional ones start empty.
    public init(
        issuer: String,
        authorizationEndpoint: String,
        jwksURI: String,
        responseTypesSupported: [String],
        subjectTypesSupported: [String],
        idTokenSigningAlgValuesSupported: [String]
    ) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.jwksURI = jwksURI
        self.responseTypesSupported = responseTypesSupported
        self.subjectTypesSupported = subjectTypesSupported
        self.idTokenSigningAlgValuesSupported = idTokenSigningAlgValuesSupported
    }
}
