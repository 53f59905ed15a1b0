public import Foundation
import GatehouseProtocol

/// Compact JSON Web Signatures (RFC 7515) with the two algorithms OpenID Connect needs: the
/// header, payload and signature of a token, and their checks. Only `RS256` and `ES256` are
/// accepted: `none`, HMAC with a public key as secret, and anything else are refused before any
/// key is looked at.
public struct JSONWebSignature: Sendable {
    /// The signature algorithms this implementation signs and verifies.
    public enum Algorithm: String, Codable, Sendable, CaseIterable {
        /// RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3): mandatory for OpenID providers.
        case rs256 = "RS256"
        /// ECDSA with P-256 and SHA-256 (RFC 7518 §3.4).
        case es256 = "ES256"
    }

    /// The protected header's members that matter here.
    public struct Header: Codable, Sendable, Equatable {
        /// The algorithm.
        public var alg: String
        /// The signing key's id.
        public var kid: String?
        /// The token type (`JWT`, `logout+jwt`, …).
        public var typ: String?

        /// A header for `alg`, `kid` and `typ`.
        public init(alg: String, kid: String?, typ: String?) {
            self.alg = alg
            self.kid = kid
            self.typ = typ
        }
    }

    /// Why a token was not accepted.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// What was wrong, for logs and error descriptions (never the token itself).
        public var reason: String
        /// A refusal for `reason`.
        public init(_ reason: String) { self.reason = reason }
        /// The reason.
        public var description: String { reason }
    }

    /// The decoded protected header.
    public let header: Header
    /// The algorithm the header names (one of the two accepted).
    public let algorithm: Algorithm
    /// The payload's bytes (the claims, for a JWT).
    public let payload: Data
    /// `header.payload` as sent: what the signature covers.
    public let signingInput: Data
    /// The signature's bytes.
    public let signature: Data

    /// The largest token read (bytes): ID and logout tokens are a few kilobytes.
    public static let maxLength = 16_384

    /// Splits and decodes a compact token; checks nothing about its signature yet.
    public init(compact token: String) throws(Refusal) {
        guard token.utf8.count <= Self.maxLength else { throw Refusal("the token is too long") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Data(base64URLEncoded: parts[0]),
            let payload = Data(base64URLEncoded: parts[1]), let signature = Data(base64URLEncoded: parts[2])
        else { throw Refusal("the token is not a compact JWS") }
        guard let header = try? JSONDecoder().decode(Header.self, from: headerBytes) else {
            throw Refusal("the token's header is not readable")
        }
        guard let algorithm = Algorithm(rawValue: header.alg) else {
            throw Refusal("the token's algorithm \(header.alg.prefix(16)) is not accepted")
        }
        self.header = header
        self.algorithm = algorithm
        self.payload = payload
        self.signature = signature
        signingInput = Data(parts[0].utf8) + Data(".".utf8) + Data(parts[1].utf8)
    }

    /// Checks the signature against `keys`: a key with the header's `kid` (or, when it names none,
    /// any key of the algorithm's type) must verify it. Returns the key that did.
    @discardableResult
    public func verify(with keys: JSONWebKeySet) throws(Refusal) -> JSONWebKey {
        let candidates = keys.candidates(kid: header.kid, algorithm: algorithm)
        guard !candidates.isEmpty else { throw Refusal("the token's signing key is not among the published keys") }
        for key in candidates where key.verifies(signature, over: signingInput, algorithm: algorithm) {
            return key
        }
        throw Refusal("the token's signature does not verify")
    }

    /// The payload decoded as `Claims`.
    public func claims<Claims: Decodable>(as type: Claims.Type = Claims.self) throws(Refusal) -> Claims {
        do {
            return try JSONDecoder().decode(Claims.self, from: payload)
        } catch {
            throw Refusal("the token's claims are not readable")
        }
    }

    /// A compact token: `claims` encoded as JSON, signed by `key`, its header naming the key's id
    /// and `type`.
    public static func sign(_ claims: some Encodable, with key: SigningKey, type: String = "JWT") throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = try encoder.encode(Header(alg: key.algorithm.rawValue, kid: key.kid, typ: type))
        let input = header.base64URLEncodedString + "." + (try encoder.encode(claims)).base64URLEncodedString
        return input + "." + (try key.signature(for: Data(input.utf8))).base64URLEncodedString
    }
}
