import Foundation
import GatehouseProtocol
import Testing

/// Introspection answers are written without `JSONEncoder` (``IntrospectionResponse/wireJSON``):
/// the bytes must be the encoder's, for every field and every character a string may hold.
@Suite("Introspection answers' JSON")
struct IntrospectionJSONTests {
    static let strings = [
        "", "plain", "with space", "quote\"d", "back\\slash", "sl/ash", "http://127.0.0.1:8080/v1",
        "new\nline\r\ttab", "\u{0}\u{1}\u{8}\u{C}\u{1F}\u{7F}", "ünïcødé 🔐", "\u{2028}\u{2029}", "</script>",
    ]

    static var answers: [IntrospectionResponse] {
        var answers: [IntrospectionResponse] = [.inactive]
        for (index, text) in strings.enumerated() {
            answers.append(
                IntrospectionResponse(
                    active: true,
                    scope: text,
                    clientID: "client-\(index)" + text,
                    sub: index % 2 == 0 ? text : nil,
                    identityProvider: index % 3 == 0 ? nil : text,
                    tokenType: "DPoP",
                    exp: index % 4 == 0 ? nil : 1_700_000_000 + index,
                    iat: -index,
                    iss: text,
                    cnf: index % 2 == 1 ? nil : IntrospectionResponse.Confirmation(jkt: text),
                    kind: [nil, .user, .implicit, .device, .stateless][index % 5],
                    appID: index % 3 == 1 ? nil : text
                )
            )
        }
        return answers
    }

    @Test("every answer is written byte for byte as WireCoding writes it", arguments: answers.indices)
    func sameBytes(index: Int) throws {
        let answer = Self.answers[index]
        #expect(answer.wireJSON == (try WireCoding.encode(answer)))
        #expect(try WireCoding.decode(IntrospectionResponse.self, from: answer.wireJSON) == answer)
    }
}
