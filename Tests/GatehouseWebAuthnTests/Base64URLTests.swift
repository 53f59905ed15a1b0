import Testing

@testable import GatehouseWebAuthn

@Suite struct Base64URLTests {
    @Test func roundTripsWithoutPadding() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == bytes)
        }
    }

    @Test func acceptsPaddingAndRefusesOtherForms() {
        #expect(Base64URL.decode("QQ==") == [0x41])
        #expect(Base64URL.decode("QQ") == [0x41])
        #expect(Base64URL.decode("QUI=") == [0x41, 0x42])
        #expect(Base64URL.decode("QUI") == [0x41, 0x42])
        #expect(Base64URL.decode("_-8") == [0xFF, 0xEF])
        #expect(Base64URL.decode("Q") == nil)
        #expect(Base64URL.decode("QR") == nil, "nonzero unused bits")
        #expect(Base64URL.decode("Q+I") == nil, "base64, not base64url")
        #expect(Base64URL.decode("QQ=") == nil)
        #expect(Base64URL.decode("Q=Q=") == nil)
        #expect(Base64URL.decode("QQ===") == nil)
    }
}
