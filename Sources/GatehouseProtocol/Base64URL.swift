public import Foundation

extension Data {
    /// Base64url without padding (RFC 4648 §5), as JOSE and OAuth use it.
    public var base64URLEncodedString: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes canonical base64url without padding; `nil` for anything else (padding, `+`, `/`,
    /// white space, or unused low bits set in the last character, which would let many texts
    /// stand for one value).
    public init?(base64URLEncoded text: some StringProtocol) {
        guard text.utf8.allSatisfy({ Self.isBase64URLByte($0) }), text.utf8.count % 4 != 1 else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let decoded = Data(base64Encoded: base64), decoded.base64URLEncodedString.utf8.elementsEqual(text.utf8)
        else { return nil }
        self = decoded
    }

    private static func isBase64URLByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    /// `count` bytes from the system's secure random generator.
    public static func random(count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }
}

/// A byte string carried in JSON as base64url text.
public struct Base64URLData: Codable, Hashable, Sendable {
    public var data: Data

    public init(_ data: Data) { self.data = data }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let data = Data(base64URLEncoded: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected base64url text")
        }
        self.data = data
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data.base64URLEncodedString)
    }
}
