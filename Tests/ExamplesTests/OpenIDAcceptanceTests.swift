import Foundation
import GatehouseTesting
import Testing

/// A manifest whose hosted login knows two web applications at `ports` (relying parties of
/// scripts/openid-relying-party: /callback, /logged-out, /backchannel-logout), the second one
/// signed with ES256.
func openIDManifest(in directory: URL, relyingPartyPorts ports: [Int]) throws -> URL {
    var clients = ""
    for (index, port) in ports.enumerated() {
        let base = "http://127.0.0.1:\(port)"
        clients += """
                - id: rp\(index + 1)
                  name: Web app \(index + 1)
                  secret: rp\(index + 1)-secret-0123456789
                  scopes: [openid, profile, email]
                  idTokenSigningAlgorithm: \(index == 1 ? "ES256" : "RS256")
                  redirectURIs: [\(base)/callback]
                  postLogoutRedirectURIs: [\(base)/logged-out]
                  backchannelLogoutURI: \(base)/backchannel-logout

            """
    }
    let manifest = directory.appendingPathComponent("openid.yaml")
    try """
    server:
      clients:
        - {id: gatehouse-example, allowedScopes: [read], defaultScopes: [read]}
    authenticators:
      - {id: pin, type: pin, name: PIN}
    identityProviders:
      - id: web
        type: idp.browser
        name: Example login
        config:
          authorizationURL: ${publicURL}/login/authorize
          redirectURI: http://127.0.0.1:53180/callback
          login: gatehouse-login
    login:
      passwordCost: 14
      clients:
        - {id: gatehouse, loopbackRedirectPaths: [/callback]}
    \(clients)
    """.write(to: manifest, atomically: true, encoding: .utf8)
    return manifest
}

@Suite("OpenID provider: standard relying parties in a real browser", .serialized)
struct OpenIDAcceptanceTests {
    @Test(
        """
        Authlib relying parties sign in through `gatehouse serve` in Chromium: discovery, code + PKCE + nonce, \
        the ID token verified against the JWKS, userinfo, a key rotation while signed in, a second relying party \
        signed in silently, RP-initiated logout and a back-channel logout delivered
        """
    )
    func authlibRelyingParties() async throws {
        let directory = try scratchDirectory("gatehouse-openid")
        defer { try? FileManager.default.removeItem(at: directory) }
        let ports = [try #require(LoopbackPort.free()), try #require(LoopbackPort.free())]
        #expect(ports[0] != ports[1])
        let manifest = try openIDManifest(in: directory, relyingPartyPorts: ports)
        let database = directory.appendingPathComponent("server.sqlite").path
        let common = ["--manifest", manifest.path, "--database", database]

        let add = try Session(["users", "add", "--username", "ann@example.com"] + common)
        add.type("correct horse battery")
        add.type("correct horse battery")
        #expect(try await add.finish() == 0, "\(add.errors.withLock { $0 })")

        let (server, url) = try await startServer(
            in: directory,
            manifest: ["--manifest", manifest.path],
            database: database
        )
        defer { server.process.terminate() }
        let given: [String: Any] = [
            "discovery": url + "/login/.well-known/openid-configuration",
            "clients": [
                ["id": "rp1", "secret": "rp1-secret-0123456789", "port": ports[0]],
                ["id": "rp2", "secret": "rp2-secret-0123456789", "port": ports[1]],
            ],
            "user": ["username": "ann@example.com", "password": "correct horse battery"],
            "loginPage": "gatehouse",
            "rotateKeys": [try binary("gatehouse").path, "signing-keys", "rotate"] + common,
        ]
        let acceptance = try Session([], binary: packageRoot.appendingPathComponent("scripts/openid-acceptance").path)
        acceptance.send(try JSONSerialization.data(withJSONObject: given))
        let status = try await acceptance.finish(within: 150)
        let report = acceptance.output.withLock { $0 }
        #expect(status == 0, "\(report)\n\(acceptance.errors.withLock { $0 })")
        for step in [
            "ok rp1 signed in as ann@example.com", "ok keys rotated", "ok rp2 signed in silently",
            "ok rp1 logged out at the OP", "ok rp2 received a verified back-channel logout token",
            "ok rp2 prompt=none after logout: login_required", "\nOK",
        ] {
            #expect(report.contains(step), "missing: \(step)\n\(report)")
        }
    }
}
