import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import Testing

@Suite("App-to-web single sign-on")
struct WebLoginTests {
    /// The sign-in page's form: its hidden fields, and the cookie the page set.
    private func confirmation(_ page: WireResponse) throws -> (fields: [String: String], cookie: String) {
        let html = String(decoding: page.body, as: UTF8.self)
        var fields: [String: String] = [:]
        for match in html.matches(of: #/<input type="hidden" name="([a-z]+)" value="([A-Za-z0-9_.-]+)">/#) {
            fields[String(match.output.1)] = String(match.output.2)
        }
        let setCookie = try #require(page.header("Set-Cookie"))
        return (fields, String(setCookie.prefix { $0 != ";" }))
    }

    /// Posts the sign-in form with `fields` and `headers`.
    private func post(
        _ fixture: Fixture,
        _ fields: [String: String],
        headers: [String: String] = [:]
    ) async throws
        -> WireResponse
    {
        var all = headers
        all["Content-Type"] = "application/x-www-form-urlencoded"
        return try await fixture.send(
            "POST",
            Endpoint.webSignIn,
            body: Data(FormFields.encode(fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }).utf8),
            headers: all
        )
    }

    @Test(
        "a one-time login asks to continue as its user, then lands the browser on an allowed target with a session, once",
        arguments: Mode.allCases
    )
    func signOn(mode: Mode) async throws {
        let clock = ManualClock(Date())
        try await withFixture(mode, clock: clock) { fixture in
            let client = try fixture.client()
            do {
                _ = try await client.appToWebSingleSignOn(
                    targetURL: try #require(URL(string: "https://shop.example/account/"))
                )
                Issue.record("single sign-on without a session")
            } catch let error as AppToWebSingleSignOnError {
                #expect(error.code == .userNotAuthenticated)
            }
            _ = try await register(client)
            let target = "https://shop.example/account/orders?page=2"
            let login = try await client.appToWebSingleSignOn(targetURL: try #require(URL(string: target)))
            let base = fixture.transport.baseURL
            #expect(login.redirectURL.absoluteString == "\(base)/web/sign-in?token=\(login.token)")
            let path = login.redirectURL.absoluteString.dropFirst(base.count).description

            // Opening the link signs nobody in: the page names the user and asks to continue.
            let page = try await fixture.send("GET", path)
            #expect(page.status == 200)
            #expect(page.header("Set-Cookie") != nil && page.header("Location") == nil)
            #expect(!(page.header("Set-Cookie") ?? "").contains("gh_web="))
            #expect(String(decoding: page.body, as: UTF8.self).contains("Continue as jane@example.com"))
            #expect(page.header("Referrer-Policy") == "no-referrer")
            let (fields, confirmCookie) = try confirmation(page)
            #expect(fields["token"] == login.token && fields["csrf"] != nil)
            #expect(confirmCookie.hasPrefix("gh_web_confirm="))
            #expect(try await fixture.send("GET", path).status == 200)

            // The form posted without this browser's cookie (another site's page posting it), with
            // another value, or reported cross-site: refused, and the link still works.
            #expect(try await post(fixture, fields).status == 403)
            #expect(try await post(fixture, fields, headers: ["Cookie": "gh_web_confirm=forged"]).status == 403)
            var forged = fields
            forged["csrf"] = "forged"
            #expect(try await post(fixture, forged, headers: ["Cookie": "gh_web_confirm=forged-too"]).status == 403)
            #expect(
                try await post(fixture, fields, headers: ["Cookie": confirmCookie, "Sec-Fetch-Site": "cross-site"])
                    .status == 403
            )
            // A pair made up by whoever can plant a cookie, for a link whose page was never shown,
            // and this page's pair for another link: refused (the value is the server's, per link).
            #expect(
                try await post(
                    fixture,
                    ["token": login.token, "csrf": "attackerchosen"],
                    headers: ["Cookie": "gh_web_confirm=attackerchosen"]
                ).status == 403
            )
            let other = try await client.appToWebSingleSignOn(targetURL: try #require(URL(string: target)))
            var crossed = fields
            crossed["token"] = other.token
            #expect(try await post(fixture, crossed, headers: ["Cookie": confirmCookie]).status == 403)
            #expect(try await fixture.count("web_sessions") == 0)

            // The user continues: the session starts on that POST.
            let landed = try await post(
                fixture,
                fields,
                headers: ["Cookie": confirmCookie, "Sec-Fetch-Site": "same-origin"]
            )
            #expect(landed.status == 303)
            #expect(landed.header("Location") == target)
            let setCookie = try #require(landed.header("Set-Cookie"))
            #expect(
                setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Lax") && setCookie.contains("Path=/web/")
            )
            let cookie = String(setCookie.prefix { $0 != ";" })
            let signedIn = try await fixture.send("GET", Endpoint.webSession, headers: ["Cookie": cookie])
            #expect(signedIn.status == 200)
            #expect(String(decoding: signedIn.body, as: UTF8.self).contains("Signed in as jane@example.com"))
            #expect(try await fixture.send("GET", Endpoint.webSession).status == 401)
            #expect(
                try await fixture.send("GET", Endpoint.webSession, headers: ["Cookie": "gh_web=forged"]).status == 401
            )

            // Single use, and short-lived.
            #expect(try await fixture.send("GET", path).status == 404)
            #expect(try await post(fixture, fields, headers: ["Cookie": confirmCookie]).status == 404)
            let late = try await client.appToWebSingleSignOn(targetURL: try #require(URL(string: target)))
            let latePath = late.redirectURL.absoluteString.dropFirst(base.count).description
            let (lateFields, lateCookie) = try confirmation(try await fixture.send("GET", latePath))
            clock.advance(by: 61)
            #expect(try await fixture.send("GET", latePath).status == 404)
            #expect(try await post(fixture, lateFields, headers: ["Cookie": lateCookie]).status == 404)
            // The web session ends with its lifetime.
            clock.advance(by: 3600)
            #expect(try await fixture.send("GET", Endpoint.webSession, headers: ["Cookie": cookie]).status == 401)
        }
    }

    @Test(
        "a web session ends with the app session it came from; a link from an ended session is void",
        arguments: Mode.allCases
    )
    func endsWithAppSession(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let base = fixture.transport.baseURL
            func signIn() async throws -> String {
                let login = try await client.appToWebSingleSignOn(
                    targetURL: try #require(URL(string: "https://shop.example/account/"))
                )
                let page = try await fixture.send(
                    "GET",
                    login.redirectURL.absoluteString.dropFirst(base.count).description
                )
                let (fields, confirmCookie) = try confirmation(page)
                let landed = try await post(fixture, fields, headers: ["Cookie": confirmCookie])
                #expect(landed.status == 303)
                return String(try #require(landed.header("Set-Cookie")).prefix { $0 != ";" })
            }
            func signedIn(_ cookie: String) async throws -> Bool {
                try await fixture.send("GET", Endpoint.webSession, headers: ["Cookie": cookie]).status == 200
            }

            // Logging out of the app (its refresh token revoked) ends the web session too.
            let first = try await signIn()
            #expect(try await signedIn(first))
            let pendingLink = try await client.appToWebSingleSignOn(
                targetURL: try #require(URL(string: "https://shop.example/account/"))
            )
            await client.logout()
            #expect(try await signedIn(first) == false)
            // A link issued before the logout no longer signs anybody in.
            let pendingPath = pendingLink.redirectURL.absoluteString.dropFirst(base.count).description
            #expect(try await fixture.send("GET", pendingPath).status == 404)

            // A new app session, and another web session from it: a refresh keeps it (same
            // session), a reused refresh token (revoking the session) ends it.
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            let second = try await signIn()
            let original = try #require(await client.sessionTokens).refreshToken
            try await client.refreshSession()
            #expect(try await signedIn(second))
            let reuse = try await fixture.send(
                "POST",
                Endpoint.token,
                body: try WireCoding.encode(TokenRequest(grantType: "refresh_token", refreshToken: original)),
                headers: ["DPoP": try await client.dpopProof(method: "POST", url: base + Endpoint.token)]
            )
            #expect(reuse.status == 400)
            #expect(try await signedIn(second) == false)

            // And deregistration ends it, as it ends the profile.
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            let third = try await signIn()
            try await client.deregisterUser(profile)
            #expect(try await signedIn(third) == false)
        }
    }

    @Test("targets outside the application's allow-list are refused (10023)")
    func targets() async throws {
        try await withFixture(.embedded) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            for target in [
                "https://shop.example/admin", "https://shop.example/accounts", "https://shop.example.evil/account/",
                "http://shop.example/account/", "https://shop.example:8443/account/",
                "https://shop.example/account/../admin", "https://shop.example/account/%2e%2e/admin",
                "https://user@shop.example/account/",
            ] {
                do {
                    _ = try await client.appToWebSingleSignOn(targetURL: try #require(URL(string: target)))
                    Issue.record("\(target) was allowed")
                } catch let error as AppToWebSingleSignOnError {
                    #expect(error.code == .disabled, "\(target)")
                }
            }
            // Sent below the SDK: what a browser would read as a way out of the allowed path.
            for target in [
                #"https://shop.example/account/..\..\admin"#, "https://shop.example/account/.\t./admin",
                "https://shop.example/account/..%5cadmin", "https://shop.example/account/x%2f..%2fadmin",
                "https://shop.example/account/%2\te%2\te/admin", "https://shop.example/account/ x",
            ] {
                let url = fixture.transport.baseURL + Endpoint.webLogin
                let refused = try await fixture.send(
                    "POST",
                    Endpoint.webLogin,
                    body: try JSONSerialization.data(withJSONObject: ["target_url": target]),
                    headers: try await client.resourceHeaders(.user, method: "POST", url: url)
                )
                #expect(refused.status == 400, "\(target)")
                #expect(try errorBody(refused).gatehouseCode == 10023, "\(target)")
            }
            #expect(try await fixture.count("web_login_tokens") == 0)
        }
    }
}
