import Foundation
import GatehouseProtocol
import Testing

@Suite("OpenAPI document")
struct OpenAPITests {
    @Test("docs/openapi.yaml describes exactly the server's endpoints, the mounted XignIn manager included")
    func pathsMatch() throws {
        let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/openapi.yaml")
        let text = try String(contentsOf: document, encoding: .utf8)
        let documented = Set(
            text.split(separator: "\n").filter { $0.hasPrefix("  /") && $0.hasSuffix(":") }.map {
                String($0.dropFirst(2).dropLast())
            }
        )
        let served: Set<String> = [
            Endpoint.health, Endpoint.configuration, Endpoint.clients, Endpoint.registration, Endpoint.authentication,
            Endpoint.changePin, Endpoint.flowPrefix + "{flowID}", Endpoint.token, Endpoint.revoke, Endpoint.deregister,
            Endpoint.profileResource,
            // The XignIn manager, mounted when the manifest has an `xignin` section.
            "/xignin/v1/configuration", "/xignin/v1/pin/evaluate", "/xignin/v1/registrations", "/xignin/v1/activations",
        ]
        #expect(documented == served)
    }
}
