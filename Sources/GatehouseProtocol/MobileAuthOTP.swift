import Foundation

/// The single-use code of an OTP mobile authentication: what a portal shows (usually as a QR
/// code) and the app scans, or the user types. As in the seed's SDK it is base64 of a JSON
/// object naming the transaction and the code (`{"transaction_id":…,"otp":…}`), here base64url
/// without padding so it survives URLs and QR codes' alphanumeric-unfriendly bytes alike.
public struct MobileAuthOTP: Sendable, Hashable {
    /// The transaction the code belongs to.
    public var transactionID: String
    /// The secret part: 128 random bits, base64url. The server keeps only its SHA-256.
    public var code: String

    /// A code for `transactionID`.
    public init(transactionID: String, code: String) {
        self.transactionID = transactionID
        self.code = code
    }

    /// Reads a scanned or typed code; nil when `text` is not one (surrounding white space is
    /// ignored). Both parts must be 16 to 64 base64url characters.
    public init?(_ text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.utf8.count <= 256, let json = Data(base64URLEncoded: trimmed),
            let fields = try? WireCoding.decode(Fields.self, from: json),
            Self.isToken(fields.transactionID), Self.isToken(fields.otp)
        else { return nil }
        self.init(transactionID: fields.transactionID, code: fields.otp)
    }

    /// The code as the app scans it.
    public var text: String {
        // Both parts are base64url, so they need no JSON escaping.
        Data("{\"transaction_id\":\"\(transactionID)\",\"otp\":\"\(code)\"}".utf8).base64URLEncodedString
    }

    private static func isToken(_ value: String) -> Bool {
        (16...64).contains(value.utf8.count) && Data(base64URLEncoded: value) != nil
    }

    private struct Fields: Decodable {
        var transactionID: String
        var otp: String
        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id"
            case otp
        }
    }
}

/// `POST /v1/mobile-auth/otp?profile=ID`, signed with the profile key: the device claims the
/// transaction of a code it scanned. The answer is a ``MobileAuthEvent``: the request and its
/// payload sealed for this device; the device answers it as it answers a push.
public struct MobileAuthOTPClaim: Codable, Sendable {
    /// The scanned code, a ``MobileAuthOTP``'s text.
    public var otp: String
    /// Creates a claim for a scanned code.
    public init(otp: String) { self.otp = otp }
}
