import Foundation
import GatehouseProtocol

/// A compact JWS (RFC 7515) as the push services read them: `header.claims.signature`, each
/// part base64url without padding, the header and claims as JSON with sorted keys.
enum CompactJWS {
    /// `claims` signed by `sign` (which gets the signing input) under `header`.
    static func make(
        header: [String: String],
        claims: some Encodable,
        sign: (Data) throws -> Data
    ) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let input =
            (try encoder.encode(header)).base64URLEncodedString + "."
            + (try encoder.encode(claims)).base64URLEncodedString
        return input + "." + (try sign(Data(input.utf8))).base64URLEncodedString
    }
}
