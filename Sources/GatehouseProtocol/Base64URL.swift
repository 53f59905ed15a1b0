public import Foundation

extension Data {
    /// Base64url without padding (RFC 4648 §5), as JOSE and OAuth use it.
    public var base64URLEncodedString: String { Base64URL.encode(self) }

    /// Decodes canonical base64url without padding; `nil` for anything else (padding, `+`, `/`,
    /// white space, or unused low bits set in the last character, which would let many texts
    /// stand for one value).
    public init?(base64URLEncoded text: some StringProtocol) {
        guard let decoded = Base64URL.decode(text.utf8) else { return nil }
        self = decoded
    }

    /// `count` bytes from the system's secure random generator.
    public static func random(count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        // Eight bytes per draw: each draw is a call into the kernel's generator.
        while bytes.count < count {
            let word = generator.next()
            Swift.withUnsafeBytes(of: word) { bytes.append(contentsOf: $0.prefix(count - bytes.count)) }
        }
        return Data(bytes)
    }
}

/// Base64url over bytes: on every request path (DPoP proofs, tokens, keys), so it works on the
/// UTF-8 bytes directly rather than through string replacement.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Each byte's 6-bit value, or 0xFF for a byte outside the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    static func encode(_ data: Data) -> String {
        let count = data.count
        let length = (count * 4 + 2) / 3
        return String(unsafeUninitializedCapacity: length) { output in
            data.withUnsafeBytes { input in
                var out = 0
                var index = 0
                while index + 3 <= count {
                    let value = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
                    output[out] = alphabet[Int(value >> 18 & 63)]
                    output[out + 1] = alphabet[Int(value >> 12 & 63)]
                    output[out + 2] = alphabet[Int(value >> 6 & 63)]
                    output[out + 3] = alphabet[Int(value & 63)]
                    out += 4
                    index += 3
                }
                switch count - index {
                case 1:
                    let value = UInt32(input[index]) << 16
                    output[out] = alphabet[Int(value >> 18 & 63)]
                    output[out + 1] = alphabet[Int(value >> 12 & 63)]
                    out += 2
                case 2:
                    let value = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8
                    output[out] = alphabet[Int(value >> 18 & 63)]
                    output[out + 1] = alphabet[Int(value >> 12 & 63)]
                    output[out + 2] = alphabet[Int(value >> 6 & 63)]
                    out += 3
                default: break
                }
                return out
            }
        }
    }

    /// Canonical unpadded base64url only: a length of 4n+1, a byte outside the alphabet or
    /// unused low bits in the last character are refused.
    static func decode(_ text: some Collection<UInt8>) -> Data? {
        let count = text.count
        guard count % 4 != 1 else { return nil }
        var output = Data(capacity: count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text {
            let value = values[Int(byte)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // What is left are the last character's unused bits: they must be zero.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }
}

/// A byte string carried in JSON as base64url text.
public struct Base64URLData: Codable, Hashable, Sendable {
    /// The raw bytes.
    public var data: Data

    /// Wraps raw bytes, to be written as base64url.
    public init(_ data: Data) { self.data = data }

    /// Decodes base64url text without padding; throws `DecodingError` for anything else.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let data = Data(base64URLEncoded: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected base64url text")
        }
        self.data = data
    }

    /// Encodes the bytes as base64url text without padding.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data.base64URLEncodedString)
    }
}
