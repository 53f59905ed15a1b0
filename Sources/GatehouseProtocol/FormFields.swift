public import Foundation

/// `application/x-www-form-urlencoded` fields (a form body or a query): `+` is a space, `%XX` a
/// byte. A field given twice, or any field with a NUL, makes the whole input invalid: two values
/// for one name is how parameter-pollution attacks start.
public struct FormFields: Sendable {
    public private(set) var values: [String: String] = [:]

    public init?(_ text: Substring) {
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]), let value = Self.decode(parts.count == 2 ? parts[1] : ""),
                values[name] == nil, !name.utf8.contains(0), !value.utf8.contains(0)
            else { return nil }
            values[name] = value
        }
    }

    public init?(body: Data) {
        guard let text = String(data: body, encoding: .utf8) else { return nil }
        self.init(Substring(text))
    }

    /// The query of `path` (`/x?a=1`), or nil when it is malformed.
    public init?(queryOf path: String) {
        let query = path.split(separator: "?", maxSplits: 1).dropFirst().first ?? ""
        self.init(query)
    }

    public subscript(_ name: String) -> String? { values[name] }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    /// Encodes `fields` for a query, in order.
    public static func encode(_ fields: [(String, String)]) -> String {
        // RFC 3986's unreserved characters, ASCII only.
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return fields.map { name, value in
            "\(name.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")="
                + (value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")
        }
        .joined(separator: "&")
    }
}
