/// Base64url (RFC 4648 §5), the encoding WebAuthn's JSON forms use for binary fields.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `bytes` in base64url without padding.
    static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            output.append(alphabet[Int(group >> 18 & 0x3F)])
            output.append(alphabet[Int(group >> 12 & 0x3F)])
            if second != nil { output.append(alphabet[Int(group >> 6 & 0x3F)]) }
            if third != nil { output.append(alphabet[Int(group & 0x3F)]) }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes `text` encodes, with or without `=` padding; nil for anything else (other
    /// characters, a length no encoding has, padding in the middle, nonzero unused bits).
    static func decode(_ text: String) -> [UInt8]? {
        var characters = Array(text.utf8)
        if characters.count % 4 == 0, characters.last == UInt8(ascii: "=") {
            characters.removeLast()
            if characters.last == UInt8(ascii: "=") { characters.removeLast() }
        }
        guard characters.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(characters.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in characters {
            guard let value = sextet(character) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // The bits left over must be zero: one encoding per byte string.
        guard accumulator == 0 else { return nil }
        return output
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}
