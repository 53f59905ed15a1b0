import Foundation
import GatehouseOpenID
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@Suite("OpenID relying party against a loopback provider")
struct RelyingPartyTests {
    /// begin, the provider's "login", finish: the error of the whole flow, or nil when it signed in.
    static func signIn(
        _ provider: LoopbackOpenIDProvider,
        party: OpenIDRelyingParty? = nil,
        options: OpenIDAuthorizationOptions = .init(),
        fetchUserInfo: Bool = false
    ) async throws -> Result<OpenIDSignIn, OpenIDRelyingPartyError> {
        let party = try party ?? provider.relyingParty()
        let request = try await party.begin(options)
        let callback = try provider.authorize(request.url)
        do {
            return .success(try await party.finish(callback: callback, request: request, fetchUserInfo: fetchUserInfo))
        } catch {
            return .failure(error)
        }
    }

    @Test("signs in with a code, PKCE and a nonce; reads userinfo", arguments: JSONWebSignature.Algorithm.allCases)
    func signsIn(_ algorithm: JSONWebSignature.Algorithm) async throws {
        try await LoopbackOpenIDProvider.with(algorithm) { provider in
            let party = try provider.relyingParty()
            let request = try await party.begin()
            let query = try #require(URLComponents(string: request.url)?.queryItems)
            #expect(query.first { $0.name == "scope" }?.value == "openid email profile")
            #expect(query.first { $0.name == "redirect_uri" }?.value == LoopbackOpenIDProvider.redirectURI)
            #expect(request.codeVerifier.count == 43 && request.state != request.nonce)
            let callback = try provider.authorize(request.url)
            let signIn = try await party.finish(callback: callback, request: request, fetchUserInfo: true)
            #expect(signIn.claims.sub == LoopbackOpenIDProvider.subject)
            #expect(signIn.claims.email == "ann@example.com")
            #expect(signIn.refreshToken == "refresh-1")
            #expect(signIn.userInfo?.emailVerified == true)
            // client_secret_basic by default; the secret never in the form.
            let (authorization, form) = provider.state.withLock { ($0.lastTokenAuthorization, $0.lastTokenForm) }
            #expect(authorization?.hasPrefix("Basic ") == true)
            #expect(form["client_secret"] == nil && form["code_verifier"] == request.codeVerifier)
        }
    }

    @Test("the discovery document and keys are fetched once for many sign-ins")
    func cachesMetadataAndKeys() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            let party = try provider.relyingParty()
            for _ in 0..<3 { _ = try await Self.signIn(provider, party: party).get() }
            #expect(provider.state.withLock { ($0.discoveryFetches, $0.keyFetches) } == (1, 1))
        }
    }

    @Test("client_secret_post when that is all the provider offers; a public client sends its id alone")
    func clientAuthentication() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            provider.state.withLock { $0.authMethods = ["client_secret_post"] }
            _ = try await Self.signIn(provider).get()
            var (authorization, form) = provider.state.withLock { ($0.lastTokenAuthorization, $0.lastTokenForm) }
            #expect(authorization == nil && form["client_secret"] == LoopbackOpenIDProvider.clientSecret)

            _ = try await Self.signIn(provider, party: try provider.relyingParty(secret: nil)).get()
            (authorization, form) = provider.state.withLock { ($0.lastTokenAuthorization, $0.lastTokenForm) }
            #expect(authorization == nil && form["client_secret"] == nil)
            #expect(form["client_id"] == LoopbackOpenIDProvider.clientID)

            provider.state.withLock { $0.authMethods = ["private_key_jwt"] }
            let party = try provider.relyingParty()
            let request = try await party.begin()
            await #expect(throws: OpenIDRelyingPartyError.self) {
                try await party.finish(callback: try provider.authorize(request.url), request: request)
            }
        }
    }

    @Test("a discovery document naming another issuer is refused")
    func discoveryMismatch() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            // Only a trailing slash more: still another issuer (Discovery 1.0 §4.3).
            provider.state.withLock { $0.publishedIssuer = $0.issuer + "/" }
            let party = try provider.relyingParty()
            await #expect(
                throws: OpenIDRelyingPartyError.discoveryMismatch(
                    expected: provider.issuer,
                    published: provider.issuer + "/"
                )
            ) {
                try await party.begin()
            }
        }
    }

    /// One claim changed at a time; everything else as in a good token.
    struct ClaimCase: Sendable, CustomTestStringConvertible {
        var name: String
        var options = OpenIDAuthorizationOptions()
        var change: @Sendable (inout IDTokenClaims) -> Void
        var reason: String
        var testDescription: String { name }
    }

    static let claimCases: [ClaimCase] = [
        ClaimCase(name: "another issuer", change: { $0.iss += "x" }, reason: "iss"),
        ClaimCase(name: "another audience", change: { $0.aud = Audience(["other"]) }, reason: "aud does not contain"),
        ClaimCase(name: "azp of another party", change: { $0.azp = "other" }, reason: "azp"),
        ClaimCase(
            name: "several audiences without azp",
            change: { $0.aud = Audience([LoopbackOpenIDProvider.clientID, "other"]) },
            reason: "no azp"
        ),
        ClaimCase(name: "expired beyond the skew", change: { $0.exp = $0.iat - 61 }, reason: "expired"),
        ClaimCase(name: "issued in the future beyond the skew", change: { $0.iat += 120 }, reason: "iat"),
        ClaimCase(name: "another nonce", change: { $0.nonce = "replayed" }, reason: "nonce is not"),
        ClaimCase(name: "no nonce", change: { $0.nonce = nil }, reason: "no nonce"),
        ClaimCase(
            name: "max_age asked, no auth_time",
            options: .init(maxAge: 300),
            change: { $0.authTime = nil },
            reason: "no auth_time"
        ),
        ClaimCase(
            name: "max_age asked, authenticated long ago",
            options: .init(maxAge: 300),
            change: { $0.authTime = $0.iat - 3600 },
            reason: "max_age"
        ),
    ]

    @Test("an ID token with one wrong claim is refused", arguments: claimCases)
    func refusesClaim(_ claimCase: ClaimCase) async throws {
        try await LoopbackOpenIDProvider.with { provider in
            provider.state.withLock { $0.changeClaims = claimCase.change }
            let result = try await Self.signIn(provider, options: claimCase.options)
            guard case .failure(.idTokenRefused(let reason)) = result else {
                Issue.record("expected the ID token to be refused, got \(result)")
                return
            }
            #expect(reason.contains(claimCase.reason), "\(reason)")
        }
    }

    @Test("within the skew, an expired-looking token and auth_time at the edge pass")
    func skewAllowed() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            provider.state.withLock {
                $0.changeClaims = {
                    $0.exp = $0.iat - 30
                    $0.iat += 30
                    $0.authTime = $0.exp - 300
                }
            }
            _ = try await Self.signIn(provider, options: .init(maxAge: 300)).get()
        }
    }

    @Test("an at_hash that is not the access token's is refused")
    func refusesAccessTokenHash() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            provider.state.withLock { $0.atHash = { _ in Data(repeating: 1, count: 16).base64URLEncodedString } }
            let result = try await Self.signIn(provider)
            guard case .failure(.idTokenRefused(let reason)) = result else {
                Issue.record("expected the ID token to be refused, got \(result)")
                return
            }
            #expect(reason.contains("at_hash"))
        }
    }

    @Test("a token signed by an unpublished key is refused; keys are fetched again at most once per interval")
    func unknownKey() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            let party = try provider.relyingParty()
            _ = try await Self.signIn(provider, party: party).get()
            let stranger = try SigningKey.generate(.rs256)
            provider.state.withLock { $0.signingKey = stranger }
            for _ in 0..<3 {
                let result = try await Self.signIn(provider, party: party)
                guard case .failure(.idTokenRefused(let reason)) = result else {
                    Issue.record("expected the ID token to be refused, got \(result)")
                    return
                }
                #expect(reason.contains("not among the published keys"))
            }
            // One fetch at the start, one for the first unknown kid, none for the next two.
            #expect(provider.state.withLock { $0.keyFetches } == 2)
        }
    }

    @Test("a key the provider rotated to is fetched and accepted")
    func rotatedKey() async throws {
        try await LoopbackOpenIDProvider.with(.es256) { provider in
            let party = try provider.relyingParty()
            _ = try await Self.signIn(provider, party: party).get()
            let next = try SigningKey.generate(.es256)
            let published = try next.publicJWK()
            provider.state.withLock {
                $0.signingKey = next
                $0.publishedKeys = [published]
            }
            let signIn = try await Self.signIn(provider, party: party).get()
            #expect(signIn.claims.sub == LoopbackOpenIDProvider.subject)
            #expect(provider.state.withLock { $0.keyFetches } == 2)
        }
    }

    @Test("a token signed by another key under a published kid is refused")
    func impostorKey() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            let impostor = try SigningKey.generate(.rs256)
            provider.state.withLock {
                $0.signingKey =
                    (try? SigningKey(algorithm: .rs256, kid: $0.signingKey.kid, pem: impostor.pem)) ?? impostor
            }
            let result = try await Self.signIn(provider)
            guard case .failure(.idTokenRefused(let reason)) = result else {
                Issue.record("expected the ID token to be refused, got \(result)")
                return
            }
            #expect(reason.contains("does not verify"))
        }
    }

    @Test("alg none and HS256 tokens are refused", arguments: ["none", "HS256"])
    func foreignAlgorithm(_ alg: String) async throws {
        try await LoopbackOpenIDProvider.with { provider in
            let now = Int(Date().timeIntervalSince1970)
            let claims = IDTokenClaims(
                iss: provider.issuer,
                sub: "eve",
                aud: LoopbackOpenIDProvider.clientID,
                exp: now + 300,
                iat: now
            )
            let header = Data(#"{"alg":"\#(alg)"}"#.utf8).base64URLEncodedString
            let body = try JSONEncoder().encode(claims).base64URLEncodedString
            provider.state.withLock { $0.rawIDToken = header + "." + body + "." }
            let result = try await Self.signIn(provider)
            guard case .failure(.idTokenRefused) = result else {
                Issue.record("expected the ID token to be refused, got \(result)")
                return
            }
        }
    }

    @Test("a callback with another state is refused before the code is exchanged")
    func stateMismatch() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            let party = try provider.relyingParty()
            let request = try await party.begin()
            var callback = try provider.authorize(request.url)
            callback["state"] = try await party.begin().state
            await #expect(
                throws: OpenIDRelyingPartyError.callbackMismatch(
                    "its state is not the one of the authorization request"
                )
            ) {
                try await party.finish(callback: callback, request: request)
            }
            callback["state"] = request.state
            callback["iss"] = "http://127.0.0.1:1/other"
            await #expect(throws: OpenIDRelyingPartyError.self) {
                try await party.finish(callback: callback, request: request)
            }
            #expect(provider.state.withLock { $0.tokenRequests } == 0)
            // The same callback with the right state and no iss goes through.
            callback["iss"] = nil
            _ = try await party.finish(callback: callback, request: request)
        }
    }

    @Test("the provider's error in the callback and the token endpoint's refusal are reported as such")
    func providerRefusals() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            let party = try provider.relyingParty()
            let request = try await party.begin()
            await #expect(
                throws: OpenIDRelyingPartyError.authorizationRefused(error: "access_denied", description: "no")
            ) {
                try await party.finish(
                    callback: ["error": "access_denied", "error_description": "no", "state": request.state],
                    request: request
                )
            }
            let callback = try provider.authorize(request.url)
            _ = try await party.finish(callback: callback, request: request)
            // The code again: used.
            await #expect(
                throws: OpenIDRelyingPartyError.tokenEndpointRefused(
                    error: "invalid_grant",
                    description: "the code is unknown or used"
                )
            ) { try await party.finish(callback: callback, request: request) }
        }
    }

    @Test("userinfo about another subject is refused")
    func userInfoSubject() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            provider.state.withLock { $0.userInfoSubject = "eve" }
            let result = try await Self.signIn(provider, fetchUserInfo: true)
            guard case .failure(.userInfoRefused(let reason)) = result else {
                Issue.record("expected userinfo to be refused, got \(result)")
                return
            }
            #expect(reason.contains("sub"))
        }
    }

    @Test("authorization parameters; reserved ones cannot be overridden; the logout URL")
    func parametersAndLogout() async throws {
        try await LoopbackOpenIDProvider.with { provider in
            let party = try provider.relyingParty()
            let request = try await party.begin(
                .init(
                    prompt: "login",
                    loginHint: "ann@example.com",
                    maxAge: 60,
                    additionalParameters: ["ui_locales": "de"]
                )
            )
            let query = try #require(URLComponents(string: request.url)?.queryItems)
            for (name, value) in [
                "prompt": "login", "login_hint": "ann@example.com", "max_age": "60", "ui_locales": "de",
            ] {
                #expect(query.first { $0.name == name }?.value == value)
            }
            await #expect(throws: OpenIDRelyingPartyError.self) {
                try await party.begin(.init(additionalParameters: ["nonce": "mine"]))
            }
            let logout = try #require(
                try await party.endSessionURL(idTokenHint: "t.o.k", postLogoutRedirectURI: "http://127.0.0.1:9/")
            )
            let items = try #require(URLComponents(string: logout)?.queryItems)
            #expect(logout.hasPrefix(provider.issuer + "/logout?"))
            #expect(items.first { $0.name == "id_token_hint" }?.value == "t.o.k")
            #expect(items.first { $0.name == "post_logout_redirect_uri" }?.value == "http://127.0.0.1:9/")
        }
    }

    @Test("an unreachable provider and unusable configurations are reported as such")
    func unreachableAndConfiguration() async throws {
        let port = try #require(LoopbackPort.free())
        let party = try OpenIDRelyingParty(
            .init(issuer: "http://127.0.0.1:\(port)/op", clientID: "shop", redirectURI: "http://127.0.0.1:9/cb")
        )
        do {
            _ = try await party.begin()
            Issue.record("begin succeeded against a closed port")
        } catch {
            guard case .providerUnreachable(let url, _) = error else {
                Issue.record("expected providerUnreachable, got \(error)")
                return
            }
            #expect(url == "http://127.0.0.1:\(port)/op/.well-known/openid-configuration")
        }
        for issuer in ["http://id.example.com", "https://id.example.com?x=1", "ftp://id.example.com"] {
            #expect(throws: OpenIDRelyingPartyError.self, "\(issuer)") {
                try OpenIDRelyingParty(
                    .init(issuer: issuer, clientID: "shop", redirectURI: "https://shop.example.com/cb")
                )
            }
        }
        #expect(throws: OpenIDRelyingPartyError.self) {
            try OpenIDRelyingParty(.init(issuer: "https://id.example.com", clientID: "shop", redirectURI: "/cb"))
        }
        // https anywhere and http on loopback are fine.
        _ = try OpenIDRelyingParty(
            .init(issuer: "https://id.example.com", clientID: "shop", redirectURI: "https://s.example.com/cb")
        )
        _ = try OpenIDRelyingParty(
            .init(issuer: "http://localhost:4444", clientID: "shop", redirectURI: "http://localhost/cb")
        )
    }
}
