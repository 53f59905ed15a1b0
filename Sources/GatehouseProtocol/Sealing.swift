public import Crypto
public import Foundation

/// HPKE (RFC 9180) base mode with X25519, HKDF-SHA256 and ChaCha20-Poly1305: what a mobile
/// authentication's payload (server → device) and answer (device → server) travel in. X25519 and
/// ChaCha20-Poly1305 are fast in software on phones without AES instructions, and the suite is
/// the one RFC 9180 and MLS use most.
///
/// Each box is bound to its purpose (`info`) and to its transaction (the associated data), so a
/// box cannot be moved to another transaction or read as the other direction's.
public struct SealedBox: Codable, Sendable, Hashable {
    /// The sender's encapsulated ephemeral key (32 bytes).
    public var encapsulatedKey: Base64URLData
    /// The sealed message with its 16-byte Poly1305 tag (`ciphertext`).
    public var ciphertext: Base64URLData

    /// Creates a box from the encapsulated key and the ciphertext.
    public init(encapsulatedKey: Data, ciphertext: Data) {
        self.encapsulatedKey = Base64URLData(encapsulatedKey)
        self.ciphertext = Base64URLData(ciphertext)
    }

    enum CodingKeys: String, CodingKey {
        case encapsulatedKey = "enc"
        case ciphertext
    }

    /// What a box is for; part of the key schedule, so the two directions never mix.
    public enum Purpose: String, Sendable {
        case payload = "gatehouse/mobile-auth/payload/v1"
        case answer = "gatehouse/mobile-auth/answer/v1"
    }

    static let suite = HPKE.Ciphersuite.Curve25519_SHA256_ChachaPoly

    /// Seals `plaintext` for `recipient`, bound to `purpose` and `transactionID`.
    public static func seal(
        _ plaintext: Data,
        for recipient: Curve25519.KeyAgreement.PublicKey,
        purpose: Purpose,
        transactionID: String
    ) throws -> SealedBox {
        // RFC 9180 §7.1.4: a low-order key gives the all-zero shared secret, which anyone can
        // compute: what is sealed to it would be readable without the private key.
        guard !recipient.isLowOrder else { throw SealingError.lowOrderKey }
        var sender = try HPKE.Sender(recipientKey: recipient, ciphersuite: suite, info: Data(purpose.rawValue.utf8))
        let ciphertext = try sender.seal(plaintext, authenticating: Data(transactionID.utf8))
        return SealedBox(encapsulatedKey: sender.encapsulatedKey, ciphertext: ciphertext)
    }

    /// Opens the box with `key`; throws when it was sealed for another key, purpose or
    /// transaction, or was changed on the way.
    public func open(
        with key: Curve25519.KeyAgreement.PrivateKey,
        purpose: Purpose,
        transactionID: String
    ) throws -> Data {
        // The sender chose the encapsulated key: a low-order one would make the secret all zeros.
        guard let encapsulated = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: encapsulatedKey.data),
            (try? key.sharedSecretFromKeyAgreement(with: encapsulated))?.isAllZero == false
        else { throw SealingError.lowOrderKey }
        var recipient = try HPKE.Recipient(
            privateKey: key,
            ciphersuite: Self.suite,
            info: Data(purpose.rawValue.utf8),
            encapsulatedKey: encapsulatedKey.data
        )
        return try recipient.open(ciphertext.data, authenticating: Data(transactionID.utf8))
    }
}

/// A box that cannot be sealed or opened safely.
public enum SealingError: Error, Sendable, Equatable {
    /// A key of small order (the zero point, `01 00…`, and the others of RFC 7748 §6.1): every
    /// private key agrees with it on the all-zero secret.
    case lowOrderKey
}

extension Curve25519.KeyAgreement.PublicKey {
    /// The key from its 32 raw bytes, or nil; nil too for a low-order key, which nothing may be
    /// sealed to.
    public init?(wire: Base64URLData) {
        guard wire.data.count == 32, let key = try? Self(rawRepresentation: wire.data), !key.isLowOrder else {
            return nil
        }
        self = key
    }

    /// Whether the key is one of the points of small order, with which X25519 yields the all-zero
    /// secret whatever the private key (RFC 7748 §6.1; RFC 9180 §7.1.4). Checked as the RFC says,
    /// by the output, so every encoding of those points is caught (non-canonical ones, the top
    /// bit set): a private key's scalar is a multiple of the cofactor 8, which sends them all to
    /// zero. An agreement the library itself refuses counts as low order too.
    public var isLowOrder: Bool {
        guard let secret = try? Curve25519.KeyAgreement.PrivateKey().sharedSecretFromKeyAgreement(with: self) else {
            return true
        }
        return secret.isAllZero
    }
}

extension SharedSecret {
    fileprivate var isAllZero: Bool { withUnsafeBytes { bytes in bytes.reduce(0) { $0 | $1 } == 0 } }
}
