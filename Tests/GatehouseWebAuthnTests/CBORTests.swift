import Testing

@testable import GatehouseWebAuthn

/// The decoder reads what the encoder writes and refuses everything the strict profile excludes.
@Suite struct CBORTests {
    func refusal(_ bytes: [UInt8]) -> String? {
        do {
            _ = try CBORDecoder.decode(bytes)
            return nil
        } catch {
            guard case .malformed(let detail) = error else { return "\(error)" }
            return detail
        }
    }

    @Test func decodesWhatTheEncoderWrites() throws {
        let item = CBORItem.map([
            (.int(1), .int(2)), (.int(-1), .int(-24)), (.int(-2), .int(-25)), (.text("fmt"), .text("none")),
            (.text("n"), .array([.int(0), .int(23), .int(24), .int(255), .int(256), .int(65_535), .int(65_536)])),
            (.text("big"), .unsigned(UInt64.max)), (.text("neg"), .negative(UInt64.max)),
            (.text("b"), .bytes(Array(repeating: 7, count: 300))), (.text("t"), .boolean(true)),
            (.text("f"), .boolean(false)), (.text("z"), .null), (.text("é"), .text("ü€😀")),
        ])
        let decoded = try CBORDecoder.decode(item.encoded)
        #expect(decoded[1]?.integer == 2)
        #expect(decoded[-1]?.integer == -24)
        #expect(decoded[-2]?.integer == -25)
        #expect(decoded["fmt"] == .text("none"))
        #expect(decoded["n"] == .array([0, 23, 24, 255, 256, 65_535, 65_536].map { CBOR.unsigned($0) }))
        #expect(decoded["big"] == .unsigned(UInt64.max) && decoded["big"]?.integer == nil)
        #expect(decoded["neg"] == .negative(UInt64.max) && decoded["neg"]?.integer == nil)
        #expect(decoded["b"] == .bytes(Array(repeating: 7, count: 300)))
        #expect(decoded["t"] == .boolean(true) && decoded["f"] == .boolean(false) && decoded["z"] == .null)
        #expect(decoded["é"] == .text("ü€😀"))
        #expect(try CBORDecoder.decode([0xF7]) == .undefined)
        let (prefix, length) = try CBORDecoder.decodePrefix([0x00, 0x82, 0x01, 0x02, 0xFF], from: 1)
        #expect(prefix == .array([.unsigned(1), .unsigned(2)]) && length == 3)
    }

    @Test func refusesTrailingBytes() {
        #expect(refusal([0x01, 0x00]) == "1 bytes after the CBOR item")
        #expect(refusal(CBORItem.map([]).encoded + [0xA0]) == "1 bytes after the CBOR item")
        #expect(refusal([]) == "CBOR ends early")
    }

    @Test func refusesHugeLengths() {
        // Lengths far beyond the input: refused before anything is allocated.
        #expect(refusal([0x5B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]) == "CBOR length exceeds the input")
        #expect(refusal([0x7A, 0x7F, 0xFF, 0xFF, 0xFF, 0x61]) == "CBOR length exceeds the input")
        #expect(
            refusal([0x9B, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01]) == "CBOR length exceeds the input"
        )
        #expect(refusal([0xBA, 0x00, 0x01, 0x00, 0x00, 0x01, 0x01]) == "CBOR length exceeds the input")
        #expect(refusal([0x43, 0x01, 0x02]) == "CBOR length exceeds the input")
        #expect(refusal([0x1B, 0x01]) == "CBOR length exceeds the input")
    }

    @Test func refusesDeepNesting() {
        #expect(refusal(Array(repeating: 0x81, count: 100_000) + [0x00]) == "CBOR nests too deeply")
        #expect(refusal(Array(repeating: [0xA1, 0x00], count: 17).flatMap { $0 } + [0x00]) == "CBOR nests too deeply")
        var nested = CBORItem.int(0)
        for _ in 0..<CBORDecoder.maximumDepth { nested = .array([nested]) }
        #expect(refusal(nested.encoded) == nil)
        #expect(refusal(CBORItem.array([nested]).encoded) == "CBOR nests too deeply")
    }

    @Test func refusesIndefiniteLengthsAndNonMinimalArguments() {
        #expect(refusal([0x5F, 0x41, 0x00, 0xFF]) == "CBOR indefinite lengths are not allowed")
        #expect(refusal([0x9F, 0xFF]) == "CBOR indefinite lengths are not allowed")
        #expect(refusal([0xBF, 0xFF]) == "CBOR indefinite lengths are not allowed")
        #expect(refusal([0xFF]) == "CBOR break outside an indefinite-length item")
        #expect(refusal([0x18, 0x17]) == "CBOR argument not in its shortest form")
        #expect(refusal([0x19, 0x00, 0xFF]) == "CBOR argument not in its shortest form")
        #expect(refusal([0x3A, 0x00, 0x00, 0xFF, 0xFF]) == "CBOR argument not in its shortest form")
        #expect(refusal([0x5B, 0, 0, 0, 0, 0, 0, 0, 1, 0]) == "CBOR argument not in its shortest form")
        #expect(refusal([0x1C]) == "CBOR additional information 28 is reserved")
        #expect(refusal([0x18, 0x18]) == nil)
        #expect(refusal([0x19, 0x01, 0x00]) == nil)
    }

    @Test func refusesWhatWebAuthnDoesNotUse() {
        #expect(refusal([0xC0, 0x60]) == "CBOR tags are not allowed")
        #expect(refusal([0xF9, 0x3C, 0x00]) == "CBOR floating-point values are not allowed")
        #expect(refusal([0xFB, 0, 0, 0, 0, 0, 0, 0, 0]) == "CBOR floating-point values are not allowed")
        #expect(refusal([0xF0]) == "CBOR simple value 16 is not allowed")
        #expect(refusal([0xF8, 0x20]) == "CBOR simple value 24 is not allowed")
        #expect(refusal([0x62, 0xC3, 0x28]) == "CBOR text string is not UTF-8")
        #expect(refusal([0xA1, 0x41, 0x00, 0x00]) == "CBOR map key is not an integer or a text string")
        #expect(refusal([0xA1, 0x80, 0x00]) == "CBOR map key is not an integer or a text string")
        #expect(refusal([0xA2, 0x01, 0x00, 0x01, 0x02]) == "CBOR map has a duplicate key")
        #expect(refusal([0xA2, 0x61, 0x61, 0x00, 0x61, 0x61, 0x02]) == "CBOR map has a duplicate key")
        #expect(refusal([0xA2, 0x01, 0x00, 0x61, 0x31, 0x02]) == nil)
    }
}
