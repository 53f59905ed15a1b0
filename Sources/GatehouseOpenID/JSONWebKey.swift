public import Crypto
public import Foundation
import GatehouseProtocol
public import _CryptoExtras

/// A public key as a JSON Web Key (RFC 7517) of the two kinds OpenID Connect signs with: RSA
/// (`kty` RSA, for RS256, the algorithm every provider must offer) and P-256 (`kty` EC, for
/// ES256). Unknown members are ignored, so a provider's JWKS with other keys in it still reads.
public struct JSONWebKey: Codable, Hashable, Sendable {
    /// `RSA` or `EC`.
    public var kty: String
    /// The key id that a token's header names (`kid`).
    public var kid: String?
    /// The algorithm the key is for (`RS256`, `ES256`), when the set says.
    public var alg: String?
    /// `sig` for signing keys; keys for encryption (`enc`) are never used to verify.
    public var use: String?
    /// RSA: the modulus, base64url, big-endian.
    public var n: String?
    /// RSA: the public exponent, base64url, big-endian.
    public var e: String?
    /// EC: the curve (`P-256`).
    public var crv: String?
    /// EC: the point's x coordinate, base64url.
    public var x: String?
    /// EC: the point's y coordinate, base64url.
    public var y: String?

    /// The JWK of an RSA public key, for `alg` RS256.
    public init(_ key: _RSA.Signing.PublicKey, kid: String) throws {
        let primitives = try key.getKeyPrimitives()
        kty = "RSA"
        self.kid = kid
        alg = JSONWebSignature.Algorithm.rs256.rawValue
        use = "sig"
        n = primitives.modulus.base64URLEncodedString
        e = primitives.publicExponent.base64URLEncodedString
    }

    /// The JWK of a P-256 public key, for `alg` ES256.
    public init(_ key: P256.Signing.PublicKey, kid: String) {
        let raw = key.rawRepresentation
        kty = "EC"
        self.kid = kid
        alg = JSONWebSignature.Algorithm.es256.rawValue
        use = "sig"
        crv = "P-256"
        x = raw.prefix(32).base64URLEncodedString
        y = raw.suffix(32).base64URLEncodedString
    }

    /// Whether a signature made with `algorithm` over `signingInput` is this key's: the key must
    /// be of that algorithm's type (and, when the set names one, of that `alg`), a signing key,
    /// and at least 2048 bits when RSA.
    public func verifies(
        _ signature: Data,
        over signingInput: some DataProtocol,
        algorithm: JSONWebSignature.Algorithm
    ) -> Bool {
        if let alg, alg != algorithm.rawValue { return false }
        if let use, use != "sig" { return false }
        switch algorithm {
        case .rs256:
            guard kty == "RSA", let n = n.flatMap({ Data(base64URLEncoded: $0) }),
                let e = e.flatMap({ Data(base64URLEncoded: $0) }),
                let key = try? _RSA.Signing.PublicKey(n: n, e: e), key.keySizeInBits >= 2048
            else { return false }
            return key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature),
                for: SHA256.hash(data: Data(signingInput)),
                padding: .insecurePKCS1v1_5
            )
        case .es256:
            guard kty == "EC", crv == "P-256", let x = x.flatMap({ Data(base64URLEncoded: $0) }),
                let y = y.flatMap({ Data(base64URLEncoded: $0) }), x.count == 32, y.count == 32,
                let key = try? P256.Signing.PublicKey(rawRepresentation: x + y),
                let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
            else { return false }
            return key.isValidSignature(parsed, for: SHA256.hash(data: Data(signingInput)))
        }
    }
}

/// A JSON Web Key Set (RFC 7517 §5): what a provider publishes at its `jwks_uri`.
public struct JSONWebKeySet: Codable, Hashable, Sendable {
    /// The keys, in the provider's order.
    public var keys: [JSONWebKey]

    /// A set of `keys`.
    public init(keys: [JSONWebKey]) { self.keys = keys }

    /// Reads a set, keeping only the members it knows of each key; throws when `keys` is missing.
    public init(json: Data) throws { self = try JSONDecoder().decode(Self.self, from: json) }

    /// The keys a token whose header says `kid` and `algorithm` may have been signed with: the key
    /// with that id, or, when the token names none, every key of the algorithm's type.
    public func candidates(kid: String?, algorithm: JSONWebSignature.Algorithm) -> [JSONWebKey] {
        let type = algorithm == .rs256 ? "RSA" : "EC"
        if let kid { return keys.filter { $0.kid == kid && $0.kty == type } }
        return keys.filter { $0.kty == type }
    }
}
