import Foundation
import GatehouseProtocol
import Testing

@Suite("Base64url")
struct Base64URLTests {
    @Test("only the canonical text of a value decodes: no padding, no other alphabet, no stray low bits")
    func canonical() {
        #expect(Data(base64URLEncoded: "AA") == Data([0]))
        #expect(Data(base64URLEncoded: "AB") == nil)
        #expect(Data(base64URLEncoded: "AAE") == Data([0, 1]))
        #expect(Data(base64URLEncoded: "AAF") == nil)
        #expect(Data(base64URLEncoded: "AA==") == nil)
        #expect(Data(base64URLEncoded: "+/8") == nil)
        #expect(Data(base64URLEncoded: "-_8") == Data([0xFB, 0xFF]))
        #expect(Data(base64URLEncoded: "A") == nil)
        #expect(Data(base64URLEncoded: "") == Data())
    }
}
