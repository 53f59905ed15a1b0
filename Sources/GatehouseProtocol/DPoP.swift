public import Crypto
public import Foundation

/// A P-256 public key as a JSON Web Key (RFC 7517), the form DPoP proofs carry.
public struct PublicJWK: Codable, Hashable, Sendable {
    public var kty: String
    public var crv: String
    public var x: String
    public var y: String

    public init(_ key: P256.Signing.PublicKey) {
        let raw = key.rawRepresentation
        kty = "EC"
        crv = "P-256"
        x = raw.prefix(32).base64URLEncodedString
        y = raw.suffix(32).base64URLEncodedString
    }

    /// The key, when this is a valid P-256 point.
    public func publicKey() -> P256.Signing.PublicKey? {
        guard kty == "EC", crv == "P-256", let x = Data(base64URLEncoded: x), let y = Data(base64URLEncoded: y),
            x.count == 32, y.count == 32
        else { return nil }
        return try? P256.Signing.PublicKey(rawRepresentation: x + y)
    }

    /// The RFC 7638 thumbprint: base64url SHA-256 of the required members in lexicographic order.
    public var thumbprint: String {
        let canonical = #"{"crv":"\#(crv)","kty":"\#(kty)","x":"\#(x)","y":"\#(y)"}"#
        return Data(SHA256.hash(data: Data(canonical.utf8))).base64URLEncodedString
    }
}

/// DPoP proofs (RFC 9449): a JWT signed with the device's key for every request, binding tokens
/// to the key so a copied token is useless on another device.
public enum DPoP {
    /// Seconds a proof's `iat` may differ from the server's clock.
    public static let allowedClockSkew: TimeInterval = 60
    /// The longest proof accepted, in bytes.
    public static let maximumProofLength = 4096

    struct Header: Codable {
        var typ: String
        var alg: String
        var jwk: PublicJWK
    }

    struct Claims: Codable {
        var jti: String
        var htm: String
        var htu: String
        var iat: Int64
        var ath: String?
    }

    /// A proof for one request.
    /// - Parameters:
    ///   - url: The request's URL; servers compare its path.
    ///   - accessToken: The access token sent with the request, if any; its hash goes into `ath`.
    public static func proof(
        method: String,
        url: String,
        accessToken: String? = nil,
        key: P256.Signing.PrivateKey,
        now: Date
    ) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let header = try encoder.encode(Header(typ: "dpop+jwt", alg: "ES256", jwk: PublicJWK(key.publicKey)))
        let claims = try encoder.encode(
            Claims(
                jti: Data.random(count: 16).base64URLEncodedString,
                htm: method,
                htu: url,
                iat: Int64(now.timeIntervalSince1970),
                ath: accessToken.map(accessTokenHash)
            )
        )
        let signingInput = header.base64URLEncodedString + "." + claims.base64URLEncodedString
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + signature.rawRepresentation.base64URLEncodedString
    }

    /// `ath`: base64url SHA-256 of the access token.
    public static func accessTokenHash(_ token: String) -> String {
        Data(SHA256.hash(data: Data(token.utf8))).base64URLEncodedString
    }

    /// What a valid proof establishes.
    public struct VerifiedProof: Sendable, Equatable {
        /// The thumbprint of the key that signed the proof.
        public var keyThumbprint: String
        public var publicKey: PublicJWK
        /// The proof's unique id; the server refuses a second proof with the same id.
        public var jti: String
        public var issuedAt: Date
    }

    /// Why a proof was refused.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    /// Checks a proof: its form, signature, method, path, age and access-token hash. The caller
    /// checks that `jti` was not seen before.
    public static func verify(
        _ proof: String,
        method: String,
        path: String,
        accessToken: String?,
        now: Date
    ) throws(Refusal) -> VerifiedProof {
        guard proof.utf8.count <= maximumProofLength else { throw Refusal(reason: "the DPoP proof is too long") }
        let parts = proof.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Data(base64URLEncoded: parts[0]),
            let claimsData = Data(base64URLEncoded: parts[1]), let signatureData = Data(base64URLEncoded: parts[2])
        else { throw Refusal(reason: "the DPoP proof is not a compact JWS") }
        let decoder = JSONDecoder()
        guard let header = try? decoder.decode(Header.self, from: headerData),
            let claims = try? decoder.decode(Claims.self, from: claimsData)
        else { throw Refusal(reason: "the DPoP proof's header or claims are malformed") }
        guard header.typ == "dpop+jwt", header.alg == "ES256" else {
            throw Refusal(reason: "the DPoP proof must have typ dpop+jwt and alg ES256")
        }
        guard let key = header.jwk.publicKey() else { throw Refusal(reason: "the DPoP proof's jwk is not a P-256 key") }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            key.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else { throw Refusal(reason: "the DPoP proof's signature is not valid") }
        guard claims.htm == method else { throw Refusal(reason: "the DPoP proof is for another method") }
        guard let proofPath = URLComponents(string: claims.htu)?.path, proofPath == path else {
            throw Refusal(reason: "the DPoP proof is for another URL")
        }
        let issuedAt = Date(timeIntervalSince1970: TimeInterval(claims.iat))
        guard abs(issuedAt.timeIntervalSince(now)) <= allowedClockSkew else {
            throw Refusal(reason: "the DPoP proof is too old or from the future; check the device clock")
        }
        guard (16...64).contains(claims.jti.utf8.count) else {
            throw Refusal(reason: "the DPoP proof's jti is malformed")
        }
        if let accessToken {
            guard let ath = claims.ath, constantTimeEquals(Data(ath.utf8), Data(accessTokenHash(accessToken).utf8))
            else {
                throw Refusal(reason: "the DPoP proof is not bound to this access token")
            }
        }
        return VerifiedProof(
            keyThumbprint: header.jwk.thumbprint,
            publicKey: header.jwk,
            jti: claims.jti,
            issuedAt: issuedAt
        )
    }
}

/// Compares two byte strings in time that depends only on their lengths.
public func constantTimeEquals(_ lhs: Data, _ rhs: Data) -> Bool {
    guard lhs.count == rhs.count else { return false }
    var difference: UInt8 = 0
    for (left, right) in zip(lhs, rhs) { difference |= left ^ right }
    return difference == 0
}
