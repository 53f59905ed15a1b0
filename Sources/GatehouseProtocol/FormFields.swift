public import Foundation

/// `application/x-www-form-urlencoded` fields (a form body or a query): `+` is a space, `%XX` a
/// byte. A field given twice, or any field with a NUL, makes the whole input invalid: two values
/// for one name is how parameter-pollution attacks start.
public struct FormFields: Sendable {
    /// Every field, decoded, by name.
    public private(set) var values: [String: String] = [:]

    /// Parses `a=1&b=2`; `nil` for a broken escape, a name given twice or a NUL.
    public init?(_ text: Substring) {
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]), let value = Self.decode(parts.count == 2 ? parts[1] : ""),
                values[name] == nil, !name.utf8.contains(0), !value.utf8.contains(0)
            else { return nil }
            values[name] = value
        }
    }

    /// Parses a form body; `nil` when it is not UTF-8 or not a valid form.
    public init?(body: Data) {
        guard let text = String(data: body, encoding: .utf8) else { return nil }
        self.init(Substring(text))
    }

    /// The query of `path` (`/x?a=1`), or nil when it is malformed.
    public init?(queryOf path: String) {
        let query = path.split(separator: "?", maxSplits: 1).dropFirst().first ?? ""
        self.init(query)
    }

    /// The decoded value of the field `name`; `nil` when there is none.
    public subscript(_ name: String) -> String? { values[name] }

    /// `+` as a space and `%XX` as a byte; nil for a broken escape or bytes that are not UTF-8.
    public static func decode(_ text: Substring) -> String? {
        let utf8 = text.utf8
        guard utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Encodes `fields` for a query or a form body, in order.
    public static func encode(_ fields: [(String, String)]) -> String {
        fields.map { percentEncoded($0) + "=" + percentEncoded($1) }.joined(separator: "&")
    }

    /// `text` with everything but RFC 3986's unreserved characters (ASCII letters, digits and
    /// `-._~`) percent-encoded: one field name or value, or one half of HTTP Basic credentials
    /// (RFC 6749 §2.3.1).
    public static func percentEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
    )
}
