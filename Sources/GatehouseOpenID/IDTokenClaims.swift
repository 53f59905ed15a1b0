import Foundation

/// The claims of an OpenID Connect ID token (Core 1.0 §2) that Gatehouse issues and checks, plus
/// the standard profile and email claims a provider may add.
public struct IDTokenClaims: Codable, Sendable, Equatable {
    /// The issuer: the provider's exact issuer URL.
    public var iss: String
    /// The subject: the user's identifier at the issuer.
    public var sub: String
    /// The audience: the client ids it is for (one string or an array on the wire).
    public var aud: Audience
    /// Expiry, seconds since 1970.
    public var exp: Int
    /// Issue time, seconds since 1970.
    public var iat: Int
    /// When the user last authenticated, seconds since 1970.
    public var authTime: Int?
    /// The client's nonce from the authorization request, echoed.
    public var nonce: String?
    /// The authentication context class reached.
    public var acr: String?
    /// The authentication methods used (RFC 8176 values: `pwd`, `pin`, `face`, `fpt`, `hwk`, …).
    public var amr: [String]?
    /// The party the token was issued to, when the audience has several members.
    public var azp: String?
    /// The provider's session id (Back-Channel Logout 1.0 §2.1).
    public var sid: String?
    /// `email` scope: the address.
    public var email: String?
    /// `email` scope: whether the provider verified the address.
    public var emailVerified: Bool?
    /// `profile` scope: the full name.
    public var name: String?
    /// `profile` scope: the name the user goes by at the provider.
    public var preferredUsername: String?

    private enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nonce, acr, amr, azp, sid, email, name
        case authTime = "auth_time"
        case emailVerified = "email_verified"
        case preferredUsername = "preferred_username"
    }

    /// Claims with the required members; the rest start empty.
    public init(iss: String, sub: String, aud: String, exp: Int, iat: Int) {
        self.iss = iss
        self.sub = sub
        self.aud = Audience([aud])
        self.exp = exp
        self.iat = iat
    }

    /// Reads the claims. `email_verified` may come as a boolean or as the string "true"/"false"
    /// (some providers send strings); anything else is read as not verified.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        iss = try container.decode(String.self, forKey: .iss)
        sub = try container.decode(String.self, forKey: .sub)
        aud = try container.decode(Audience.self, forKey: .aud)
        guard let exp = try Self.seconds(container, .exp), let iat = try Self.seconds(container, .iat) else {
            throw DecodingError.dataCorruptedError(
                forKey: .exp,
                in: container,
                debugDescription: "exp and iat are required NumericDates"
            )
        }
        self.exp = exp
        self.iat = iat
        authTime = try Self.seconds(container, .authTime)
        nonce = try container.decodeIfPresent(String.self, forKey: .nonce)
        acr = try container.decodeIfPresent(String.self, forKey: .acr)
        amr = try container.decodeIfPresent([String].self, forKey: .amr)
        azp = try container.decodeIfPresent(String.self, forKey: .azp)
        sid = try container.decodeIfPresent(String.self, forKey: .sid)
        email = try container.decodeIfPresent(String.self, forKey: .email)
        if let flag = try? container.decodeIfPresent(Bool.self, forKey: .emailVerified) {
            emailVerified = flag
        } else if let text = try? container.decodeIfPresent(String.self, forKey: .emailVerified) {
            emailVerified = text.lowercased() == "true"
        }
        name = try container.decodeIfPresent(String.self, forKey: .name)
        preferredUsername = try container.decodeIfPresent(String.self, forKey: .preferredUsername)
    }

    /// NumericDate: an integer, or a number with a fraction (cut to whole seconds).
    private static func seconds(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Int? {
        guard let value = try container.decodeIfPresent(Double.self, forKey: key), value.isFinite,
            abs(value) < 1e12
        else { return nil }
        return Int(value)
    }
}

/// `aud`: one client id or several. Encoded as a string when there is one, as JWTs usually do.
public struct Audience: Codable, Sendable, Equatable {
    /// The client ids.
    public var values: [String]

    /// An audience of `values`.
    public init(_ values: [String]) { self.values = values }

    /// Whether `clientID` is among them.
    public func contains(_ clientID: String) -> Bool { values.contains(clientID) }

    /// Reads a string or an array of strings.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let one = try? container.decode(String.self) {
            values = [one]
        } else {
            values = try container.decode([String].self)
        }
    }

    /// Writes one value as a string, several as an array.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if values.count == 1, let one = values.first { try container.encode(one) } else { try container.encode(values) }
    }
}
