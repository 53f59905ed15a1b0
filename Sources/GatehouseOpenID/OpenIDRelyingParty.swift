import Crypto
import Foundation
public import GatehouseKernel
import GatehouseOutbound
import GatehouseProtocol

/// An OpenID Connect relying party for the authorization code flow (Core 1.0 §3.1) with PKCE
/// (RFC 7636, S256) and a nonce: the hosted login federating to another provider, or a web
/// application signing its users in.
///
/// ```swift
/// let party = try OpenIDRelyingParty(.init(
///     issuer: "https://id.example.com", clientID: "shop", clientSecret: secret,
///     redirectURI: "https://shop.example.com/callback"))
/// let request = try await party.begin()          // keep `request`; send the browser to request.url
/// // … at the callback:
/// let signIn = try await party.finish(callback: queryParameters, request: request)
/// print(signIn.claims.sub, signIn.claims.email ?? "")
/// ```
///
/// The provider's discovery document is read from the issuer plus
/// `/.well-known/openid-configuration` and must name exactly that issuer. It is kept for
/// ``Configuration/metadataLifetime``; the provider's keys for ``Configuration/keysLifetime``, and
/// fetched again — at most once per ``Configuration/keysRefetchInterval`` — when a token names a
/// key that is not among them, so the provider can rotate keys while a flood of made-up key ids
/// cannot make this party hammer it.
///
/// Every call to the provider goes through `OutboundHTTP`: a deadline, a bounded answer, no
/// redirects followed. The provider's URLs must use `https`; plain `http` is accepted only on a
/// loopback host (`127.0.0.1`, `localhost`, `[::1]`), for tests and local development.
///
/// The value is `Sendable`; one instance per provider and client serves every request.
public final class OpenIDRelyingParty: Sendable {
    /// What the relying party needs to know about the provider and itself.
    public struct Configuration: Sendable {
        /// The provider's issuer identifier, exactly as its discovery document and tokens spell it.
        public var issuer: String
        /// This client's id at the provider.
        public var clientID: String
        /// The client secret; `nil` for a public client (PKCE alone protects the code).
        public var clientSecret: String?
        /// Where the provider sends the browser back; registered with the provider.
        public var redirectURI: String
        /// The scopes asked for; `openid` is added when missing.
        public var scopes: [String]
        /// How far the provider's clock may be from this one.
        public var clockSkew: Duration
        /// The clock tokens are checked against.
        public var clock: any WallClock
        /// How the client authenticates at the token endpoint; `nil` chooses: none without a
        /// secret, else `client_secret_basic`, or `client_secret_post` when that is all the
        /// provider offers.
        public var clientAuthentication: OpenIDClientAuthentication?
        /// How long the discovery document is reused.
        public var metadataLifetime: Duration
        /// How long the provider's keys are reused.
        public var keysLifetime: Duration
        /// The shortest time between two fetches of the keys caused by tokens naming unknown keys.
        public var keysRefetchInterval: Duration
        /// The deadline of each call to the provider.
        public var timeout: Duration

        /// A configuration; scopes default to `openid email profile`, the clock skew to 60 s.
        public init(
            issuer: String,
            clientID: String,
            clientSecret: String? = nil,
            redirectURI: String,
            scopes: [String] = ["openid", "email", "profile"],
            clockSkew: Duration = .seconds(60),
            clock: any WallClock = SystemWallClock(),
            clientAuthentication: OpenIDClientAuthentication? = nil,
            metadataLifetime: Duration = .seconds(3600),
            keysLifetime: Duration = .seconds(3600),
            keysRefetchInterval: Duration = .seconds(30),
            timeout: Duration = .seconds(10)
        ) {
            self.issuer = issuer
            self.clientID = clientID
            self.clientSecret = clientSecret
            self.redirectURI = redirectURI
            self.scopes = scopes
            self.clockSkew = clockSkew
            self.clock = clock
            self.clientAuthentication = clientAuthentication
            self.metadataLifetime = metadataLifetime
            self.keysLifetime = keysLifetime
            self.keysRefetchInterval = keysRefetchInterval
            self.timeout = timeout
        }
    }

    /// The configuration, as checked by ``init(_:)``.
    public let configuration: Configuration
    /// Where the discovery document is read.
    public let discoveryURL: String
    private let discovery: OutboundURL
    private let cache = ProviderCache()

    /// A relying party for `configuration`; throws when the issuer or redirect URI is unusable,
    /// the client id is empty, or a secret is missing for a secret-based authentication.
    public init(_ configuration: Configuration) throws(OpenIDRelyingPartyError) {
        let issuer = configuration.issuer
        guard !issuer.contains("?"), !issuer.contains("#") else {
            throw .invalidConfiguration("the issuer \(issuer) may have neither query nor fragment")
        }
        let base = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        do {
            discovery = try OpenIDHTTP.providerURL(base + "/.well-known/openid-configuration", role: "the issuer")
        } catch .invalidProviderResponse(_, let reason) {
            throw .invalidConfiguration("the issuer \(issuer) is refused: \(reason)")
        } catch {
            throw error
        }
        discoveryURL = discovery.text
        guard !configuration.clientID.isEmpty else { throw .invalidConfiguration("the client id is empty") }
        guard let redirect = URLComponents(string: configuration.redirectURI),
            redirect.scheme == "https" || redirect.scheme == "http", redirect.host?.isEmpty == false,
            redirect.fragment == nil
        else {
            throw .invalidConfiguration("the redirect URI must be an absolute http(s) URL without a fragment")
        }
        if let method = configuration.clientAuthentication, method != .none,
            configuration.clientSecret?.isEmpty ?? true
        {
            throw .invalidConfiguration("a client secret is needed for \(method.rawValue)")
        }
        guard configuration.clockSkew >= .zero, configuration.clockSkew <= .seconds(600) else {
            throw .invalidConfiguration("the clock skew must be between 0 and 600 seconds")
        }
        var configuration = configuration
        if !configuration.scopes.contains("openid") { configuration.scopes.insert("openid", at: 0) }
        self.configuration = configuration
    }

    // MARK: - Discovery and keys

    /// The provider's discovery document, from the cache or fetched and checked: its `issuer`
    /// is the configured one, it offers `response_type` `code`, RS256 or ES256, and its
    /// endpoints are acceptable URLs.
    public func providerMetadata() async throws(OpenIDRelyingPartyError) -> OpenIDProviderMetadata {
        try await provider().metadata
    }

    private func provider() async throws(OpenIDRelyingPartyError) -> Provider {
        let discovery = discovery
        let configuration = configuration
        return try await cache.provider(maxAge: configuration.metadataLifetime) {
            () async throws(OpenIDRelyingPartyError) -> Provider in
            let metadata = try await OpenIDHTTP.getJSON(
                discovery,
                as: OpenIDProviderMetadata.self,
                what: "the discovery document",
                timeout: configuration.timeout
            )
            return try Provider(metadata, configuration: configuration, from: discovery)
        }
    }

    /// The provider's keys: cached ones while they are younger than ``Configuration/keysLifetime``,
    /// or, with `refetch`, new ones unless keys were fetched less than
    /// ``Configuration/keysRefetchInterval`` ago.
    private func keys(refetch: Bool) async throws(OpenIDRelyingPartyError) -> JSONWebKeySet {
        let provider = try await provider()
        let timeout = configuration.timeout
        return try await cache.keys(
            maxAge: configuration.keysLifetime,
            refetchInterval: refetch ? configuration.keysRefetchInterval : nil
        ) { () async throws(OpenIDRelyingPartyError) -> JSONWebKeySet in
            try await OpenIDHTTP.getJSON(
                provider.keys,
                as: JSONWebKeySet.self,
                what: "the key set",
                timeout: timeout
            )
        }
    }

    // MARK: - The code flow

    /// Starts a sign-in: a new `state`, `nonce` and PKCE verifier, and the URL of the provider's
    /// authorization endpoint that carries them. Keep the result until the callback; send the
    /// browser to its ``OpenIDAuthorizationRequest/url``.
    public func begin(
        _ options: OpenIDAuthorizationOptions = .init()
    ) async throws(OpenIDRelyingPartyError) -> OpenIDAuthorizationRequest {
        let provider = try await provider()
        var scopes = options.scopes ?? configuration.scopes
        if !scopes.contains("openid") { scopes.insert("openid", at: 0) }
        if let maxAge = options.maxAge, maxAge < 0 { throw .invalidConfiguration("max_age must not be negative") }
        let state = Data.random(count: 32).base64URLEncodedString
        let nonce = Data.random(count: 32).base64URLEncodedString
        let verifier = PKCE.makeVerifier()
        let challenge = PKCE.challenge(for: verifier)
        var parameters: [(String, String)] = [
            ("response_type", "code"), ("client_id", configuration.clientID),
            ("redirect_uri", configuration.redirectURI), ("scope", scopes.joined(separator: " ")),
            ("state", state), ("nonce", nonce), ("code_challenge", challenge), ("code_challenge_method", "S256"),
        ]
        if let prompt = options.prompt { parameters.append(("prompt", prompt)) }
        if let hint = options.loginHint { parameters.append(("login_hint", hint)) }
        if let maxAge = options.maxAge { parameters.append(("max_age", String(maxAge))) }
        let reserved = Set(parameters.map(\.0) + ["prompt", "login_hint", "max_age", "request", "request_uri"])
        for (name, value) in options.additionalParameters.sorted(by: { $0.key < $1.key }) {
            guard !reserved.contains(name) else {
                throw .invalidConfiguration(
                    "the parameter \(name) is set by the relying party, not as an additional one"
                )
            }
            parameters.append((name, value))
        }
        let endpoint = provider.metadata.authorizationEndpoint
        let url = endpoint + (endpoint.contains("?") ? "&" : "?") + FormFields.encode(parameters)
        return OpenIDAuthorizationRequest(
            url: url,
            state: state,
            nonce: nonce,
            codeVerifier: verifier,
            redirectURI: configuration.redirectURI,
            maxAge: options.maxAge,
            issuer: configuration.issuer,
            clientID: configuration.clientID,
            createdAt: configuration.clock.now
        )
    }

    /// Finishes a sign-in from the callback's query parameters: an `error` there is
    /// ``OpenIDRelyingPartyError/authorizationRefused(error:description:)``; an `iss` (RFC 9207)
    /// must be the issuer, and is required when the provider says it sends one; then as
    /// ``finish(code:state:request:fetchUserInfo:)``.
    public func finish(
        callback parameters: [String: String],
        request: OpenIDAuthorizationRequest,
        fetchUserInfo: Bool = false
    ) async throws(OpenIDRelyingPartyError) -> OpenIDSignIn {
        if let error = parameters["error"] {
            throw .authorizationRefused(error: error, description: parameters["error_description"])
        }
        if let iss = parameters["iss"] {
            guard iss == configuration.issuer else {
                throw .callbackMismatch("its iss \(IDTokenValidator.quoted(iss)) is not the issuer (a mix-up?)")
            }
        } else if try await provider().metadata.authorizationResponseIssParameterSupported == true {
            throw .callbackMismatch("it has no iss, though the provider sends one")
        }
        guard let code = parameters["code"], !code.isEmpty else { throw .callbackMismatch("it has no code") }
        guard let state = parameters["state"] else { throw .callbackMismatch("it has no state") }
        return try await finish(code: code, state: state, request: request, fetchUserInfo: fetchUserInfo)
    }

    /// Finishes a sign-in: checks `state` against the stored `request`, exchanges `code` (with
    /// the PKCE verifier) at the token endpoint, and checks the ID token (signature against the
    /// provider's keys, `iss`, `aud`, `azp`, `exp`, `iat`, `nonce`, `auth_time` when `max_age`
    /// was asked, `at_hash` when present). With `fetchUserInfo`, also reads the userinfo
    /// endpoint, whose `sub` must be the ID token's.
    public func finish(
        code: String,
        state: String,
        request: OpenIDAuthorizationRequest,
        fetchUserInfo: Bool = false
    ) async throws(OpenIDRelyingPartyError) -> OpenIDSignIn {
        guard request.issuer == configuration.issuer, request.clientID == configuration.clientID else {
            throw .callbackMismatch("the authorization request was made for another issuer or client")
        }
        guard ConstantTime.equals(state, request.state) else {
            throw .callbackMismatch("its state is not the one of the authorization request")
        }
        let provider = try await provider()
        let tokens = try await exchange(
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI),
                ("code_verifier", request.codeVerifier),
            ],
            provider: provider
        )
        guard let idToken = tokens.idToken else {
            throw .invalidProviderResponse(
                url: provider.token.text,
                reason: "the token answer has no id_token (was the openid scope granted?)"
            )
        }
        let claims = try await validateIDToken(
            idToken,
            expecting: .init(
                nonce: request.nonce,
                maxAge: request.maxAge,
                accessToken: tokens.accessToken,
                now: configuration.clock.now
            )
        )
        let userInfo = fetchUserInfo ? try await userInfo(accessToken: tokens.accessToken, subject: claims.sub) : nil
        return OpenIDSignIn(
            claims: claims,
            idToken: idToken,
            accessToken: tokens.accessToken,
            tokenType: tokens.tokenType,
            refreshToken: tokens.refreshToken,
            expiresIn: tokens.expiresIn,
            scope: tokens.scope,
            userInfo: userInfo
        )
    }

    /// Checks a compact ID token from this provider against its keys (fetched again, within the
    /// refetch interval, when the token names an unknown key) and `expectations`.
    public func validateIDToken(
        _ token: String,
        expecting expectations: IDTokenValidator.Expectations
    ) async throws(OpenIDRelyingPartyError) -> IDTokenClaims {
        let jws: JSONWebSignature
        do {
            jws = try JSONWebSignature(compact: token)
        } catch {
            throw .idTokenRefused(reason: error.reason)
        }
        var keys = try await keys(refetch: false)
        if keys.candidates(kid: jws.header.kid, algorithm: jws.algorithm).isEmpty {
            keys = try await self.keys(refetch: true)
        }
        let validator = IDTokenValidator(
            issuer: configuration.issuer,
            clientID: configuration.clientID,
            clockSkew: configuration.clockSkew
        )
        do {
            return try validator.validate(jws, keys: keys, expecting: expectations)
        } catch {
            throw .idTokenRefused(reason: error.reason)
        }
    }

    /// Reads the userinfo endpoint with `accessToken`; its `sub` must be `subject` (the ID
    /// token's), Core 1.0 §5.3.2. Only JSON answers are read, not signed ones.
    public func userInfo(
        accessToken: String,
        subject: String
    ) async throws(OpenIDRelyingPartyError) -> OpenIDUserInfo {
        let provider = try await provider()
        guard let url = provider.userInfo else {
            throw .userInfoRefused(reason: "the provider publishes no userinfo_endpoint")
        }
        let response: OutboundHTTP.Response
        do {
            response = try await OutboundHTTP.get(
                url,
                headers: [("Accept", "application/json"), ("Authorization", "Bearer \(accessToken)")],
                timeout: configuration.timeout,
                maxResponseBytes: OpenIDHTTP.maxResponseBytes
            )
        } catch {
            throw .providerUnreachable(url: url.text, reason: error.reason)
        }
        guard response.status == 200 else {
            throw .userInfoRefused(reason: "the userinfo endpoint answered HTTP \(response.status)")
        }
        var info = try OpenIDHTTP.decode(
            OpenIDUserInfo.self,
            from: response.body,
            url: url,
            what: "the userinfo answer"
        )
        guard info.sub == subject else {
            throw .userInfoRefused(reason: "its sub is not the ID token's sub")
        }
        info.json = response.body
        return info
    }

    /// The URL that ends the user's session at the provider (RP-Initiated Logout 1.0), or `nil`
    /// when the provider publishes no `end_session_endpoint`. `postLogoutRedirectURI` must be
    /// registered with the provider.
    public func endSessionURL(
        idTokenHint: String?,
        postLogoutRedirectURI: String?,
        state: String? = nil
    ) async throws(OpenIDRelyingPartyError) -> String? {
        let provider = try await provider()
        guard let endpoint = provider.metadata.endSessionEndpoint else { return nil }
        _ = try OpenIDHTTP.providerURL(endpoint, role: "the end_session_endpoint")
        var parameters = [("client_id", configuration.clientID)]
        if let idTokenHint { parameters.append(("id_token_hint", idTokenHint)) }
        if let postLogoutRedirectURI { parameters.append(("post_logout_redirect_uri", postLogoutRedirectURI)) }
        if let state { parameters.append(("state", state)) }
        return endpoint + (endpoint.contains("?") ? "&" : "?") + FormFields.encode(parameters)
    }

    // MARK: - Token endpoint

    private struct TokenAnswer: Decodable {
        var accessToken: String
        var tokenType: String
        var idToken: String?
        var refreshToken: String?
        var expiresIn: Int?
        var scope: String?

        enum CodingKeys: String, CodingKey {
            case scope
            case accessToken = "access_token"
            case tokenType = "token_type"
            case idToken = "id_token"
            case refreshToken = "refresh_token"
            case expiresIn = "expires_in"
        }
    }

    private struct ErrorAnswer: Decodable {
        var error: String
        var errorDescription: String?

        enum CodingKeys: String, CodingKey {
            case error
            case errorDescription = "error_description"
        }
    }

    private func exchange(
        _ fields: [(String, String)],
        provider: Provider
    ) async throws(OpenIDRelyingPartyError) -> TokenAnswer {
        var fields = fields
        var headers: [(String, String)] = []
        switch try authentication(provider) {
        case .clientSecretBasic:
            // RFC 6749 §2.3.1: each form-encoded, then joined by a colon and base64-encoded.
            let pair =
                FormFields.percentEncoded(configuration.clientID) + ":"
                + FormFields.percentEncoded(configuration.clientSecret ?? "")
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
        case .clientSecretPost:
            fields += [("client_id", configuration.clientID), ("client_secret", configuration.clientSecret ?? "")]
        case .none:
            fields.append(("client_id", configuration.clientID))
        }
        let response = try await OpenIDHTTP.postForm(
            provider.token,
            fields: fields,
            headers: headers,
            timeout: configuration.timeout
        )
        guard response.status == 200 else {
            if let refusal = try? JSONDecoder().decode(ErrorAnswer.self, from: response.body) {
                throw .tokenEndpointRefused(error: refusal.error, description: refusal.errorDescription)
            }
            throw .invalidProviderResponse(
                url: provider.token.text,
                reason: "the token endpoint answered HTTP \(response.status) without an OAuth error"
            )
        }
        let answer = try OpenIDHTTP.decode(
            TokenAnswer.self,
            from: response.body,
            url: provider.token,
            what: "the token answer"
        )
        guard answer.tokenType.lowercased() == "bearer" else {
            throw .invalidProviderResponse(
                url: provider.token.text,
                reason: "the token type is \(IDTokenValidator.quoted(answer.tokenType)), not Bearer"
            )
        }
        return answer
    }

    private func authentication(_ provider: Provider) throws(OpenIDRelyingPartyError) -> OpenIDClientAuthentication {
        if let chosen = configuration.clientAuthentication { return chosen }
        guard let secret = configuration.clientSecret, !secret.isEmpty else { return .none }
        let offered = provider.metadata.tokenEndpointAuthMethodsSupported ?? []
        // Discovery 1.0 §3: when the member is missing, client_secret_basic is the default.
        if offered.isEmpty || offered.contains(OpenIDClientAuthentication.clientSecretBasic.rawValue) {
            return .clientSecretBasic
        }
        if offered.contains(OpenIDClientAuthentication.clientSecretPost.rawValue) { return .clientSecretPost }
        throw .invalidConfiguration(
            "the provider offers neither client_secret_basic nor client_secret_post (it offers "
                + offered.prefix(8).joined(separator: ", ") + ")"
        )
    }
}

/// A discovery document that passed the checks, with its URLs parsed.
struct Provider: Sendable {
    var metadata: OpenIDProviderMetadata
    var token: OutboundURL
    var keys: OutboundURL
    var userInfo: OutboundURL?

    init(
        _ metadata: OpenIDProviderMetadata,
        configuration: OpenIDRelyingParty.Configuration,
        from discovery: OutboundURL
    ) throws(OpenIDRelyingPartyError) {
        guard metadata.issuer == configuration.issuer else {
            throw .discoveryMismatch(expected: configuration.issuer, published: metadata.issuer)
        }
        guard metadata.responseTypesSupported.contains("code") else {
            throw .invalidProviderResponse(
                url: discovery.text,
                reason: "the provider does not offer response_type code"
            )
        }
        guard
            metadata.idTokenSigningAlgValuesSupported.contains(where: {
                JSONWebSignature.Algorithm(rawValue: $0) != nil
            })
        else {
            throw .invalidProviderResponse(
                url: discovery.text,
                reason: "the provider signs ID tokens with neither RS256 nor ES256"
            )
        }
        guard let tokenEndpoint = metadata.tokenEndpoint else {
            throw .invalidProviderResponse(url: discovery.text, reason: "the discovery document has no token_endpoint")
        }
        _ = try OpenIDHTTP.providerURL(metadata.authorizationEndpoint, role: "the authorization_endpoint")
        token = try OpenIDHTTP.providerURL(tokenEndpoint, role: "the token_endpoint")
        keys = try OpenIDHTTP.providerURL(metadata.jwksURI, role: "the jwks_uri")
        userInfo = try metadata.userinfoEndpoint.map { (text) throws(OpenIDRelyingPartyError) in
            try OpenIDHTTP.providerURL(text, role: "the userinfo_endpoint")
        }
        self.metadata = metadata
    }
}

/// The provider's discovery document and keys, shared by all of a relying party's calls: one
/// fetch at a time for each (concurrent callers wait for the one under way), and keys fetched
/// again for an unknown key at most once per interval.
actor ProviderCache {
    private var provider: (value: Provider, at: ContinuousClock.Instant)?
    private var providerLoad: Task<Provider, any Error>?
    private var keys: (value: JSONWebKeySet, at: ContinuousClock.Instant)?
    private var keysLoad: Task<JSONWebKeySet, any Error>?
    private var keysRefetchStarted: ContinuousClock.Instant?

    func provider(
        maxAge: Duration,
        load: @escaping @Sendable () async throws(OpenIDRelyingPartyError) -> Provider
    ) async throws(OpenIDRelyingPartyError) -> Provider {
        if let provider, ContinuousClock.now - provider.at < maxAge { return provider.value }
        if let providerLoad { return try await Self.value(of: providerLoad) }
        let task = Task { () async throws -> Provider in try await load() }
        providerLoad = task
        defer { providerLoad = nil }
        let value = try await Self.value(of: task)
        provider = (value, ContinuousClock.now)
        return value
    }

    /// Cached keys younger than `maxAge`; with a `refetchInterval`, new keys unless the last
    /// fetch was less than that long ago.
    func keys(
        maxAge: Duration,
        refetchInterval: Duration?,
        load: @escaping @Sendable () async throws(OpenIDRelyingPartyError) -> JSONWebKeySet
    ) async throws(OpenIDRelyingPartyError) -> JSONWebKeySet {
        if let keysLoad { return try await Self.value(of: keysLoad) }
        let now = ContinuousClock.now
        if let keys {
            if let refetchInterval {
                // Counted from the last refetch for an unknown key, failed ones included.
                if let started = keysRefetchStarted, now - started < refetchInterval { return keys.value }
                keysRefetchStarted = now
            } else if now - keys.at < maxAge {
                return keys.value
            }
        }
        let task = Task { () async throws -> JSONWebKeySet in try await load() }
        keysLoad = task
        defer { keysLoad = nil }
        let value = try await Self.value(of: task)
        keys = (value, ContinuousClock.now)
        return value
    }

    private static func value<Value: Sendable>(
        of task: Task<Value, any Error>
    ) async throws(OpenIDRelyingPartyError) -> Value {
        do {
            return try await task.value
        } catch let error as OpenIDRelyingPartyError {
            throw error
        } catch {
            throw .providerUnreachable(url: "", reason: "\(error)")
        }
    }
}
