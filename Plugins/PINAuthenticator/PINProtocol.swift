import Crypto
public import Foundation
import GatehouseKernel

// The PIN plugin's own messages between its two halves. The PIN itself never appears in them:
// the client sends an OPRF-blinded element, the server returns the evaluation, and only the
// client can unblind it. The benchmark (Benchmarks/, a package of its own) speaks them below the
// SDK, so they are its SPI (`@_spi(Benchmarks) import PINAuthenticator`), not public API.

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

@_spi(Benchmarks)
public struct PINMessage: Codable, Sendable {
    public var op: PINOperation
    public var blinded: Data?
    /// Authentication: SHA-256 of the OPRF public key the device holds, so the server evaluates
    /// with the registration the device has (see `PINRegistration.previous`).
    public var oprfKeyDigest: Data?
    public var publicKey: Data?
    public var signature: Data?
    public var policyDigest: String?

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

@_spi(Benchmarks)
public struct PINChallengePayload: Codable, Sendable {
    var policy: PinPolicy?
    public var policyDigest: String?
    public var oprfPublicKey: Data?
    public var evaluation: Data?
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
