import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import Testing

@Suite("App-to-web single sign-on")
struct WebLoginTests {
    @Test(
        "a one-time login lands the browser on an allowed target with a session cookie, once",
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

            let landed = try await fixture.send("GET", path)
            #expect(landed.status == 303)
            #expect(landed.header("Location") == target)
            let setCookie = try #require(landed.header("Set-Cookie"))
            #expect(
                setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Lax") && setCookie.contains("Path=/web/")
            )
            let cookie = String(setCookie.prefix { $0 != ";" })
            let page = try await fixture.send("GET", Endpoint.webSession, headers: ["Cookie": cookie])
            #expect(page.status == 200)
            #expect(String(decoding: page.body, as: UTF8.self).contains("Signed in as jane@example.com"))
            #expect(try await fixture.send("GET", Endpoint.webSession).status == 401)
            #expect(
                try await fixture.send("GET", Endpoint.webSession, headers: ["Cookie": "gh_web=forged"]).status == 401
            )

            // Single use, and short-lived.
            #expect(try await fixture.send("GET", path).status == 400)
            let late = try await client.appToWebSingleSignOn(targetURL: try #require(URL(string: target)))
            clock.advance(by: 61)
            let latePath = late.redirectURL.absoluteString.dropFirst(base.count).description
            #expect(try await fixture.send("GET", latePath).status == 400)
            // The web session ends with its lifetime.
            clock.advance(by: 3600)
            #expect(try await fixture.send("GET", Endpoint.webSession, headers: ["Cookie": cookie]).status == 401)
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
