import Foundation
import GatehouseProtocol
import Testing

@Suite("OpenAPI document")
struct OpenAPITests {
    @Test("docs/openapi.yaml describes exactly the server's endpoints, the mounted XignIn manager and login included")
    func pathsMatch() throws {
        let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/openapi.yaml")
        let text = try String(contentsOf: document, encoding: .utf8)
        let documented = Set(
            text.split(separator: "\n").filter { $0.hasPrefix("  /") && $0.hasSuffix(":") }.map {
                String($0.dropFirst(2).dropLast())
            }
        )
        let served = Set(Endpoint.all).union([
            // The XignIn manager, mounted when the manifest has an `xignin` section.
            "/xignin/v1/configuration", "/xignin/v1/pin/evaluate", "/xignin/v1/registrations", "/xignin/v1/activations",
            // The hosted login (the OpenID provider), mounted when the manifest has a `login` section.
            "/login/.well-known/openid-configuration", "/login/jwks", "/login/authorize", "/login/consent",
            "/login/token", "/login/userinfo", "/login/logout", "/login/federation", "/login/federation/callback",
            "/login/phone", "/login/qr", "/login/phone/status", "/login/phone/complete", "/login/assets/login.js",
            "/login/passkey/options", "/login/passkey", "/login/passkeys", "/login/passkeys/options",
        ])
        #expect(documented == served)
    }

    @Test("every listed endpoint is routed (no 404), and an unlisted one is not", arguments: Mode.allCases)
    func listedEndpointsAreServed(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            for path in Endpoint.all {
                let concrete = path.replacingOccurrences(of: "{flowID}", with: "AAAAAAAAAAAAAAAAAAAAAAAA")
                let get = try await fixture.send("GET", concrete)
                let post = try await fixture.send("POST", concrete)
                let answers = [get, post].map(\.status)
                // A routed path answers 405 to the wrong method or refuses the empty request;
                // an unknown one is 404 "There is no endpoint".
                let unrouted = [get, post].allSatisfy {
                    String(decoding: $0.body, as: UTF8.self).contains("There is no endpoint")
                }
                #expect(!unrouted, "\(path) answered \(answers)")
            }
            let unknown = try await fixture.send("GET", "/v1/nothing")
            #expect(String(decoding: unknown.body, as: UTF8.self).contains("There is no endpoint"))
        }
    }
}
