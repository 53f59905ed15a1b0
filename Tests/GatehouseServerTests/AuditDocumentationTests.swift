import Foundation
import Testing

@testable import GatehouseServer

@Suite("The audit trail's documentation")
struct AuditDocumentationTests {
    @Test("docs/openapi.yaml's AuditEventName lists every event the server records, and nothing else")
    func eventNames() throws {
        let document = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/openapi.yaml")
        let text = try String(contentsOf: document, encoding: .utf8)
        let schema = try #require(text.range(of: "    AuditEventName:\n"))
        let line = try #require(
            text[schema.upperBound...].split(separator: "\n").first { $0.contains("enum: [") }
        )
        let listed = line.drop { $0 != "[" }.dropFirst().prefix { $0 != "]" }
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(Set(listed) == Set(AuditEvent.allCases.map(\.rawValue)))
        #expect(listed.count == AuditEvent.allCases.count)
    }
}
