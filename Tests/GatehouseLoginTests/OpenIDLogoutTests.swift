import Foundation
import GatehouseLogin
import GatehouseOpenID
import GatehouseProtocol
import GatehouseTesting
import Testing

/// A logout token as its receiver checks it (Back-Channel Logout 1.0 §2.6).
private struct LogoutClaims: Decodable {
    var iss: String
    var sub: String?
    var aud: Audience
    var iat: Int
    var exp: Int
    var jti: String
    var sid: String?
    var events: [String: [String: String]]
    var nonce: String?
}

@Suite("OpenID provider: RP-initiated and back-channel logout", .serialized)
struct OpenIDLogoutTests {
    /// `/login/logout?…` with `fields`.
    private static func logoutPath(_ fields: [(String, String)]) -> String {
        LoginServer.logoutPath + (fields.isEmpty ? "" : "?" + FormFields.encode(fields))
    }

    @Test(
        "a hint of the session with a registered return address: redirect with state, cookie cleared, tokens revoked, clients told"
    )
    func logoutWithHint() async throws {
        let port = try #require(LoopbackPort.free())
        try await LogoutReceiver.with(port: port) { receiver in
            try await withOpenID(backchannelPort: port) { op in
                var browser = Agent(op)
                let web = try await browser.tokens(.web(scope: "openid profile"))
                let portal = try await browser.tokens(.portal())
                let spa = try await browser.tokens(.spa())
                let pairwise = try await browser.tokens(
                    AuthRequest(clientID: OP.pairOne, redirectURI: OP.pairOneRedirect)
                )
                let pairwiseIDToken = try #require(pairwise.idToken)
                let pairwiseClaims = try await op.verify(pairwiseIDToken).claims
                let pairwiseSubject = pairwiseClaims.sub
                // A pairwise client knows the session by an id of its own, unlinkable to the others'.
                let pairwiseSID = try #require(pairwiseClaims.sid)
                let hint = try await op.verify(try #require(web.idToken))
                let sid = try #require(hint.claims.sid)
                #expect(pairwiseSID != sid)
                let cookie = try #require(browser.session)
                // Another browser's session of the same user is not touched.
                var other = Agent(op)
                let otherTokens = try await other.tokens(.web())

                let response = await browser.send(
                    "GET",
                    Self.logoutPath([
                        ("id_token_hint", try #require(web.idToken)), ("post_logout_redirect_uri", OP.webAfter),
                        ("state", "after-logout 1"),
                    ])
                )
                #expect(response.status == 303)
                #expect(response.headers["Location"] == OP.webAfter + "?state=after-logout%201")
                let setCookie = try #require(response.headers["Set-Cookie"])
                #expect(setCookie.hasPrefix("gh_sso=;") && setCookie.contains("Max-Age=0"))
                #expect(setCookie.contains("Path=/login/") && setCookie.contains("Secure"))
                #expect(browser.session == nil)

                // The session's tokens, of every client, are revoked.
                for (tokens, client) in [(web, OP.web), (portal, OP.portal), (spa, OP.spa), (pairwise, OP.pairOne)] {
                    #expect(await op.userinfo(tokens.access).status == 401)
                    let refreshed = await op.refresh(try #require(tokens.refresh), auth: defaultAuth(client))
                    #expect(refreshed.status == 400 && refreshed.error == "invalid_grant")
                }
                #expect(await op.userinfo(otherTokens.access).status == 200)
                // The old cookie names no session any more.
                var replayed = Agent(op)
                replayed.cookies["gh_sso"] = cookie
                let silent = await replayed.authorize(.spa().with("prompt", "none"))
                #expect(redirectQuery(silent)["error"] == "login_required")

                // Each client of the session with a back-channel URI got one logout token. Long
                // enough for a retry: a loaded machine has failed a first attempt, tried again 10 s on.
                let deliveries = await receiver.wait(for: 3, seconds: 30)
                let attempts = op.logs.lines.filter { $0.contains("Back-channel logout") }
                #expect(deliveries.count == 3, "\(attempts)")
                #expect(
                    Set(deliveries.map(\.path)) == [
                        "/backchannel/web", "/backchannel/portal", "/backchannel/pair-one",
                    ],
                    "\(attempts)"
                )
                let keys = try await op.jwks()
                for delivery in deliveries {
                    #expect(delivery.contentType == "application/x-www-form-urlencoded")
                    let token = try #require(delivery.form["logout_token"])
                    let jws = try JSONWebSignature(compact: token)
                    try jws.verify(with: keys)
                    #expect(jws.header.typ == "logout+jwt")
                    #expect(jws.header.alg == "RS256")
                    let claims = try jws.claims(as: LogoutClaims.self)
                    let client = String(delivery.path.dropFirst("/backchannel/".count))
                    #expect(claims.iss == OP.issuer)
                    #expect(claims.aud.values == [client])
                    #expect(claims.sid == (client == OP.pairOne ? pairwiseSID : sid))
                    // The subject as that client knows it: pairwise for the pairwise client.
                    #expect(claims.sub == (client == OP.pairOne ? pairwiseSubject : OP.ann))
                    #expect(claims.nonce == nil)
                    #expect(claims.events == ["http://schemas.openid.net/event/backchannel-logout": [:]])
                    #expect(claims.exp > claims.iat && claims.exp - claims.iat <= 120)
                    #expect(!claims.jti.isEmpty)
                    let raw = try #require(try JSONSerialization.jsonObject(with: jws.payload) as? [String: Any])
                    #expect(raw["nonce"] == nil)
                }
                #expect(Set(deliveries.compactMap { $0.form["logout_token"] }).count == 3)
                // Delivered, then taken out of the outbox (just after the receiver answered).
                #expect(try await waitUntilDelivered(op))

                // The same hint again: that session has ended; nothing more is sent.
                let again = await browser.send(
                    "GET",
                    Self.logoutPath([
                        ("id_token_hint", try #require(web.idToken)), ("post_logout_redirect_uri", OP.webAfter),
                    ])
                )
                // The registered address as it is (a bare "?" after it, or none, adds nothing).
                #expect(
                    again.status == 303 && [OP.webAfter, OP.webAfter + "?"].contains(again.headers["Location"] ?? "")
                )
                await op.login.deliverPendingLogouts()
                try await Task.sleep(for: .milliseconds(200))
                #expect(receiver.received.count == 3)
            }
        }
    }

    @Test(
        "a receiver that is down: the logout waits in the outbox and is delivered once it is up and its time has come"
    )
    func receiverDown() async throws {
        let port = try #require(LoopbackPort.free())
        try await withOpenID(backchannelPort: port) { op in
            var browser = Agent(op)
            let web = try await browser.tokens(.web())
            let webIDToken = try #require(web.idToken)
            let sid = try #require(try await op.verify(webIDToken).claims.sid)
            let response = await browser.send(
                "GET",
                Self.logoutPath([("id_token_hint", try #require(web.idToken)), ("client_id", OP.web)])
            )
            #expect(response.status == 200 && browser.lastHTML.contains("Signed out"))
            #expect(try await op.login.pendingLogouts() == 1)
            // The attempt made at once fails: nothing listens.
            let deadline = ContinuousClock.now + .seconds(10)
            while !op.logs.lines.contains(where: { $0.contains("Back-channel logout failed") }),
                ContinuousClock.now < deadline
            {
                await op.login.deliverPendingLogouts()
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(op.logs.lines.contains { $0.contains("Back-channel logout failed") })
            #expect(try await op.login.pendingLogouts() == 1)

            try await LogoutReceiver.with(port: port) { receiver in
                // Up now, but the retry is not due yet.
                await op.login.deliverPendingLogouts()
                #expect(receiver.received.isEmpty)
                #expect(try await op.login.pendingLogouts() == 1)
                op.clock.advance(by: 31)
                await op.login.deliverPendingLogouts()
                let deliveries = await receiver.wait(for: 1)
                #expect(deliveries.count == 1)
                let token = try #require(deliveries.first?.form["logout_token"])
                let jws = try JSONWebSignature(compact: token)
                try jws.verify(with: try await op.jwks())
                let claims = try jws.claims(as: LogoutClaims.self)
                #expect(claims.sid == sid && claims.aud.values == [OP.web] && claims.sub == OP.ann)
                // Signed when sent, not when the session ended: not expired on arrival.
                #expect(claims.iat == op.now)
                #expect(try await waitUntilDelivered(op))
                await op.login.deliverPendingLogouts()
                #expect(receiver.received.count == 1)
            }
        }
    }

    @Test("without a hint: a confirmation page; only its form, posted from our site with its csrf, signs out")
    func confirmation() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let web = try await browser.tokens(.web())
            let before = try await op.fingerprint()
            let page = await browser.send(
                "GET",
                Self.logoutPath([("client_id", OP.web), ("post_logout_redirect_uri", OP.webAfter), ("state", "s1")])
            )
            #expect(page.status == 200 && browser.lastHTML.contains("<h1>Sign out?</h1>"))
            #expect(browser.lastHTML.contains("as Web Shop asks"))
            #expect(page.headers["Location"] == nil)
            #expect(page.headers["Content-Security-Policy"]?.contains("form-action 'self' https://web.example") == true)
            let csrf = try #require(browser.fields["csrf"])
            #expect(browser.fields["post_logout_redirect_uri"] == OP.webAfter && browser.fields["state"] == "s1")
            #expect(try await op.fingerprint() == before)
            #expect(await op.userinfo(web.access).status == 200)

            let form: [(String, String)] = [
                ("client_id", OP.web), ("post_logout_redirect_uri", OP.webAfter), ("state", "s1"), ("confirm", "yes"),
            ]
            // A wrong csrf, none, a cross-site POST, a GET carrying the right one: nothing ends.
            for (fields, headers, method) in [
                (form + [("csrf", "forged")], [String: String](), "POST"),
                (form, [:], "POST"),
                (form + [("csrf", csrf)], ["Sec-Fetch-Site": "cross-site"], "POST"),
                (form + [("csrf", csrf)], ["Sec-Fetch-Site": "Cross-Site"], "POST"),
                (form + [("csrf", String(csrf.dropLast()))], [:], "POST"),
                (form.filter { $0.0 != "confirm" } + [("csrf", csrf)], [:], "POST"),
            ] {
                let refused = await browser.send(method, LoginServer.logoutPath, form: fields, headers: headers)
                #expect(refused.status == 200 && browser.lastHTML.contains("<h1>Sign out?</h1>"))
                #expect(refused.headers["Location"] == nil)
            }
            let viaGet = await browser.send("GET", Self.logoutPath(form + [("csrf", csrf)]))
            #expect(viaGet.status == 200 && browser.lastHTML.contains("<h1>Sign out?</h1>"))
            // Another browser's confirmation does not fit this cookie.
            var other = Agent(op)
            _ = try await other.tokens(.web())
            _ = await other.send("GET", Self.logoutPath([]))
            let othersCSRF = try #require(other.fields["csrf"])
            #expect(othersCSRF != csrf)
            _ = await browser.send("POST", LoginServer.logoutPath, form: form + [("csrf", othersCSRF)])
            #expect(browser.lastHTML.contains("<h1>Sign out?</h1>"))
            #expect(await op.userinfo(web.access).status == 200)
            #expect(try await op.fingerprint()["live sessions"] == 2)

            let confirmed = await browser.send(
                "POST",
                LoginServer.logoutPath,
                form: form + [("csrf", csrf)],
                headers: ["Sec-Fetch-Site": "same-origin"]
            )
            #expect(confirmed.status == 303)
            #expect(confirmed.headers["Location"] == OP.webAfter + "?state=s1")
            #expect(confirmed.headers["Set-Cookie"]?.contains("Max-Age=0") == true)
            #expect(await op.userinfo(web.access).status == 401)
            #expect(try await op.fingerprint()["live sessions"] == 1)

            // A hint issued to one client with another client's id or return address: refused.
            var third = Agent(op)
            let portalHint = try #require(try await third.tokens(.portal()).idToken)
            for fields in [
                [("id_token_hint", portalHint), ("client_id", OP.web)],
                [("id_token_hint", portalHint), ("post_logout_redirect_uri", OP.webAfter)],
            ] {
                let refused = await third.send("GET", Self.logoutPath(fields))
                #expect(refused.status == 400 && refused.headers["Location"] == nil)
            }
            let unknownClient = await third.send("GET", Self.logoutPath([("client_id", "stranger")]))
            #expect(unknownClient.status == 400)
            let longState = await third.send("GET", Self.logoutPath([("state", String(repeating: "s", count: 513))]))
            #expect(longState.status == 400)
            #expect(try await op.fingerprint()["live sessions"] == 2)

            // Signed out already: the link only sends the browser back.
            let signedOut = await browser.send(
                "GET",
                Self.logoutPath([("client_id", OP.web), ("post_logout_redirect_uri", OP.webAfter)])
            )
            #expect(
                signedOut.status == 303
                    && [OP.webAfter, OP.webAfter + "?"].contains(signedOut.headers["Location"] ?? "")
            )
        }
    }

    @Test("a hint of an earlier session of the same browser does not sign the current one out without asking")
    func hintOfAnotherSession() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let earlier = try #require(try await browser.tokens(.web()).idToken)
            // Signing in again (prompt=login) replaces the session.
            let request = AuthRequest.web().with("prompt", "login")
            _ = await browser.authorize(request)
            let again = await browser.signIn(OP.ann)
            #expect(again.status == 303)
            let current = try await op.exchange(
                try #require(redirectQuery(again)["code"]),
                request,
                auth: defaultAuth(OP.web)
            )
            #expect(await op.userinfo(current.access).status == 200)
            let page = await browser.send("GET", Self.logoutPath([("id_token_hint", earlier)]))
            #expect(page.status == 200 && browser.lastHTML.contains("<h1>Sign out?</h1>"))
            #expect(try await op.fingerprint()["live sessions"] == 1)
        }
    }

    @Test("return addresses that are not exactly registered: a page of ours (400), never a redirect, nothing ended")
    func lookAlikeReturnAddresses() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let web = try await browser.tokens(.web())
            let portal = try await browser.tokens(.portal())
            let hints = [OP.web: try #require(web.idToken), OP.portal: try #require(portal.idToken)]
            let before = try await op.fingerprint()
            for (client, registered) in [(OP.web, OP.webAfter), (OP.portal, OP.portalAfter)] {
                for candidate in lookAlikes(of: registered) + [
                    client == OP.web ? OP.portalAfter : OP.webAfter,
                    client == OP.web ? OP.webRedirect : OP.portalRedirect,
                ] {
                    for fields in [
                        [("client_id", client), ("post_logout_redirect_uri", candidate)],
                        [
                            ("id_token_hint", hints[client] ?? ""), ("post_logout_redirect_uri", candidate),
                            ("state", "x"),
                        ],
                        [("post_logout_redirect_uri", candidate)],
                    ] {
                        let response = await browser.send("GET", Self.logoutPath(fields))
                        #expect(response.status == 400, "\(candidate)")
                        #expect(response.headers["Location"] == nil, "\(candidate)")
                        // As a form POST too.
                        let posted = await browser.send(
                            "POST",
                            LoginServer.logoutPath,
                            form: fields + [("confirm", "yes")]
                        )
                        #expect(posted.status == 400 && posted.headers["Location"] == nil, "\(candidate)")
                    }
                }
            }
            #expect(try await op.fingerprint() == before)
            #expect(await op.userinfo(web.access).status == 200)

            // The same at the authorization endpoint: the redirect_uri is never followed.
            let stranger = Agent(op)
            for (client, registered) in [
                (OP.web, OP.webRedirect), (OP.portal, OP.portalRedirect), (OP.spa, OP.spaRedirect),
            ] {
                for candidate in lookAlikes(of: registered) {
                    for agent in [browser, stranger] {
                        var agent = agent
                        let response = await agent.authorize(AuthRequest(clientID: client, redirectURI: candidate))
                        #expect(response.status == 400, "\(client) \(candidate)")
                        #expect(response.headers["Location"] == nil, "\(client) \(candidate)")
                        #expect(agent.lastHTML.contains("Cannot continue"))
                    }
                }
            }
            #expect(try await op.fingerprint() == before)
        }
    }
}

/// Whether the outbox empties within a few seconds (15: a loaded machine has taken more than 5).
func waitUntilDelivered(_ op: OpenIDFixture) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(15)
    while try await op.login.pendingLogouts() > 0, ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await op.login.pendingLogouts() == 0
}

/// Addresses that look like `registered` and are not it.
func lookAlikes(of registered: String) -> [String] {
    let url = URLComponents(string: registered)
    let host: String = url?.host ?? "example"
    let path: String = url?.path ?? "/"
    func replacing(_ target: String, _ replacement: String) -> String {
        registered.replacingOccurrences(of: target, with: replacement)
    }
    let firstLetter = String(path.dropFirst().prefix(1))
    let escapedLetter = "%" + String(format: "%02X", Int(path.utf8.dropFirst().first ?? 0x61))
    var candidates: [String] = [
        replacing(host, host.uppercased()), replacing(path, path.uppercased()), "HTTPS" + registered.dropFirst(5),
        registered + "/", registered + "?", registered + "?x=1", registered + "#", registered + "#x",
        registered + "&x=1",
        registered + "%2F", registered + "/..", registered + "/.", replacing(path, "/x/.." + path),
    ]
    candidates += [
        replacing(host, host + ".evil.com"), replacing(host, host + "@evil.com"),
        replacing("https://", "https://evil.com@"),
        replacing(host, host + ":443"), replacing(host, host + "."), replacing("https://", "http://"),
        replacing("https://", "https:/"), replacing("https://", "https:///"), replacing("https://", "//"),
        replacing("https:", ""), replacing("/", "\\"),
    ]
    candidates += [
        replacing(path, path.replacingOccurrences(of: "/", with: "%2F")), replacing(path, "/%2e%2e" + path),
        replacing(firstLetter, escapedLetter), replacing(host, host.replacingOccurrences(of: ".", with: "%2E")),
        replacing(host, "[::1]"), replacing(host, "127.0.0.1"),
        replacing("e", "\u{0435}"), replacing("/", "\u{FF0F}"),
    ]
    candidates += [
        " " + registered, registered + " ", registered + "\u{0}", registered + "%00", registered + "\r\nX: y",
        registered + "\u{200B}", "//evil.com", "//evil.com" + path, "https://evil.com", "https://evil.com" + path,
        "javascript:alert(1)", "data:text/html,x", "", "/", path, "https:" + host,
    ]
    return candidates.filter { $0 != registered }
}
