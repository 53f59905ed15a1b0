import Foundation
import GatehouseTesting
import Testing

/// A private Glewlwyd (Debian's package, scripts/external-openid-provider) that knows the hosted
/// login at `gatehousePort` as its client, and a manifest whose login federates to it: the web
/// applications' login page offers "Sign in with Corporate", and the app's `idp.browser`
/// client signs in through it alone.
private struct FederatedSetup {
    let directory: URL
    let provider: Session
    let server: Session
    let url: String
    let manifest: URL
    /// alice (verified e-mail address) and bob (not verified), with their passwords.
    let users: [String: String]

    static func start(relyingPartyPort: Int) async throws -> FederatedSetup {
        let directory = try scratchDirectory("gatehouse-federation")
        let port = try #require(LoopbackPort.free())
        let providerPort = try #require(LoopbackPort.free())
        let provider = try Session(
            [
                "start", "--port", "\(providerPort)", "--state-dir", directory.appendingPathComponent("glewlwyd").path,
                "--redirect-uri", "http://127.0.0.1:\(port)/login/federation/callback",
            ],
            binary: packageRoot.appendingPathComponent("scripts/external-openid-provider").path
        )
        let announced = try await provider.waitFor("\"issuer\"")
        let line = try #require(announced.split(separator: "\n").first { $0.hasPrefix("{") })
        let given = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let issuer = try #require(given["issuer"] as? String)
        let clientID = try #require(given["clientID"] as? String)
        let secret = try #require(given["clientSecret"] as? String)
        var users: [String: String] = [:]
        for user in try #require(given["users"] as? [[String: Any]]) {
            users[try #require(user["username"] as? String)] = try #require(user["password"] as? String)
        }
        let rp = "http://127.0.0.1:\(relyingPartyPort)"
        let manifest = directory.appendingPathComponent("federation.yaml")
        try """
        server:
          clients:
            - {id: gatehouse-example, allowedScopes: [read], defaultScopes: [read]}
        authenticators:
          - {id: pin, type: pin, name: PIN, config: {policy: {length: 6}}}
        identityProviders:
          - id: web
            type: idp.browser
            name: Corporate via Gatehouse
            config:
              authorizationURL: ${publicURL}/login/authorize
              redirectURI: http://127.0.0.1:53180/callback
              login: gatehouse-login
        login:
          passwordCost: 14
          federation:
            - id: corp
              name: Corporate
              issuer: \(issuer)
              clientID: \(clientID)
              clientSecret: \(secret)
              requireVerifiedEmail: true
          clients:
            - {id: gatehouse, loopbackRedirectPaths: [/callback], federation: corp}
            - id: rp1
              secret: rp1-secret-0123456789
              scopes: [openid, profile, email]
              redirectURIs: [\(rp)/callback]
              postLogoutRedirectURIs: [\(rp)/logged-out]
        """.write(to: manifest, atomically: true, encoding: .utf8)
        let server = try Session(
            [
                "serve", "--manifest", manifest.path, "--database",
                directory.appendingPathComponent("server.sqlite").path,
                "--port", "\(port)",
            ]
        )
        _ = try await server.waitFor("listening on http://")
        return FederatedSetup(
            directory: directory,
            provider: provider,
            server: server,
            url: "http://127.0.0.1:\(port)",
            manifest: manifest,
            users: users
        )
    }

    func stop() {
        server.process.terminate()
        provider.process.terminate()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Signs in at Glewlwyd in headless Chromium, from `url` (pressing `choose` first, when given).
    func signInAtProvider(_ url: String, as user: String, choose: String? = nil, expect: String) async throws -> String
    {
        let browser = try Session(
            // Options first, then `--`: a generated password may start with "-".
            (choose.map { ["--choose", $0] } ?? []) + ["--expect", expect, "--", url, user, try #require(users[user])],
            binary: packageRoot.appendingPathComponent("scripts/external-provider-login").path
        )
        #expect(try await browser.finish(within: 60) == 0, "\(browser.errors.withLock { $0 })")
        return browser.output.withLock { $0 }
    }
}

@Suite("Federation through a real OpenID provider (Glewlwyd, from Debian)", .serialized)
struct FederationTests {
    @Test(
        """
        a web application's user signs in at the hosted login through Glewlwyd: its ID token checked against \
        Glewlwyd's JWKS, its sub mapped to a subject of the provider's own; an unverified e-mail address is refused
        """
    )
    func browserSignsInThroughProvider() async throws {
        let relyingPartyPort = try #require(LoopbackPort.free())
        let setup = try await FederatedSetup.start(relyingPartyPort: relyingPartyPort)
        defer { setup.stop() }
        let relyingParty = try Session(
            [
                "--port", "\(relyingPartyPort)", "--discovery", setup.url + "/login/.well-known/openid-configuration",
                "--client-id", "rp1", "--client-secret", "rp1-secret-0123456789", "--name", "rp1",
            ],
            binary: packageRoot.appendingPathComponent("scripts/openid-relying-party").path
        )
        defer { relyingParty.process.terminate() }
        _ = try await relyingParty.waitFor("\"url\"")
        let base = "http://127.0.0.1:\(relyingPartyPort)"

        let alice = try await setup.signInAtProvider(
            base + "/login",
            as: "alice",
            choose: "Sign in with Corporate",
            expect: "Signed in as corp|"
        )
        #expect(alice.contains(base + "/callback?code="))
        let refused = try await setup.signInAtProvider(
            base + "/login",
            as: "bob",
            choose: "Sign in with Corporate",
            expect: "has no verified e-mail address"
        )
        #expect(refused.contains("/login/federation/callback"))
        #expect(
            setup.server.errors.withLock { $0 }.contains(
                "An external sign-in without a verified e-mail address refused"
            )
        )
    }

    @Test("a device registers through Glewlwyd: its idp.browser client signs in there alone, then the PIN")
    func deviceRegistersThroughProvider() async throws {
        let setup = try await FederatedSetup.start(relyingPartyPort: try #require(LoopbackPort.free()))
        defer { setup.stop() }
        let register = try Session(
            [
                "register", "--identity-provider", "web", "--server", setup.url, "--data-dir",
                setup.directory.appendingPathComponent("device").path, "--manifest", setup.manifest.path,
            ],
            environment: ["GATEHOUSE_NO_BROWSER": "1"]
        )
        let prompt = try await register.waitFor("/login/authorize?")
        let start = try #require(prompt.range(of: setup.url + "/login/authorize?"))
        let address = String(prompt[start.lowerBound...].prefix { !$0.isWhitespace })
        let landed = try await setup.signInAtProvider(address, as: "alice", expect: "You can close this window")
        #expect(landed.contains("/callback?code="))
        _ = try await register.waitFor("Choose a PIN of 6 digits: ")
        register.type("258147")
        #expect(try await register.finish() == 0, "\(register.errors.withLock { $0 })")
        let output = register.output.withLock { $0 }
        #expect(output.contains("with Corporate via Gatehouse"), "\(output)")
        let profiles = try Session(
            [
                "profiles", "list", "--server", setup.url, "--data-dir",
                setup.directory.appendingPathComponent("device").path,
            ]
        )
        #expect(try await profiles.finish() == 0)
        let listed = profiles.output.withLock { $0 }
        #expect(listed.contains("corp|"), "the profile's subject is the provider's user: \(listed)")
    }
}
