import Foundation
import GatehouseTesting
import Testing

@Suite("App-to-web sign-on into a web application that signs in with OpenID Connect", .serialized)
struct AppToWebSignOnTests {
    @Test(
        """
        after gatehouse web-login, the example web shop's own OpenID sign-in completes in Chromium without a \
        password prompt, as the app's user
        """
    )
    func webLoginSignsTheShopIn() async throws {
        let directory = try scratchDirectory("gatehouse-app-to-web")
        defer { try? FileManager.default.removeItem(at: directory) }
        let shopPort = try #require(LoopbackPort.free())
        let shop = "http://127.0.0.1:\(shopPort)"
        let manifest = directory.appendingPathComponent("server.yaml")
        try """
        server:
          clients:
            - id: gatehouse-example
              allowedScopes: [read]
              defaultScopes: [read]
              webLoginTargets: ["\(shop)/"]
        authenticators:
          - {id: pin, type: pin, name: PIN, config: {policy: {length: 6}}}
        identityProviders:
          - id: demo-api
            type: idp.customAPI
            name: Demo registration API
            config: {twoStep: true, handler: one-time-code}
        login:
          passwordCost: 14
          clients:
            - id: web-shop
              name: Web shop
              secret: web-shop-secret-0123456789
              scopes: [openid, profile, email]
              redirectURIs: [\(shop)/callback]
              postLogoutRedirectURIs: [\(shop)/]
        """.write(to: manifest, atomically: true, encoding: .utf8)
        // The server on a port the system picks: nothing else can take it in between.
        let (server, url) = try await startServer(in: directory, manifest: ["--manifest", manifest.path])
        defer { server.process.terminate() }
        let shopProcess = try Session(
            ["--port", "\(shopPort)", "--issuer", url + "/login", "--client-id", "web-shop"],
            binary: "web-shop",
            environment: ["WEB_SHOP_CLIENT_SECRET": "web-shop-secret-0123456789"]
        )
        defer { shopProcess.process.terminate() }
        _ = try await shopProcess.waitFor("listening on http://")

        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]
        try await registerOverCommandLine(device + ["--manifest", manifest.path])
        let login = try Session(["web-login", shop + "/login"] + device + ["--manifest", manifest.path])
        _ = try await login.waitFor("PIN")
        login.type("258147")
        #expect(try await login.finish() == 0, "\(login.errors.withLock { $0 })")
        let printed = login.output.withLock { $0 }
        let start = try #require(printed.range(of: "\(url)/web/sign-in?token="))
        let link = String(printed[start.lowerBound...].prefix { !$0.isWhitespace })

        // The link's page, the button, and then the shop: its sign-in goes to the hosted login,
        // which knows this browser now and answers with a code at once.
        let browser = try Session(
            [
                link, "--press", "Continue as", "--expect", "Signed in as demo-api|ann@example.com", "--never",
                "#password",
            ],
            binary: packageRoot.appendingPathComponent("scripts/browser-continue").path
        )
        #expect(try await browser.finish(within: 60) == 0, "\(browser.errors.withLock { $0 })")
        let landed = browser.output.withLock { $0 }
        #expect(landed.hasPrefix(shop + "/"), "\(landed)")
    }
}
