import Crypto
public import Foundation
import GatehouseProtocol
import _CryptoExtras

/// A private key that signs tokens: RSA 2048 for RS256 or P-256 for ES256, with its key id.
/// Stored as PKCS#8 PEM (``pem``) and read back with ``init(algorithm:kid:pem:)``.
public struct SigningKey: Sendable {
    private enum Storage: Sendable {
        case rsa(_RSA.Signing.PrivateKey)
        case p256(P256.Signing.PrivateKey)
    }

    private let storage: Storage
    /// The key id published in the JWKS and named in each token's header.
    public let kid: String
    /// What it signs with.
    public var algorithm: JSONWebSignature.Algorithm {
        switch storage {
        case .rsa: .rs256
        case .p256: .es256
        }
    }

    /// A new key for `algorithm` with a random key id (RSA keys are 2048 bits; generating one
    /// takes tens of milliseconds).
    public static func generate(_ algorithm: JSONWebSignature.Algorithm) throws -> SigningKey {
        let kid = Data.random(count: 12).base64URLEncodedString
        switch algorithm {
        case .rs256: return SigningKey(storage: .rsa(try _RSA.Signing.PrivateKey(keySize: .bits2048)), kid: kid)
        case .es256: return SigningKey(storage: .p256(P256.Signing.PrivateKey()), kid: kid)
        }
    }

    private init(storage: Storage, kid: String) {
        self.storage = storage
        self.kid = kid
    }

    /// Reads a stored key: PKCS#8 PEM of the algorithm's key type.
    public init(algorithm: JSONWebSignature.Algorithm, kid: String, pem: String) throws {
        switch algorithm {
        case .rs256: storage = .rsa(try _RSA.Signing.PrivateKey(pemRepresentation: pem))
        case .es256: storage = .p256(try P256.Signing.PrivateKey(pemRepresentation: pem))
        }
        self.kid = kid
    }

    /// The private key as PKCS#8 PEM, for the store.
    public var pem: String {
        switch storage {
        case .rsa(let key): key.pkcs8PEMRepresentation
        case .p256(let key): key.pemRepresentation
        }
    }

    /// The public half as a JWK with this key's id.
    public func publicJWK() throws -> JSONWebKey {
        switch storage {
        case .rsa(let key): try JSONWebKey(key.publicKey, kid: kid)
        case .p256(let key): JSONWebKey(key.publicKey, kid: kid)
        }
    }

    /// The signature over `input`: PKCS#1 v1.5 with SHA-256, or ECDSA P-256 in JOSE's raw form.
    public func signature(for input: Data) throws -> Data {
        switch storage {
        case .rsa(let key):
            try key.signature(for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5).rawRepresentation
        case .p256(let key): try key.signature(for: input).rawRepresentation
        }
    }
}
