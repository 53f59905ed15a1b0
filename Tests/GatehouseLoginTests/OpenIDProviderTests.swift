import Foundation
import GatehouseLogin
import GatehouseOpenID
import GatehouseProtocol
import GatehouseTesting
import Testing

@Suite("OpenID provider: discovery, code flow, tokens, sessions, subjects and keys", .serialized)
struct OpenIDProviderTests {
    // MARK: - Discovery

    @Test("discovery names the /login issuer and its endpoints, and advertises only what is honoured")
    func discovery() async throws {
        try await withOpenID { op in
            let response = await op.send(WireRequest(method: "GET", path: LoginServer.discoveryPath))
            #expect(response.status == 200)
            #expect(response.headers["Content-Type"] == "application/json")
            let document = try JSONDecoder().decode(OpenIDProviderMetadata.self, from: response.body)
            #expect(document.issuer == OP.issuer)
            #expect(document.authorizationEndpoint == OP.publicURL + LoginServer.authorizePath)
            #expect(document.tokenEndpoint == OP.publicURL + LoginServer.tokenPath)
            #expect(document.userinfoEndpoint == OP.publicURL + LoginServer.userinfoPath)
            #expect(document.jwksURI == OP.publicURL + LoginServer.jwksPath)
            #expect(document.endSessionEndpoint == OP.publicURL + LoginServer.logoutPath)
            #expect(document.responseTypesSupported == ["code"])
            #expect(Set(document.idTokenSigningAlgValuesSupported) == ["RS256", "ES256"])
            #expect(document.codeChallengeMethodsSupported == ["S256"])
            #expect(
                Set(document.tokenEndpointAuthMethodsSupported ?? []) == [
                    "none", "client_secret_basic", "client_secret_post",
                ]
            )
            #expect(Set(document.promptValuesSupported ?? []) == ["none", "login", "consent"])
            #expect(Set(document.subjectTypesSupported) == ["public", "pairwise"])
            #expect(Set(document.grantTypesSupported ?? []) == ["authorization_code", "refresh_token"])
            #expect(document.responseModesSupported == ["query"])
            #expect(document.scopesSupported == ["email", "openid", "profile"])
            #expect(document.backchannelLogoutSupported == true)
            #expect(document.backchannelLogoutSessionSupported == true)
            #expect(document.authorizationResponseIssParameterSupported == true)
            #expect(document.requestParameterSupported == false && document.requestURIParameterSupported == false)
            #expect(document.claimsParameterSupported == false)
            // The discovery document is under the issuer, as Discovery 1.0 §4 derives it.
            #expect(OP.publicURL + LoginServer.discoveryPath == document.issuer + "/.well-known/openid-configuration")

            // The key set at jwks_uri: a signing and a next key of each advertised algorithm.
            let keys = try await op.jwks()
            for algorithm in document.idTokenSigningAlgValuesSupported {
                let published = keys.keys.filter { $0.alg == algorithm }
                #expect(published.count == 2, "\(algorithm)")
                #expect(published.allSatisfy { $0.use == "sig" && $0.kid != nil })
            }
            #expect(keys == (try await op.login.publishedKeys()))
            #expect(await op.send(WireRequest(method: "POST", path: LoginServer.jwksPath)).status == 405)
            #expect(await op.send(WireRequest(method: "POST", path: LoginServer.discoveryPath)).status == 405)

            // Every prompt value advertised is accepted (none answers as a signed-out browser must).
            for prompt in document.promptValuesSupported ?? [] {
                var browser = Agent(op)
                let answer = await browser.authorize(.web().with("prompt", prompt))
                if prompt == "none" {
                    #expect(answer.status == 303 && redirectQuery(answer)["error"] == "login_required")
                } else {
                    #expect(answer.status == 200 && browser.lastHTML.contains("<h1>Sign in</h1>"), "\(prompt)")
                }
            }
            // What is not advertised is refused by name, never silently ignored.
            var browser = Agent(op)
            for (name, value, error) in [
                ("prompt", "select_account", "invalid_request"), ("response_mode", "fragment", "invalid_request"),
                ("response_mode", "form_post", "invalid_request"), ("request", "e30.e30.", "request_not_supported"),
                ("request_uri", "https://web.example/r", "request_uri_not_supported"),
            ] {
                let answer = await browser.authorize(.web().with(name, value))
                #expect(answer.status == 303 && redirectQuery(answer)["error"] == error, "\(name)=\(value)")
            }
            #expect(await browser.authorize(.web().with("response_mode", "query")).status == 200)
            for scope in document.scopesSupported ?? [] {
                #expect(await browser.authorize(.web(scope: scope)).status == 200, "\(scope)")
            }
            var plain = AuthRequest.web()
            plain.extra = [("code_challenge_method", "plain")]
            let refusedPlain = await browser.send(
                "GET",
                LoginServer.authorizePath + "?"
                    + FormFields.encode([
                        ("response_type", "code"), ("client_id", OP.web), ("redirect_uri", OP.webRedirect),
                        ("state", "s"), ("code_challenge", plain.verifier), ("code_challenge_method", "plain"),
                    ])
            )
            #expect(redirectQuery(refusedPlain)["error"] == "invalid_request")
            for responseType in ["token", "id_token", "code id_token", "code token"] {
                let answer = await browser.send(
                    "GET",
                    LoginServer.authorizePath + "?"
                        + AuthRequest.web().query.replacingOccurrences(
                            of: "response_type=code",
                            with: FormFields.encode([("response_type", responseType)])
                        )
                )
                #expect(redirectQuery(answer)["error"] == "unsupported_response_type", "\(responseType)")
            }
            // Grant types: only the two advertised.
            let password = await op.token(
                [("grant_type", "password"), ("username", OP.ann), ("password", OP.password)],
                auth: .basic(OP.web, OP.webSecret)
            )
            #expect(password.status == 400 && password.error == "unsupported_grant_type")
        }
    }

    // MARK: - Code flow

    @Test("confidential client with client_secret_basic: an RS256 ID token with every claim, userinfo by scope")
    func codeFlowBasicRS256() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let request = AuthRequest.web(scope: "openid profile email")
            let signedInAt = op.now
            let code = try await browser.code(request)
            #expect(browser.session != nil)
            op.clock.advance(by: 7)
            let tokens = try await op.exchange(code, request, auth: .basic(OP.web, OP.webSecret))
            #expect(tokens.scope == "openid profile email")
            #expect(tokens.expiresIn == 300)
            #expect(tokens.refresh != nil)
            let idToken = try await op.verify(try #require(tokens.idToken))
            #expect(idToken.header.alg == "RS256")
            #expect(try await op.jwks().keys.contains { $0.kid == idToken.header.kid && $0.kty == "RSA" })
            let claims = idToken.claims
            #expect(claims.iss == OP.issuer)
            #expect(claims.sub == OP.ann)
            #expect(claims.aud.values == [OP.web])
            #expect(claims.iat == op.now)
            #expect(claims.exp == op.now + 300)
            #expect(claims.authTime == signedInAt)
            #expect(claims.nonce == request.nonce)
            #expect(claims.acr == "urn:gatehouse:acr:password")
            #expect(claims.amr == ["pwd"])
            #expect(claims.sid?.isEmpty == false)
            #expect(idToken.payload["at_hash"] as? String == accessTokenHash(tokens.access))
            #expect(claims.name == OP.ann && claims.email == OP.ann && claims.emailVerified == false)

            let info = await op.userinfo(tokens.access)
            #expect(info.status == 200)
            #expect(info["sub"] == OP.ann && info["name"] == OP.ann && info["preferred_username"] == OP.ann)
            #expect(info["email"] == OP.ann && info.json["email_verified"] as? Bool == false)
            #expect(info.headers["Cache-Control"] == "no-store")
            // Userinfo answers POST too (Core 1.0 §5.3.1).
            #expect(await op.userinfo(tokens.access, method: "POST")["sub"] == OP.ann)
        }
    }

    @Test("confidential client with client_secret_post and consent: an ES256 ID token; userinfo with openid email")
    func codeFlowPostES256() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let request = AuthRequest.portal(scope: "openid email")
            let tokens = try await browser.tokens(request, auth: .post(OP.portal, OP.portalSecret))
            let idToken = try await op.verify(try #require(tokens.idToken))
            #expect(idToken.header.alg == "ES256")
            #expect(
                try await op.jwks().keys.contains {
                    $0.kid == idToken.header.kid && $0.kty == "EC" && $0.crv == "P-256"
                }
            )
            #expect(idToken.claims.aud.values == [OP.portal] && idToken.claims.sub == OP.ann)
            #expect(idToken.claims.nonce == request.nonce && idToken.claims.amr == ["pwd"])
            #expect(idToken.payload["at_hash"] as? String == accessTokenHash(tokens.access))
            #expect(idToken.claims.name == nil && idToken.claims.preferredUsername == nil)
            let info = await op.userinfo(tokens.access)
            #expect(Set(info.json.keys) == ["sub", "email", "email_verified"])
            #expect(info["email"] == OP.ann)
            // An ES256 token does not verify against the RSA keys alone, nor an RS256 key's kid.
            let jws = try JSONWebSignature(compact: try #require(tokens.idToken))
            let rsaOnly = JSONWebKeySet(keys: try await op.jwks().keys.filter { $0.kty == "RSA" })
            #expect(throws: JSONWebSignature.Refusal.self) { try jws.verify(with: rsaOnly) }
        }
    }

    @Test("public client: PKCE alone; openid only gives userinfo just sub; a secret from it is refused")
    func publicClient() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let request = AuthRequest.spa()
            let code = try await browser.code(request)
            // A public client that sends a secret is not a public client any more.
            let withSecret = await op.token(
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI),
                    ("code_verifier", request.verifier),
                ],
                auth: .post(OP.spa, "some-secret-0123456789")
            )
            #expect(withSecret.status == 401 && withSecret.error == "invalid_client")
            let missingVerifier = await op.token(
                [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI)],
                auth: .none(OP.spa)
            )
            #expect(missingVerifier.status == 400 && missingVerifier.error == "invalid_request")
            let tokens = try await op.exchange(code, request, auth: .none(OP.spa))
            let claims = try await op.verify(try #require(tokens.idToken)).claims
            #expect(claims.aud.values == [OP.spa] && claims.sub == OP.ann)
            #expect(claims.name == nil && claims.email == nil)
            let info = await op.userinfo(tokens.access)
            #expect(info.status == 200)
            #expect(Set(info.json.keys) == ["sub"] && info["sub"] == OP.ann)
            // profile adds the names, not the e-mail address.
            let profile = try await browser.tokens(.spa(scope: "openid profile"))
            let profileInfo = await op.userinfo(profile.access)
            #expect(Set(profileInfo.json.keys) == ["sub", "name", "preferred_username"])
            // Without openid: no ID token, and userinfo is refused for scope.
            let noOpenID = try await browser.tokens(.web(scope: "profile"))
            #expect(noOpenID.idToken == nil)
            let refused = await op.userinfo(noOpenID.access)
            #expect(refused.status == 403 && refused.error == "insufficient_scope")
            // No token, a bad one, another scheme: 401 with a Bearer challenge.
            for header in ["Bearer nonsense", "Basic \(Data("web:x".utf8).base64EncodedString())", "Bearer "] {
                let answer = JSONAnswer(
                    await op.send(
                        WireRequest(method: "GET", path: LoginServer.userinfoPath, headers: ["Authorization": header])
                    )
                )
                #expect(answer.status == 401 && answer.error == "invalid_token", "\(header)")
                #expect(answer.headers["WWW-Authenticate"]?.hasPrefix("Bearer") == true)
            }
            #expect(await op.send(WireRequest(method: "GET", path: LoginServer.userinfoPath)).status == 401)
        }
    }

    @Test(
        "client authentication: wrong secret 401, both methods 400, mismatched ids 400; the code is not spent by them"
    )
    func clientAuthentication() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let request = AuthRequest.web()
            let code = try await browser.code(request)
            let form = [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI),
                ("code_verifier", request.verifier),
            ]
            let before = try await op.fingerprint()
            let wrongBasic = await op.token(form, auth: .basic(OP.web, "wrong-secret-0123456789"))
            #expect(wrongBasic.status == 401 && wrongBasic.error == "invalid_client")
            #expect(wrongBasic.headers["WWW-Authenticate"]?.hasPrefix("Basic") == true)
            let wrongPost = await op.token(form, auth: .post(OP.web, "wrong-secret-0123456789"))
            #expect(wrongPost.status == 401 && wrongPost.error == "invalid_client")
            // Another client's secret is a wrong secret.
            #expect(await op.token(form, auth: .basic(OP.web, OP.portalSecret)).status == 401)
            let noSecret = await op.token(form, auth: .none(OP.web))
            #expect(noSecret.status == 401 && noSecret.error == "invalid_client")
            let unknown = await op.token(form, auth: .basic("stranger", OP.webSecret))
            #expect(unknown.status == 401 && unknown.error == "invalid_client")
            let both = await op.token(form + [("client_secret", OP.webSecret)], auth: .basic(OP.web, OP.webSecret))
            #expect(both.status == 400 && both.error == "invalid_request")
            let mismatched = await op.token(form + [("client_id", OP.portal)], auth: .basic(OP.web, OP.webSecret))
            #expect(mismatched.status == 400 && mismatched.error == "invalid_request")
            let notBasic = await op.token(form, auth: .raw)
            #expect(notBasic.status == 401 && notBasic.error == "invalid_client")
            let brokenBasic = JSONAnswer(
                await op.send(
                    WireRequest(
                        method: "POST",
                        path: LoginServer.tokenPath,
                        headers: ["Content-Type": "application/x-www-form-urlencoded", "Authorization": "Basic !!!"],
                        body: Data(FormFields.encode(form).utf8)
                    )
                )
            )
            #expect(brokenBasic.status == 401 && brokenBasic.error == "invalid_client")
            let json = JSONAnswer(
                await op.send(
                    WireRequest(
                        method: "POST",
                        path: LoginServer.tokenPath,
                        headers: ["Content-Type": "application/json"],
                        body: Data(#"{"grant_type":"authorization_code"}"#.utf8)
                    )
                )
            )
            #expect(json.status == 400 && json.error == "invalid_request")
            #expect(try await op.fingerprint() == before)
            // Refused before the code was looked at: it still works once.
            _ = try await op.exchange(code, request, auth: .basic(OP.web, OP.webSecret))
        }
    }

    @Test("wrong verifier, redirect URI or client, an expired or unknown code: invalid_grant")
    func grantRefusals() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            func exchange(
                _ code: String,
                _ request: AuthRequest,
                verifier: String? = nil,
                redirect: String? = nil,
                auth: ClientAuth
            )
                async -> JSONAnswer
            {
                await op.token(
                    [
                        ("grant_type", "authorization_code"), ("code", code),
                        ("redirect_uri", redirect ?? request.redirectURI),
                        ("code_verifier", verifier ?? request.verifier),
                    ],
                    auth: auth
                )
            }
            let request = AuthRequest.web()
            let web = defaultAuth(OP.web)
            let wrongVerifier = await exchange(
                try await browser.code(request),
                request,
                verifier: PKCE.makeVerifier(),
                auth: web
            )
            #expect(wrongVerifier.status == 400 && wrongVerifier.error == "invalid_grant")
            let wrongRedirect = await exchange(
                try await browser.code(request),
                request,
                redirect: "https://web.example/cb/",
                auth: web
            )
            #expect(wrongRedirect.error == "invalid_grant")
            let otherClient = await exchange(try await browser.code(request), request, auth: defaultAuth(OP.portal))
            #expect(otherClient.error == "invalid_grant")
            let publicOther = await exchange(try await browser.code(request), request, auth: .none(OP.spa))
            #expect(publicOther.error == "invalid_grant")
            let unknown = await exchange(Data.random(count: 32).base64URLEncodedString, request, auth: web)
            #expect(unknown.status == 400 && unknown.error == "invalid_grant")
            let late = try await browser.code(request)
            op.clock.advance(by: 61)
            let expired = await exchange(late, request, auth: web)
            #expect(expired.error == "invalid_grant")
            // Each refusal spent its code: none issued a token.
            let counts = try await op.fingerprint()
            #expect(counts["tokens"] == 0)
        }
    }

    @Test("a replayed code: invalid_grant, and what its first exchange issued stops working")
    func codeReplay() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let request = AuthRequest.web()
            let code = try await browser.code(request)
            let first = try await op.exchange(code, request, auth: defaultAuth(OP.web))
            #expect(await op.userinfo(first.access).status == 200)
            let replay = await op.token(
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI),
                    ("code_verifier", request.verifier),
                ],
                auth: defaultAuth(OP.web)
            )
            #expect(replay.status == 400 && replay.error == "invalid_grant")
            #expect(await op.userinfo(first.access).status == 401)
            let refreshed = await op.refresh(try #require(first.refresh), auth: defaultAuth(OP.web))
            #expect(refreshed.status == 400 && refreshed.error == "invalid_grant")
        }
    }

    // MARK: - Refresh tokens

    @Test("refresh rotates; a spent refresh token used again revokes the grant's newest tokens")
    func refreshRotation() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let request = AuthRequest.web(scope: "openid profile")
            let signedInAt = op.now
            let first = try await browser.tokens(request)
            let firstClaims = try await op.verify(try #require(first.idToken)).claims
            op.clock.advance(by: 30)
            let answer = await op.refresh(try #require(first.refresh), auth: defaultAuth(OP.web))
            #expect(answer.status == 200)
            let second = try Tokens(answer)
            #expect(second.refresh != nil && second.refresh != first.refresh && second.access != first.access)
            #expect(second.scope == "openid profile")
            let claims = try await op.verify(try #require(second.idToken)).claims
            #expect(claims.sub == OP.ann && claims.iat == op.now && claims.authTime == signedInAt)
            #expect(claims.sid == firstClaims.sid)
            #expect(claims.nonce == nil)
            #expect(await op.userinfo(second.access).status == 200)
            // The spent one again: refused, and the grant is revoked.
            let reused = await op.refresh(try #require(first.refresh), auth: defaultAuth(OP.web))
            #expect(reused.status == 400 && reused.error == "invalid_grant")
            #expect(await op.userinfo(second.access).status == 401)
            let newest = await op.refresh(try #require(second.refresh), auth: defaultAuth(OP.web))
            #expect(newest.status == 400 && newest.error == "invalid_grant")
            // Another grant of the same session is untouched.
            let other = try await browser.tokens(.spa())
            #expect(await op.userinfo(other.access).status == 200)
        }
    }

    @Test("refresh: a narrower scope is granted, a wider one is invalid_scope, another client's token is refused")
    func refreshScopeAndClient() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let first = try await browser.tokens(.web(scope: "openid profile"))
            let narrower = await op.refresh(try #require(first.refresh), auth: defaultAuth(OP.web), scope: "openid")
            #expect(narrower.status == 200)
            let second = try Tokens(narrower)
            #expect(second.scope == "openid")
            #expect(Set(await op.userinfo(second.access).json.keys) == ["sub"])
            let wider = await op.refresh(try #require(second.refresh), auth: defaultAuth(OP.web), scope: "openid email")
            #expect(wider.status == 400 && wider.error == "invalid_scope")
            let unknownScope = await op.refresh(
                try #require(second.refresh),
                auth: defaultAuth(OP.web),
                scope: "openid admin"
            )
            #expect(unknownScope.status == 400 && unknownScope.error == "invalid_scope")
            // Asking too much is the client's mistake, not a replay: its refresh token still works.
            let retried = await op.refresh(try #require(second.refresh), auth: defaultAuth(OP.web), scope: "openid")
            #expect(retried.status == 200, "\(retried.text)")

            // Client A's refresh token, presented by client B (authenticated as itself): refused.
            let webTokens = try await browser.tokens(.web())
            let stolen = await op.refresh(try #require(webTokens.refresh), auth: defaultAuth(OP.portal))
            #expect(stolen.status == 400 && stolen.error == "invalid_grant")
            let byPublic = await op.refresh(try #require(webTokens.refresh), auth: .none(OP.spa))
            #expect(byPublic.status == 400 && byPublic.error == "invalid_grant")
            let garbage = await op.refresh("not-a-token", auth: defaultAuth(OP.web))
            #expect(garbage.status == 400 && garbage.error == "invalid_grant")
            let missing = await op.token([("grant_type", "refresh_token")], auth: defaultAuth(OP.web))
            #expect(missing.status == 400 && missing.error == "invalid_request")
        }
    }

    @Test("lifetimes: the access token expires, the refresh token outlives it, the session's end ends both")
    func lifetimes() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let first = try await browser.tokens(.web())
            op.clock.advance(by: 299)
            #expect(await op.userinfo(first.access).status == 200)
            op.clock.advance(by: 2)
            let expired = await op.userinfo(first.access)
            #expect(expired.status == 401 && expired.error == "invalid_token")
            let refreshed = await op.refresh(try #require(first.refresh), auth: defaultAuth(OP.web))
            #expect(refreshed.status == 200)
            let second = try Tokens(refreshed)
            #expect(await op.userinfo(second.access).status == 200)
            // The browser session lasts 10 hours; after it, neither a silent sign-in nor a refresh.
            op.clock.advance(by: 36000)
            let silent = await browser.authorize(.web().with("prompt", "none"))
            #expect(redirectQuery(silent)["error"] == "login_required")
            let late = await op.refresh(try #require(second.refresh), auth: defaultAuth(OP.web))
            #expect(late.status == 400 && late.error == "invalid_grant")
        }
    }

    // MARK: - Single sign-on

    @Test("signed in for one client, another client's authorization returns a code at once")
    func singleSignOn() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let web = try await browser.tokens(.web())
            let webClaims = try await op.verify(try #require(web.idToken)).claims
            op.clock.advance(by: 20)
            let request = AuthRequest.spa()
            let answer = await browser.authorize(request)
            #expect(answer.status == 303 && answer.body.isEmpty)
            #expect(answer.headers["Location"]?.hasPrefix(OP.spaRedirect + "?") == true)
            let code = try #require(redirectQuery(answer)["code"])
            #expect(redirectQuery(answer)["state"] == request.state)
            let spa = try await op.exchange(code, request, auth: .none(OP.spa))
            let spaClaims = try await op.verify(try #require(spa.idToken)).claims
            #expect(spaClaims.sid == webClaims.sid && spaClaims.authTime == webClaims.authTime)
            #expect(spaClaims.nonce == request.nonce)
            // prompt=none with the session: a code too.
            let silent = await browser.authorize(.spa().with("prompt", "none"))
            #expect(silent.status == 303 && redirectQuery(silent)["code"] != nil)
            // Another browser has no session.
            var stranger = Agent(op)
            let none = await stranger.authorize(.spa().with("prompt", "none"))
            #expect(none.status == 303 && redirectQuery(none)["error"] == "login_required")
            #expect(redirectQuery(none)["state"] != nil)
            #expect(none.headers["Location"]?.hasPrefix(OP.spaRedirect + "?") == true)
        }
    }

    @Test("prompt=login and an exceeded max_age show the login page despite the session; login_hint prefills it")
    func promptLoginMaxAgeAndHint() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            _ = try await browser.tokens(.web())
            let firstSession = try #require(browser.session)
            let forced = await browser.authorize(.spa().with("prompt", "login"))
            #expect(forced.status == 200 && browser.lastHTML.contains("<h1>Sign in</h1>"))
            // Signing in again makes a new session and a fresh auth_time.
            op.clock.advance(by: 100)
            let again = await browser.signIn(OP.ann)
            #expect(again.status == 303)
            #expect(browser.session != nil && browser.session != firstSession)

            // max_age=0 asks for a fresh sign-in even in the same second (Core 1.0 §3.1.2.1).
            let zero = await browser.authorize(.spa().with("max_age", "0"))
            #expect(zero.status == 200 && browser.lastHTML.contains("<h1>Sign in</h1>"))
            op.clock.advance(by: 120)
            let young = await browser.authorize(.spa().with("max_age", "500"))
            #expect(young.status == 303 && redirectQuery(young)["code"] != nil)
            let old = await browser.authorize(.spa().with("max_age", "60"))
            #expect(old.status == 200 && browser.lastHTML.contains("<h1>Sign in</h1>"))
            let request = AuthRequest.spa().with("max_age", "60")
            _ = await browser.authorize(request)
            let reauthenticated = await browser.signIn(OP.ann)
            let code = try #require(redirectQuery(reauthenticated)["code"])
            let claims = try await op.verify(
                try #require(try await op.exchange(code, request, auth: .none(OP.spa)).idToken)
            ).claims
            #expect(claims.authTime == op.now)
            for bad in ["-1", "1.5", "abc", "", "9999999999"] {
                let refused = await browser.authorize(.spa().with("max_age", bad))
                #expect(redirectQuery(refused)["error"] == "invalid_request", "\(bad)")
            }

            var stranger = Agent(op)
            let hinted = await stranger.authorize(.web().with("login_hint", OP.bob))
            #expect(hinted.status == 200)
            #expect(stranger.lastHTML.contains(#"value="bob@example.com""#))
            let hostile = await stranger.authorize(.web().with("login_hint", #""><script>alert(1)</script>"#))
            #expect(hostile.status == 200)
            #expect(!stranger.lastHTML.contains("<script>"))
            let tooLong = await stranger.authorize(.web().with("login_hint", String(repeating: "a", count: 300)))
            #expect(redirectQuery(tooLong)["error"] == "invalid_request")
        }
    }

    @Test("prompt=none needing consent: consent_required; consent given once is remembered until prompt=consent")
    func consentRequired() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            _ = try await browser.tokens(.web())
            let silent = await browser.authorize(.portal().with("prompt", "none"))
            #expect(silent.status == 303)
            #expect(redirectQuery(silent)["error"] == "consent_required")
            #expect(silent.headers["Location"]?.hasPrefix(OP.portalRedirect + "?") == true)
            // With the session, the consent page shows without a login page.
            let asked = await browser.authorize(.portal())
            #expect(asked.status == 200 && browser.lastHTML.contains("<h1>Allow Example Portal?</h1>"))
            let allowed = await browser.decide("allow")
            #expect(allowed.status == 303 && redirectQuery(allowed)["code"] != nil)
            let remembered = await browser.authorize(.portal().with("prompt", "none"))
            #expect(remembered.status == 303 && redirectQuery(remembered)["code"] != nil)
            // A scope beyond the one allowed asks again.
            let more = await browser.authorize(.portal(scope: "openid email").with("prompt", "none"))
            #expect(redirectQuery(more)["error"] == "consent_required")
            let forced = await browser.authorize(.portal().with("prompt", "consent"))
            #expect(forced.status == 200 && browser.lastHTML.contains("Allow Example Portal?"))
            let denied = await browser.decide("deny")
            #expect(redirectQuery(denied)["error"] == "access_denied")
            // prompt=consent is honoured for a client that does not ask by itself too.
            let webAsked = await browser.authorize(.web().with("prompt", "consent"))
            #expect(webAsked.status == 200 && browser.lastHTML.contains("<h1>Allow Web Shop?</h1>"))
            let webAllowed = await browser.decide("allow")
            #expect(webAllowed.status == 303 && redirectQuery(webAllowed)["code"] != nil)
            let webSilent = await browser.authorize(.web().with("prompt", "none"))
            #expect(webSilent.status == 303 && redirectQuery(webSilent)["code"] != nil)
            let mixed = await browser.authorize(.portal().with("prompt", "none login"))
            #expect(redirectQuery(mixed)["error"] == "invalid_request")
        }
    }

    @Test("id_token_hint: the session's user signs in silently, another user's hint does not, a forged one is refused")
    func idTokenHint() async throws {
        try await withOpenID { op in
            var ann = Agent(op)
            let annToken = try #require(try await ann.tokens(.web()).idToken)
            var bob = Agent(op)
            let bobToken = try #require(try await bob.tokens(.web(), as: OP.bob).idToken)

            let own = await ann.authorize(.web().with("id_token_hint", annToken))
            #expect(own.status == 303 && redirectQuery(own)["code"] != nil)
            // Bob's hint in Ann's browser: not silently Ann.
            let other = await ann.authorize(.web().with("id_token_hint", bobToken))
            #expect(other.status == 200 && ann.lastHTML.contains("<h1>Sign in</h1>"))
            let otherSilent = await ann.authorize(.web().with("id_token_hint", bobToken).with("prompt", "none"))
            #expect(redirectQuery(otherSilent)["error"] == "login_required")
            // A token with its payload changed (sub → bob): the signature fails; invalid_request.
            let parts = annToken.split(separator: ".").map(String.init)
            let payload = try #require(Data(base64URLEncoded: parts[1]))
            let forgedPayload = String(decoding: payload, as: UTF8.self).replacingOccurrences(of: OP.ann, with: OP.bob)
            let forged = [parts[0], Data(forgedPayload.utf8).base64URLEncodedString, parts[2]].joined(separator: ".")
            for hint in [forged, "garbage", annToken + "x", parts[0] + "." + parts[1] + "."] {
                let refused = await ann.authorize(.web().with("id_token_hint", hint))
                #expect(refused.status == 303 && redirectQuery(refused)["error"] == "invalid_request")
                #expect(redirectQuery(refused)["code"] == nil)
            }
            // A hint issued to another client does not name this client's user.
            let spaToken = try #require(try await ann.tokens(.spa()).idToken)
            let crossClient = await ann.authorize(.web().with("id_token_hint", spaToken))
            #expect(redirectQuery(crossClient)["error"] == "invalid_request")
            // An expired hint still names the user (Core 1.0 §3.1.2.1).
            op.clock.advance(by: 400)
            let expired = await ann.authorize(.web().with("id_token_hint", annToken))
            #expect(expired.status == 303 && redirectQuery(expired)["code"] != nil)
        }
    }

    // MARK: - Pairwise subjects

    @Test("pairwise: a sub of its own per sector, stable across sign-ins, the same in userinfo")
    func pairwiseSubjects() async throws {
        try await withOpenID { op in
            var first = Agent(op)
            let one = try await first.tokens(AuthRequest(clientID: OP.pairOne, redirectURI: OP.pairOneRedirect))
            let oneClaims = try await op.verify(try #require(one.idToken)).claims
            #expect(oneClaims.sub != OP.ann && !oneClaims.sub.contains("ann"))
            #expect(oneClaims.sub.utf8.count >= 32)
            #expect(await op.userinfo(one.access)["sub"] == oneClaims.sub)

            var second = Agent(op)
            let again = try await second.tokens(AuthRequest(clientID: OP.pairOne, redirectURI: OP.pairOneRedirect))
            let againClaims = try await op.verify(try #require(again.idToken)).claims
            #expect(againClaims.sub == oneClaims.sub)
            #expect(againClaims.sid != oneClaims.sid)

            let two = try await second.tokens(AuthRequest(clientID: OP.pairTwo, redirectURI: OP.pairTwoRedirect))
            let twoClaims = try await op.verify(try #require(two.idToken)).claims
            #expect(twoClaims.sub != oneClaims.sub && twoClaims.sub != OP.ann)
            #expect(await op.userinfo(two.access)["sub"] == twoClaims.sub)
            // A public client of the same session sees the username.
            let spa = try await second.tokens(.spa())
            #expect(try await op.verify(try #require(spa.idToken)).claims.sub == OP.ann)

            var bob = Agent(op)
            let bobOne = try await bob.tokens(
                AuthRequest(clientID: OP.pairOne, redirectURI: OP.pairOneRedirect),
                as: OP.bob
            )
            #expect(try await op.verify(try #require(bobOne.idToken)).claims.sub != oneClaims.sub)
            // Its own hint signs the same user in silently.
            let hinted = await second.authorize(
                AuthRequest(clientID: OP.pairOne, redirectURI: OP.pairOneRedirect).with(
                    "id_token_hint",
                    try #require(again.idToken)
                )
            )
            #expect(hinted.status == 303 && redirectQuery(hinted)["code"] != nil)
        }
    }

    // MARK: - Signing keys

    @Test("rotation: an earlier token still verifies, new tokens carry the key published before it")
    func rotation() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let web = try await browser.tokens(.web())
            let portal = try await browser.tokens(.portal())
            let before = try await op.jwks()
            let oldRSA = try await op.verify(try #require(web.idToken)).header.kid
            let oldEC = try await op.verify(try #require(portal.idToken)).header.kid
            let nextRSA = try #require(before.keys.first { $0.kty == "RSA" && $0.kid != oldRSA }?.kid)
            let nextEC = try #require(before.keys.first { $0.kty == "EC" && $0.kid != oldEC }?.kid)

            try await op.login.rotateSigningKeys()
            let after = try await op.jwks()
            #expect(after.keys.count == 6)
            #expect(Set(before.keys.compactMap(\.kid)).isSubset(of: Set(after.keys.compactMap(\.kid))))
            _ = try await op.verify(try #require(web.idToken))
            _ = try await op.verify(try #require(portal.idToken))
            let rotatedWeb = try Tokens(await op.refresh(try #require(web.refresh), auth: defaultAuth(OP.web)))
            #expect(try await op.verify(try #require(rotatedWeb.idToken)).header.kid == nextRSA)
            let rotatedPortal = try Tokens(await op.refresh(try #require(portal.refresh), auth: defaultAuth(OP.portal)))
            let ec = try await op.verify(try #require(rotatedPortal.idToken))
            #expect(ec.header.kid == nextEC && ec.header.alg == "ES256")
            // The hint signed with the old key still ends this session at logout (it is published).
            let logout = await browser.send(
                "GET",
                LoginServer.logoutPath + "?" + FormFields.encode([("id_token_hint", try #require(web.idToken))])
            )
            #expect(logout.status == 200 && browser.lastHTML.contains("Signed out"))
        }
    }

    @Test("after its retention a retired key leaves the key set, and a hint it signed is refused at logout")
    func retention() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let first = try await browser.tokens(.web())
            let oldKid = try await op.verify(try #require(first.idToken)).header.kid
            try await op.login.rotateSigningKeys()
            let second = try await browser.tokens(.web())
            op.clock.advance(by: 300 + 180)
            try await op.login.rotateSigningKeys()
            let keys = try await op.jwks()
            #expect(!keys.keys.contains { $0.kid == oldKid })
            #expect(keys.keys.count == 6)
            await #expect(throws: JSONWebSignature.Refusal.self) { try await op.verify(try #require(first.idToken)) }
            _ = try await op.verify(try #require(second.idToken))
            let before = try await op.fingerprint()
            let refused = await browser.send(
                "GET",
                LoginServer.logoutPath + "?"
                    + FormFields.encode([
                        ("id_token_hint", try #require(first.idToken)), ("post_logout_redirect_uri", OP.webAfter),
                    ])
            )
            #expect(refused.status == 400 && refused.headers["Location"] == nil)
            #expect(try await op.fingerprint()["live sessions"] == before["live sessions"])
            let silent = await browser.authorize(.web().with("prompt", "none"))
            #expect(redirectQuery(silent)["code"] != nil)
            // At authorize too: the hint is not one this provider can vouch for any more.
            let hinted = await browser.authorize(.web().with("id_token_hint", try #require(first.idToken)))
            #expect(redirectQuery(hinted)["error"] == "invalid_request")
        }
    }

    @Test("keys rotate by themselves once rotationPeriod has passed")
    func automaticRotation() async throws {
        try await withOpenID(rotationPeriod: 3600) { op in
            var browser = Agent(op)
            let first = try await browser.tokens(.web())
            let oldKid = try await op.verify(try #require(first.idToken)).header.kid
            let next = try #require(try await op.jwks().keys.first { $0.kty == "RSA" && $0.kid != oldKid }?.kid)
            op.clock.advance(by: 1800)
            let early = try Tokens(await op.refresh(try #require(first.refresh), auth: defaultAuth(OP.web)))
            #expect(try await op.verify(try #require(early.idToken)).header.kid == oldKid)
            op.clock.advance(by: 1801)
            let late = try Tokens(await op.refresh(try #require(early.refresh), auth: defaultAuth(OP.web)))
            #expect(try await op.verify(try #require(late.idToken)).header.kid == next)
            let keys = try await op.jwks()
            #expect(keys.keys.contains { $0.kid == oldKid })
            #expect(keys.keys.filter { $0.kty == "RSA" }.count == 3)
            #expect(keys == (try await op.login.publishedKeys()))
        }
    }
}
