import Crypto
import _CryptoExtras

/// A COSE algorithm identifier (IANA "COSE Algorithms") this relying party accepts.
public enum COSEAlgorithm: Int, Sendable, Hashable, CaseIterable, Codable {
    /// ECDSA over P-256 with SHA-256; WebAuthn signatures are DER-encoded.
    case es256 = -7
    /// EdDSA; this relying party accepts Ed25519 keys.
    case edDSA = -8
    /// RSASSA-PKCS1-v1_5 with SHA-256, moduli of 2048 bits or more.
    case rs256 = -257
}

/// A credential public key in the COSE_Key format (RFC 8152 §7, RFC 8230): EC2 P-256 (ES256), OKP
/// Ed25519 (EdDSA) or RSA (RS256).
///
/// Keep ``bytes`` for the credential and make the key again from them at sign-in:
/// `try COSEKey(bytes: stored)` checks them as strictly as registration did.
public struct COSEKey: Sendable, Hashable {
    /// The algorithm the key signs with (its `alg` parameter, label 3).
    public let algorithm: COSEAlgorithm
    /// The key's COSE encoding, as the authenticator sent it.
    public let bytes: [UInt8]

    private let verifier: Verifier

    /// Parses a COSE_Key and makes a key that verifies signatures.
    ///
    /// Refuses trailing bytes, an `alg` other than −7, −8 and −257, a key type or curve that does
    /// not go with its `alg`, coordinates of the wrong length or off the curve, and RSA moduli
    /// shorter than 2048 bits.
    public init(bytes: some Collection<UInt8>) throws(WebAuthnError) {
        let encoded = Array(bytes)
        let item = try CBORDecoder.decode(encoded)
        try self.init(item, encoded: encoded)
    }

    init(_ item: CBOR, encoded: [UInt8]) throws(WebAuthnError) {
        guard case .map = item else { throw .malformed("the COSE key is not a map") }
        guard let keyType = item[1]?.integer else { throw .malformed("the COSE key has no key type") }
        guard let alg = item[3]?.integer else { throw .malformed("the COSE key has no algorithm") }
        guard let algorithm = COSEAlgorithm(rawValue: alg) else { throw .unsupportedAlgorithm(alg) }
        switch (algorithm, keyType) {
        case (.es256, 2):
            guard item[-1]?.integer == 1 else { throw .unsupportedKey("an ES256 key must be on the curve P-256 (1)") }
            guard case .bytes(let x)? = item[-2], case .bytes(let y)? = item[-3], x.count == 32, y.count == 32 else {
                throw .malformed("a P-256 key needs 32-byte x and y coordinates")
            }
            do {
                verifier = .p256(try P256.Signing.PublicKey(x963Representation: [0x04] + x + y))
            } catch {
                throw .unsupportedKey("the point is not on the curve P-256")
            }
        case (.edDSA, 1):
            guard item[-1]?.integer == 6 else { throw .unsupportedKey("an EdDSA key must be on the curve Ed25519 (6)") }
            guard case .bytes(let x)? = item[-2], x.count == 32 else {
                throw .malformed("an Ed25519 key needs a 32-byte x")
            }
            // With a key of small order anyone forges signatures (S = 0 and a small-order R
            // verify for a quarter of all messages); a non-canonical encoding is one of them.
            guard !Self.isWeakEd25519(x) else {
                throw .unsupportedKey("a small-order or non-canonical Ed25519 point")
            }
            do {
                verifier = .ed25519(try Curve25519.Signing.PublicKey(rawRepresentation: x))
            } catch {
                throw .unsupportedKey("not an Ed25519 public key")
            }
        case (.rs256, 3):
            guard case .bytes(let modulus)? = item[-1], case .bytes(let exponent)? = item[-2] else {
                throw .malformed("an RSA key needs n and e")
            }
            let n = modulus.drop { $0 == 0 }
            let e = exponent.drop { $0 == 0 }
            guard n.count <= 1024 else { throw .unsupportedKey("the RSA modulus is longer than 8192 bits") }
            guard !e.isEmpty, e.count <= 4 else { throw .unsupportedKey("the RSA exponent is out of range") }
            guard n.count * 8 >= 2048 else { throw .unsupportedKey("the RSA modulus is shorter than 2048 bits") }
            do {
                verifier = .rsa(try _RSA.Signing.PublicKey(n: Array(n), e: Array(e)))
            } catch {
                throw .unsupportedKey("not a usable RSA public key")
            }
        default:
            throw .unsupportedKey("key type \(keyType) does not go with algorithm \(alg)")
        }
        self.algorithm = algorithm
        self.bytes = encoded
    }

    /// The encodings (sign bit cleared) of the Ed25519 points of order 1, 2, 4 and 8.
    private static let smallOrderEd25519: [[UInt8]] = [
        [0x01] + [UInt8](repeating: 0, count: 31),
        [0xEC] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
        [UInt8](repeating: 0, count: 32),
        [
            0x26, 0xE8, 0x95, 0x8F, 0xC2, 0xB2, 0x27, 0xB0, 0x45, 0xC3, 0xF4, 0x89, 0xF2, 0xEF, 0x98, 0xF0,
            0xD5, 0xDF, 0xAC, 0x05, 0xD3, 0xC6, 0x33, 0x39, 0xB1, 0x38, 0x02, 0x88, 0x6D, 0x53, 0xFC, 0x05,
        ],
        [
            0xC7, 0x17, 0x6A, 0x70, 0x3D, 0x4D, 0xD8, 0x4F, 0xBA, 0x3C, 0x0B, 0x76, 0x0D, 0x10, 0x67, 0x0F,
            0x2A, 0x20, 0x53, 0xFA, 0x2C, 0x39, 0xCC, 0xC6, 0x4E, 0xC7, 0xFD, 0x77, 0x92, 0xAC, 0x03, 0x7A,
        ],
    ]

    /// Whether `x` encodes y ≥ p (non-canonical) or a point of small order.
    static func isWeakEd25519(_ x: [UInt8]) -> Bool {
        var y = x
        y[31] &= 0x7F
        let atLeastP = y[0] >= 0xED && y[1..<31].allSatisfy { $0 == 0xFF } && y[31] == 0x7F
        return atLeastP || smallOrderEd25519.contains(y)
    }

    /// Whether `signature` is this key's signature over `data` under ``algorithm``: DER-encoded
    /// ECDSA for ES256, the 64-byte signature for EdDSA, PKCS #1 v1.5 with SHA-256 for RS256.
    public func isValidSignature(_ signature: some Collection<UInt8>, for data: some Collection<UInt8>) -> Bool {
        verifier.isValidSignature(Array(signature), for: Array(data))
    }

    /// Keys are equal when their encodings are.
    public static func == (lhs: COSEKey, rhs: COSEKey) -> Bool { lhs.bytes == rhs.bytes }

    /// Hashes the encoding.
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }
}

/// A public key that checks signatures with one algorithm: a credential's or an attestation
/// certificate's.
enum Verifier: Sendable {
    case p256(P256.Signing.PublicKey)
    case ed25519(Curve25519.Signing.PublicKey)
    case rsa(_RSA.Signing.PublicKey)

    func isValidSignature(_ signature: [UInt8], for data: [UInt8]) -> Bool {
        switch self {
        case .p256(let key):
            guard let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(parsed, for: data)
        case .ed25519(let key):
            guard signature.count == 64 else { return false }
            return key.isValidSignature(signature, for: data)
        case .rsa(let key):
            let parsed = _RSA.Signing.RSASignature(rawRepresentation: signature)
            return key.isValidSignature(parsed, for: data, padding: .insecurePKCS1v1_5)
        }
    }
}
