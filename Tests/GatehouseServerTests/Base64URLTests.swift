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

    @Test("every value round-trips, and encodes as Foundation's base64 with the URL alphabet and no padding")
    func roundTrip() {
        for length in 0..<200 {
            let value = Data.random(count: length)
            let expected = value.base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(value.base64URLEncodedString == expected)
            #expect(Data(base64URLEncoded: expected) == value)
        }
    }

    @Test("random bytes are drawn for every position, not repeated")
    func randomBytes() {
        #expect(Data.random(count: 13).count == 13)
        #expect(Set((0..<50).map { _ in Data.random(count: 16) }).count == 50)
    }
}

@Suite("Form fields")
struct FormFieldsTests {
    @Test("plus is a space, escapes are bytes, broken escapes and bytes that are not UTF-8 are refused")
    func decoding() {
        #expect(FormFields("a=b+c%20d%C3%A9")?["a"] == "b c dé")
        #expect(FormFields("token=abc-_.~")?["token"] == "abc-_.~")
        #expect(FormFields("a=%2") == nil)
        #expect(FormFields("a=%zz") == nil)
        #expect(FormFields("a=%FF") == nil)
        #expect(FormFields("a=%00") == nil)
        #expect(FormFields("a=1&a=2") == nil)
    }
}
