import Crypto
public import Foundation
import GatehouseKernel

// The PIN plugin's own messages between its two halves. The PIN itself never appears in them:
// the client sends an OPRF-blinded element, the server returns the evaluation, and only the
// client can unblind it. The benchmark (Benchmarks/, a package of its own) speaks them below the
// SDK, so they are its SPI (`@_spi(Benchmarks) import PINAuthenticator`), not public API.

/// What a message from the PIN authenticator's client half asks its server half to do.
@_spi(Benchmarks)
public enum PINOperation: String, Codable, Sendable {
    /// Enrolment: ask for the policy and a fresh OPRF key's public key.
    case policy
    /// Evaluate a blinded PIN.
    case evaluate
    /// Enrolment: register the PIN-protected public key, signed.
    case commit
    /// Authentication: sign the server's nonce with the PIN-protected key.
    case prove
    /// Authentication: the PIN was wrong (the device key did not unwrap).
    case abandon
}

/// A message from the PIN authenticator's client half to its server half, as JSON.
@_spi(Benchmarks)
public struct PINMessage: Codable, Sendable {
    /// What the message asks for.
    public var op: PINOperation
    /// `evaluate`: the OPRF-blinded PIN (a P-384 element); nothing about the PIN can be read from
    /// it.
    public var blinded: Data?
    /// Authentication: SHA-256 of the OPRF public key the device holds, so the server evaluates
    /// with the registration the device has (see `PINRegistration.previous`).
    public var oprfKeyDigest: Data?
    /// `commit`: the device's new PIN-protected P-256 public key, x9.63.
    public var publicKey: Data?
    /// `commit` and `prove`: the PIN-protected key's DER ECDSA signature over
    /// `PINCrypto.signingInput(purpose:profileID:nonce:)` with the session's nonce.
    public var signature: Data?
    /// `commit`: the digest of the policy the device checked the new PIN against, so a policy that
    /// changed meanwhile is noticed.
    public var policyDigest: String?

    /// Makes a message; only `op` is required, the rest depends on it.
    public init(
        op: PINOperation,
        blinded: Data? = nil,
        oprfKeyDigest: Data? = nil,
        publicKey: Data? = nil,
        signature: Data? = nil,
        policyDigest: String? = nil
    ) {
        self.op = op
        self.blinded = blinded
        self.oprfKeyDigest = oprfKeyDigest
        self.publicKey = publicKey
        self.signature = signature
        self.policyDigest = policyDigest
    }
}

/// The PIN authenticator server half's answer to a message, as JSON.
@_spi(Benchmarks)
public struct PINChallengePayload: Codable, Sendable {
    var policy: PinPolicy?
    /// `policy`: the digest of the policy new PINs must meet, to send back with `commit`.
    public var policyDigest: String?
    /// The OPRF public key (P-384, x9.63) the device checks the evaluation against and keeps.
    public var oprfPublicKey: Data?
    /// `evaluate`: the server's evaluation of the blinded PIN, with its proof; only the device can
    /// unblind it.
    public var evaluation: Data?
    /// The server's single-use nonce (32 bytes) the PIN-protected key signs.
    public var nonce: Data?
}

/// What the server half keeps between two messages of one flow.
struct PINSession: Codable {
    var oprfKey: Data?
    var nonce: Data
    /// Authentication: the device holds the registration a PIN change replaced.
    var usesPrevious: Bool?
    /// Enrolment: whether the chosen PIN was evaluated; a commit without an evaluation is refused.
    var evaluated: Bool?
}

/// What the server keeps for an enrolled PIN: the per-user OPRF key and the public half of the
/// PIN-protected signing key. Neither lets anyone test a PIN without the device.
struct PINRegistration: Codable {
    var oprfKey: Data
    var pinPublicKey: Data
    /// The registration a PIN change replaced, kept until the device shows which one it holds.
    /// The server commits a change before the device stores its new key: a device that dies (or
    /// loses the answer) in between still holds the old key, and with only the new registration
    /// neither PIN would work again. Its first authentication settles it: with the old key the
    /// change is undone, with the new one the old registration is dropped. Kept at most
    /// ``PINRegistration/previousLifetime``.
    var previous: PreviousPIN?

    struct PreviousPIN: Codable {
        var oprfKey: Data
        var pinPublicKey: Data
        var until: Double
    }

    static let previousLifetime: Double = 7 * 86400
}

/// What the client keeps: the signing key sealed under the PIN-derived key, and the server's OPRF
/// public key (to check the server's proofs).
enum PINStorageKey {
    static let wrappedSigningKey = "pin.wrappedSigningKey"
    static let oprfPublicKey = "pin.oprfPublicKey"
}

/// The PIN authenticator's cryptography that both halves, and the benchmark, share.
@_spi(Benchmarks)
public enum PINCrypto {
    static let version = "gatehouse-pin-v1"

    /// What the PIN-protected key signs: purpose, profile and the server's single-use nonce.
    static func signingInput(purpose: String, profile: UserProfile, nonce: Data) -> Data {
        signingInput(purpose: purpose, profileID: profile.id, nonce: nonce)
    }

    /// What the PIN-protected key signs, for the profile with id `profileID`.
    public static func signingInput(purpose: String, profileID: String, nonce: Data) -> Data {
        Data("\(version)|\(purpose)|\(profileID)|".utf8) + nonce
    }

    /// The key that seals the device's PIN-protected signing key, from the OPRF output.
    static func wrappingKey(oprfOutput: Data, profile: UserProfile) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: oprfOutput),
            salt: Data(version.utf8),
            info: Data("wrap|\(profile.id)".utf8),
            outputByteCount: 32
        )
    }

    /// Names an OPRF key without revealing anything: the SHA-256 of its public key.
    public static func keyDigest(publicKey: Data) -> Data { Data(SHA256.hash(data: publicKey)) }

    static func policyDigest(_ policy: PinPolicy) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = (try? encoder.encode(policy)) ?? Data()
        return Data(SHA256.hash(data: data)).base64EncodedString()
    }

    // Made once, not per message (both are safe to share).
    private static let encoder = JSONEncoder()
    private static let decoder = JSONDecoder()

    static func encode(_ value: some Encodable) throws -> Data { try encoder.encode(value) }
    static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        try decoder.decode(type, from: data)
    }
}
