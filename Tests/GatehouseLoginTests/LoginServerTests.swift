import Foundation
import GatehouseKernel
import GatehouseLogin
import GatehouseOpenID
import GatehouseProtocol
import GatehouseTesting
import Testing

/// A login with two clients (one asks for consent) and the user ann@example.com.
private func withLogin(publicURL: URL? = nil, _ body: (LoginServer) async throws -> Void) async throws {
    let configuration = try ConfigurationDecoder().decode(
        LoginConfiguration.self,
        from: .object([
            "clients": .list([
                .object([
                    "id": .string("gatehouse"), "name": .string("Example App"),
                    "loopbackRedirectPaths": .list([.string("/callback")]),
                ]),
                .object([
                    "id": .string("portal"), "name": .string("Example Portal"),
                    "redirectURIs": .list([.string("https://portal.example/cb")]), "consent": .bool(true),
                ]),
            ]),
            "maxFailedLogins": .integer(3), "passwordCost": .integer(14),
        ])
    )
    try await withLoginStorage { storage in
        let login = try LoginServer(
            configuration: configuration,
            storage: storage,
            environment: PluginEnvironment(),
            publicURL: publicURL
        )
        try await login.addUser("ann@example.com", password: "correct horse")
        try await body(login)
    }
}

/// A browser's view of one sign-in: the authorization request, the page's form fields, its cookie.
private struct Browser {
    let login: LoginServer
    var verifier = PKCE.makeVerifier()
    var clientID = "gatehouse"
    var redirectURI = "http://127.0.0.1:53180/callback"
    var state = "state-1"
    var fields: [String: String] = [:]
    /// The cookies the login set, by name, as a browser keeps them.
    var cookies: [String: String] = [:]
    var cookie: String { cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }

    mutating func keep(_ response: WireResponse) {
        guard let setCookie = response.headers["Set-Cookie"] else { return }
        let pair = setCookie.prefix { $0 != ";" }.split(separator: "=", maxSplits: 1)
        guard let name = pair.first else { return }
        let value = pair.count == 2 ? String(pair[1]) : ""
        if setCookie.contains("Max-Age=0") { cookies[String(name)] = nil } else { cookies[String(name)] = value }
    }

    func query(method: String = "S256", challenge: String? = nil, state: String? = nil) -> String {
        var parts = [
            "response_type=code", "client_id=\(clientID)", "redirect_uri=\(redirectURI)",
            "code_challenge=\(challenge ?? PKCE.challenge(for: verifier))", "code_challenge_method=\(method)",
        ]
        let state = state ?? self.state
        if !state.isEmpty { parts.append("state=\(state)") }
        return parts.joined(separator: "&")
    }

    mutating func open(_ query: String? = nil) async -> WireResponse {
        let response = await login.handle(
            WireRequest(
                method: "GET",
                path: LoginServer.authorizePath + "?" + (query ?? self.query()),
                headers: cookies.isEmpty ? [:] : ["Cookie": cookie]
            )
        )
        let html = String(decoding: response.body, as: UTF8.self)
        for name in ["authorization", "csrf"] {
            if let range = html.range(of: #"name="\#(name)" value="([^"]+)""#, options: .regularExpression) {
                fields[name] = String(html[range].split(separator: "\"")[3])
            }
        }
        keep(response)
        return response
    }

    mutating func post(
        _ extra: [String: String],
        to path: String = LoginServer.authorizePath,
        cookie: String? = nil
    ) async -> WireResponse {
        let body = fields.merging(extra) { $1 }.map {
            "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
        }
        .joined(separator: "&")
        let response = await login.handle(
            WireRequest(
                method: "POST",
                path: path,
                headers: ["Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie ?? self.cookie],
                body: Data(body.utf8)
            )
        )
        keep(response)
        return response
    }
}

private func location(_ response: WireResponse) -> [String: String] {
    guard let location = response.headers["Location"], let query = URLComponents(string: location)?.queryItems else {
        return [:]
    }
    return Dictionary(query.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
}

@Suite("Hosted login: the authorization endpoint and its pages", .serialized)
struct LoginServerTests {
    @Test("a valid request shows a login page with a CSRF token and strict headers; the right password returns a code")
    func signIn() async throws {
        try await withLogin { login in
            var browser = Browser(login: login)
            let page = await browser.open()
            #expect(page.status == 200)
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(html.contains("<h1>Sign in</h1>") && html.contains("to continue to Example App"))
            #expect(html.contains(#"autocomplete="current-password""#))
            // No message, and no optional printed into the page (random tokens may hold "nil").
            #expect(!html.contains("role=\"alert\""))
            #expect(!html.contains("Optional(") && !html.contains(">nil<") && !html.contains("\"nil\""))
            #expect(page.headers["Content-Security-Policy"]?.contains("frame-ancestors 'none'") == true)
            #expect(
                page.headers["Content-Security-Policy"]?.contains("form-action 'self' http://127.0.0.1:53180") == true
            )
            #expect(page.headers["X-Frame-Options"] == "DENY")
            #expect(page.headers["Set-Cookie"]?.contains("HttpOnly; SameSite=Strict") == true)
            // Served over plain http (the loopback example), the cookie cannot be Secure.
            #expect(page.headers["Set-Cookie"]?.contains("Secure") == false)
            #expect(browser.fields["csrf"] != nil && browser.fields["authorization"] != nil)

            let signedIn = await browser.post(["username": "Ann@Example.com ", "password": "correct horse"])
            #expect(signedIn.status == 303)
            let back = location(signedIn)
            #expect(back["state"] == "state-1")
            let code = try #require(back["code"])
            let subject = try await login.redeem(
                code: code,
                clientID: "gatehouse",
                redirectURI: browser.redirectURI,
                verifier: browser.verifier
            )
            #expect(subject == "ann@example.com")
            // The page's form is spent: posting it again finds nothing.
            #expect(await browser.post(["username": "ann@example.com", "password": "correct horse"]).status == 400)
        }
    }

    @Test("served at an https public URL, the CSRF cookie is Secure")
    func secureCookie() async throws {
        try await withLogin(publicURL: URL(string: "https://auth.example.com")) { login in
            var browser = Browser(login: login)
            let page = await browser.open()
            #expect(page.status == 200)
            #expect(page.headers["Set-Cookie"]?.hasSuffix("; Secure") == true)
        }
    }

    @Test("unknown client or unregistered redirect: a page, never a redirect; other problems go back to the client")
    func refusals() async throws {
        try await withLogin { login in
            var browser = Browser(login: login)
            browser.clientID = "stranger"
            #expect(await browser.open().status == 400)
            browser.clientID = "gatehouse"
            for redirect in [
                "http://127.0.0.1:53180/other", "http://evil.example/callback", "http://127.0.0.1:0/callback",
            ] {
                browser.redirectURI = redirect
                let refused = await browser.open()
                #expect(refused.status == 400, "\(redirect)")
                #expect(refused.headers["Location"] == nil)
            }
            browser.redirectURI = "http://127.0.0.1:61000/callback"  // any loopback port (RFC 8252)
            for (query, error) in [
                (browser.query(method: "plain", challenge: browser.verifier), "invalid_request"),
                (browser.query(challenge: ""), "invalid_request"),
                (browser.query(state: ""), "invalid_request"),
                (
                    browser.query().replacingOccurrences(of: "response_type=code", with: "response_type=token"),
                    "unsupported_response_type"
                ),
            ] {
                let back = await browser.open(query)
                #expect(back.status == 303)
                #expect(location(back)["error"] == error, "\(query)")
            }
        }
    }

    @Test("a missing or wrong CSRF token, or a missing cookie, is refused and counts no attempt")
    func csrf() async throws {
        try await withLogin { login in
            var browser = Browser(login: login)
            _ = await browser.open()
            let right = ["username": "ann@example.com", "password": "correct horse"]
            #expect(await browser.post(right, cookie: "").status == 400)
            var forged = browser
            forged.fields["csrf"] = "forged"
            #expect(await forged.post(right).status == 400)
            forged.fields["csrf"] = nil
            #expect(await forged.post(right).status == 400)
            #expect(await browser.post(right).status == 303)
        }
    }

    @Test("wrong passwords: the same message as an unknown user, then a locked account")
    func lockout() async throws {
        try await withLogin { login in
            var browser = Browser(login: login)
            _ = await browser.open()
            let unknown = await browser.post(["username": "nobody@example.com", "password": "whatever1"])
            #expect(unknown.status == 401)
            for _ in 0..<3 {
                let wrong = await browser.post(["username": "ann@example.com", "password": "wrong password"])
                #expect(wrong.status == 401)
                #expect(String(decoding: wrong.body, as: UTF8.self).contains("Wrong e-mail address or password."))
            }
            let locked = await browser.post(["username": "ann@example.com", "password": "correct horse"])
            #expect(locked.status == 403)
            let lockedPage = String(decoding: locked.body, as: UTF8.self)
            #expect(lockedPage.contains("locked for 15 more minutes"))
            // An unknown username locks the same way, so a lock does not tell that a user exists.
            for _ in 0..<2 {
                #expect(await browser.post(["username": "nobody@example.com", "password": "whatever2"]).status == 401)
            }
            let unknownLocked = await browser.post(["username": "Nobody@Example.com ", "password": "whatever3"])
            #expect(unknownLocked.status == 403)
            #expect(
                String(decoding: unknownLocked.body, as: UTF8.self).replacingOccurrences(
                    of: "Nobody@Example.com ",
                    with: ""
                )
                    == lockedPage.replacingOccurrences(of: "ann@example.com", with: "")
            )
        }
    }

    @Test("scopes the client may not ask for, an over-long state, and an IPv6 loopback redirect")
    func scopesAndAddresses() async throws {
        try await withLogin { login in
            var browser = Browser(login: login)
            let refused = await browser.open(browser.query() + "&scope=openid%20admin")
            #expect(location(refused)["error"] == "invalid_scope")
            #expect(await browser.open(browser.query() + "&scope=openid").status == 200)
            let long = await browser.open(browser.query(state: String(repeating: "s", count: 600)))
            #expect(location(long)["error"] == "invalid_request" && location(long)["state"] == nil)
            browser.redirectURI = "http://[::1]:5556/callback"
            let page = await browser.open()
            #expect(page.status == 200)
            #expect(page.headers["Content-Security-Policy"]?.contains("form-action 'self' http://[::1]:5556;") == true)
            try await login.addUser("jose\u{301}@example.com", password: "correct horse")
            await #expect(throws: (any Error).self) {
                try await login.addUser("jos\u{e9}@example.com", password: "x-correct horse")
            }
        }
    }

    @Test("consent: deny returns access_denied, allow returns a code and is remembered until prompt=consent")
    func consent() async throws {
        try await withLogin { login in
            for (decision, expected) in [("deny", "error"), ("allow", "code")] {
                var browser = Browser(login: login, clientID: "portal", redirectURI: "https://portal.example/cb")
                _ = await browser.open()
                let asked = await browser.post(["username": "ann@example.com", "password": "correct horse"])
                #expect(asked.status == 200)
                #expect(String(decoding: asked.body, as: UTF8.self).contains("Allow Example Portal?"))
                let answered = await browser.post(["decision": decision], to: LoginServer.consentPath)
                #expect(answered.status == 303)
                #expect(location(answered)[expected] != nil)
                if decision == "deny" { #expect(location(answered)["error"] == "access_denied") }
                guard decision == "allow" else { continue }
                // Signed in and allowed: the next request gets its code at once, unless it asks
                // for the consent page again.
                let again = await browser.open()
                #expect(again.status == 303 && location(again)["code"] != nil)
                let asking = await browser.open(browser.query() + "&prompt=consent")
                #expect(asking.status == 200)
                #expect(String(decoding: asking.body, as: UTF8.self).contains("Allow Example Portal?"))
            }
        }
    }
}
