import Crypto
public import Foundation
import GatehouseKernel
import GatehouseProtocol

/// The checks OpenID Connect Core 1.0 §3.1.3.7 asks of a relying party for an ID token from the
/// token endpoint, as one value: signature, issuer, audience, authorized party, expiry, issue
/// time, nonce, authentication age and, when present, the access token's hash.
///
/// It needs no network: the caller hands it the provider's keys. ``OpenIDRelyingParty`` uses it
/// with the keys it fetched (and refetches them when a token names an unknown key).
public struct IDTokenValidator: Sendable {
    /// The provider's issuer identifier: `iss` must equal it exactly.
    public var issuer: String
    /// This client's id: `aud` must contain it, and `azp`, when present, must equal it.
    public var clientID: String
    /// How far the provider's clock may be from ours (`exp`, `iat`, `auth_time`).
    public var clockSkew: Duration

    /// A validator for tokens `issuer` issues to `clientID`.
    public init(issuer: String, clientID: String, clockSkew: Duration = .seconds(60)) {
        self.issuer = issuer
        self.clientID = clientID
        self.clockSkew = clockSkew
    }

    /// What the token is checked against besides the keys.
    public struct Expectations: Sendable {
        /// The nonce of the authorization request; `nil` only where none was sent (a refresh).
        public var nonce: String?
        /// The `max_age` the request asked for, if any: `auth_time` must then be present and
        /// no older than that.
        public var maxAge: Int?
        /// The access token issued with the ID token: checked against `at_hash` when the token has one.
        public var accessToken: String?
        /// The current time.
        public var now: Date

        /// Expectations for a token checked at `now`.
        public init(nonce: String?, maxAge: Int? = nil, accessToken: String? = nil, now: Date) {
            self.nonce = nonce
            self.maxAge = maxAge
            self.accessToken = accessToken
            self.now = now
        }
    }

    /// Checks a parsed token's signature against `keys`, then its claims; returns the claims.
    /// Throws a refusal whose reason names the check that failed (never the token itself).
    public func validate(
        _ token: JSONWebSignature,
        keys: JSONWebKeySet,
        expecting expectations: Expectations
    ) throws(JSONWebSignature.Refusal) -> IDTokenClaims {
        try token.verify(with: keys)
        let claims = try token.claims(as: IDTokenClaims.self)
        try check(claims, expecting: expectations)
        if let accessToken = expectations.accessToken,
            let hash = try? token.claims(as: AccessTokenHash.self).atHash
        {
            // Core §3.1.3.8: the left half of SHA-256 of the access token, base64url (RS256, ES256).
            let digest = Data(SHA256.hash(data: Data(accessToken.utf8)))
            guard hash == digest.prefix(16).base64URLEncodedString else {
                throw JSONWebSignature.Refusal("at_hash does not match the access token")
            }
        }
        return claims
    }

    /// The claim checks alone, for claims whose signature was checked already.
    public func check(_ claims: IDTokenClaims, expecting expectations: Expectations) throws(JSONWebSignature.Refusal) {
        let now = Int(expectations.now.timeIntervalSince1970.rounded(.down))
        let skew = Int(clockSkew.components.seconds)
        guard claims.iss == issuer else {
            throw JSONWebSignature.Refusal("iss \(Self.quoted(claims.iss)) is not the issuer \(Self.quoted(issuer))")
        }
        guard claims.aud.contains(clientID) else {
            throw JSONWebSignature.Refusal("aud does not contain the client id \(Self.quoted(clientID))")
        }
        if let azp = claims.azp {
            guard azp == clientID else {
                throw JSONWebSignature.Refusal("azp \(Self.quoted(azp)) is not the client id \(Self.quoted(clientID))")
            }
        } else if claims.aud.values.count > 1 {
            throw JSONWebSignature.Refusal("aud names several parties but the token has no azp")
        }
        guard claims.exp > now - skew else {
            throw JSONWebSignature.Refusal("the token expired \(now - claims.exp) s ago")
        }
        guard claims.iat <= now + skew else {
            throw JSONWebSignature.Refusal("iat is \(claims.iat - now) s in the future")
        }
        if let nonce = expectations.nonce {
            guard let sent = claims.nonce else { throw JSONWebSignature.Refusal("the token has no nonce") }
            guard ConstantTime.equals(sent, nonce) else {
                throw JSONWebSignature.Refusal("the nonce is not the one of the authorization request")
            }
        }
        if let maxAge = expectations.maxAge {
            guard let authTime = claims.authTime else {
                throw JSONWebSignature.Refusal("max_age was asked for but the token has no auth_time")
            }
            guard authTime + maxAge + skew >= now else {
                throw JSONWebSignature.Refusal(
                    "the user authenticated \(now - authTime) s ago, more than max_age \(maxAge)"
                )
            }
        }
    }

    /// A provider's value in a message: quoted, at most 80 characters, control characters dropped.
    static func quoted(_ text: String) -> String {
        "\""
            + String(
                String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(80))
            )
            + "\""
    }

    private struct AccessTokenHash: Decodable {
        var atHash: String?
        enum CodingKeys: String, CodingKey { case atHash = "at_hash" }
    }
}
