import Crypto
import Foundation
import GatehouseOpenID
import GatehouseProtocol
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import Testing

/// A small OpenID provider on loopback for the relying party's tests: discovery, keys, a token
/// endpoint that checks the client, the code, the redirect URI and the PKCE verifier, and
/// userinfo. Each test changes one thing about it (the discovery document's issuer, the key it
/// signs with, one claim) and expects the relying party to refuse exactly that.
final class LoopbackOpenIDProvider: Sendable {
    struct Grant {
        var clientID: String
        var redirectURI: String
        var nonce: String?
        var challenge: String
    }

    struct State {
        var issuer = ""
        var signingKey: SigningKey
        var publishedKeys: [JSONWebKey]
        /// The discovery document's `issuer` when it should differ from the real one.
        var publishedIssuer: String?
        var authMethods: [String]? = ["client_secret_basic", "client_secret_post"]
        var codes: [String: Grant] = [:]
        var changeClaims: @Sendable (inout IDTokenClaims) -> Void = { _ in }
        var atHash: (@Sendable (String) -> String)?
        /// An ID token sent as is instead of a signed one.
        var rawIDToken: String?
        var userInfoSubject: String?
        var accessTokens: Set<String> = []
        var discoveryFetches = 0
        var keyFetches = 0
        var tokenRequests = 0
        var lastTokenForm: [String: String] = [:]
        var lastTokenAuthorization: String?
    }

    static let clientID = "shop"
    static let clientSecret = "shop secret:&="
    static let redirectURI = "http://127.0.0.1:9/callback"
    static let subject = "ann"

    let state: Mutex<State>
    var issuer: String { state.withLock { $0.issuer } }

    private init(key: SigningKey) throws {
        state = Mutex(State(signingKey: key, publishedKeys: [try key.publicJWK()]))
    }

    /// Runs `body` with a provider listening on a free loopback port, then stops it.
    static func with<Result: Sendable>(
        _ algorithm: JSONWebSignature.Algorithm = .rs256,
        _ body: (LoopbackOpenIDProvider) async throws -> Result
    ) async throws -> Result {
        let provider = try LoopbackOpenIDProvider(key: try SigningKey.generate(algorithm))
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "loopback-openid-provider")
        logger.logLevel = .critical
        let application = Application(
            router: provider.router(),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) },
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            provider.state.withLock { $0.issuer = "http://127.0.0.1:\(port)/op" }
            do {
                let result = try await body(provider)
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return result
            } catch {
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                throw error
            }
        }
    }

    /// A relying party for this provider (client secret and basic authentication unless told).
    func relyingParty(secret: String? = LoopbackOpenIDProvider.clientSecret) throws -> OpenIDRelyingParty {
        try OpenIDRelyingParty(
            .init(
                issuer: issuer,
                clientID: Self.clientID,
                clientSecret: secret,
                redirectURI: Self.redirectURI
            )
        )
    }

    /// What the provider's login page would do for a signed-in user: reads the authorization
    /// request's URL and returns the callback's parameters (a new code, and the state).
    func authorize(_ url: String) throws -> [String: String] {
        let query = try #require(URLComponents(string: url)?.queryItems)
        func value(_ name: String) -> String? { query.first { $0.name == name }?.value }
        #expect(url.hasPrefix(issuer + "/authorize?"))
        #expect(value("response_type") == "code")
        #expect(value("code_challenge_method") == "S256")
        let code = Data.random(count: 16).base64URLEncodedString
        let grant = Grant(
            clientID: try #require(value("client_id")),
            redirectURI: try #require(value("redirect_uri")),
            nonce: value("nonce"),
            challenge: try #require(value("code_challenge"))
        )
        state.withLock { $0.codes[code] = grant }
        return ["code": code, "state": try #require(value("state"))]
    }

    /// The token the provider would issue for `grant` now, with the test's changes.
    private func idToken(for grant: Grant, accessToken: String) throws -> String {
        let (issuer, key, change, atHash, raw) = state.withLock {
            ($0.issuer, $0.signingKey, $0.changeClaims, $0.atHash, $0.rawIDToken)
        }
        if let raw { return raw }
        let now = Int(Date().timeIntervalSince1970)
        var claims = IDTokenClaims(iss: issuer, sub: Self.subject, aud: grant.clientID, exp: now + 300, iat: now)
        claims.nonce = grant.nonce
        claims.authTime = now - 5
        claims.email = "ann@example.com"
        change(&claims)
        let hash =
            atHash?(accessToken) ?? Data(SHA256.hash(data: Data(accessToken.utf8))).prefix(16).base64URLEncodedString
        return try JSONWebSignature.sign(WithAccessTokenHash(claims: claims, atHash: hash), with: key)
    }

    private struct WithAccessTokenHash: Encodable {
        var claims: IDTokenClaims
        var atHash: String
        enum CodingKeys: String, CodingKey { case atHash = "at_hash" }
        func encode(to encoder: any Encoder) throws {
            try claims.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(atHash, forKey: .atHash)
        }
    }

    private func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/op/.well-known/openid-configuration") { [self] _, _ -> Response in
            let (issuer, published, methods) = state.withLock {
                $0.discoveryFetches += 1
                return ($0.issuer, $0.publishedIssuer, $0.authMethods)
            }
            var metadata = OpenIDProviderMetadata(
                issuer: published ?? issuer,
                authorizationEndpoint: issuer + "/authorize",
                jwksURI: issuer + "/jwks",
                responseTypesSupported: ["code"],
                subjectTypesSupported: ["public"],
                idTokenSigningAlgValuesSupported: ["RS256", "ES256"]
            )
            metadata.tokenEndpoint = issuer + "/token"
            metadata.userinfoEndpoint = issuer + "/userinfo"
            metadata.endSessionEndpoint = issuer + "/logout"
            metadata.tokenEndpointAuthMethodsSupported = methods
            return try Self.json(metadata)
        }
        router.get("/op/jwks") { [self] _, _ -> Response in
            let keys = state.withLock {
                $0.keyFetches += 1
                return $0.publishedKeys
            }
            return try Self.json(JSONWebKeySet(keys: keys))
        }
        router.post("/op/token") { [self] request, _ -> Response in
            let body = try await request.body.collect(upTo: 65_536)
            let form = Self.form(String(buffer: body))
            let authorization = request.headers[.authorization]
            state.withLock {
                $0.tokenRequests += 1
                $0.lastTokenForm = form
                $0.lastTokenAuthorization = authorization
            }
            guard let code = form["code"], let grant = state.withLock({ $0.codes.removeValue(forKey: code) }),
                form["grant_type"] == "authorization_code"
            else { return try Self.oauthError("invalid_grant", "the code is unknown or used", status: .badRequest) }
            guard clientAuthenticated(form: form, authorization: authorization, clientID: grant.clientID) else {
                return try Self.oauthError("invalid_client", "the client did not authenticate", status: .unauthorized)
            }
            let verifier = form["code_verifier"] ?? ""
            guard form["redirect_uri"] == grant.redirectURI,
                Data(SHA256.hash(data: Data(verifier.utf8))).base64URLEncodedString == grant.challenge
            else {
                return try Self.oauthError("invalid_grant", "redirect_uri or code_verifier differ", status: .badRequest)
            }
            let accessToken = Data.random(count: 16).base64URLEncodedString
            state.withLock { _ = $0.accessTokens.insert(accessToken) }
            return try Self.json([
                "access_token": accessToken, "token_type": "Bearer",
                "id_token": try idToken(for: grant, accessToken: accessToken), "refresh_token": "refresh-1",
            ])
        }
        router.get("/op/userinfo") { [self] request, _ -> Response in
            let token = request.headers[.authorization].flatMap {
                $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil
            }
            let (known, subject) = state.withLock { (token.map($0.accessTokens.contains) ?? false, $0.userInfoSubject) }
            guard known else { return Response(status: .unauthorized) }
            return try Self.json(["sub": subject ?? Self.subject, "email": "ann@example.com", "email_verified": "true"])
        }
        return router
    }

    /// Basic with the form-encoded id and secret, or both as form fields, or (public) the id alone.
    private func clientAuthenticated(form: [String: String], authorization: String?, clientID: String) -> Bool {
        if let authorization {
            guard authorization.hasPrefix("Basic "),
                let decoded = Data(base64Encoded: String(authorization.dropFirst(6))),
                let pair = String(data: decoded, encoding: .utf8), let colon = pair.firstIndex(of: ":")
            else { return false }
            let id = String(pair[..<colon]).removingPercentEncoding
            let secret = String(pair[pair.index(after: colon)...]).removingPercentEncoding
            return id == clientID && secret == Self.clientSecret && form["client_secret"] == nil
        }
        if let secret = form["client_secret"] { return form["client_id"] == clientID && secret == Self.clientSecret }
        return form["client_id"] == clientID
    }

    static func form(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(value)))
        )
    }

    static func oauthError(_ error: String, _ description: String, status: HTTPResponse.Status) throws -> Response {
        try json(["error": error, "error_description": description], status: status)
    }
}
