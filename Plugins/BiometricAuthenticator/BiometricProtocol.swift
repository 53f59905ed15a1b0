import Crypto
import Foundation
import GatehouseKernel

// The biometric plugin's messages between its two halves. The device proves a biometric match by
// signing the server's single-use nonce with a key the (simulated) OS releases only after a
// match; the server never receives a boolean it would have to trust.

enum BiometricOperation: String, Codable {
    /// Ask for a fresh nonce.
    case begin
    /// Enrolment: the new key's public half, signing the nonce.
    case register
    /// Authentication: the nonce signed with the released key.
    case prove
    /// Authentication: the scan did not match (an honest device reports it, so it counts).
    case noMatch
    /// The OS locked the sensor or invalidated the key: forget this authenticator.
    case invalidate
}

struct BiometricMessage: Codable {
    var op: BiometricOperation
    var publicKey: Data?
    var signature: Data?
}

struct BiometricChallengePayload: Codable {
    var nonce: Data
}

/// What the server half keeps between two messages: the nonce it sent.
struct BiometricSession: Codable {
    var nonce: Data
}

/// What the server keeps for an enrolled device: the public half of its biometric key.
struct BiometricRegistration: Codable {
    var publicKey: Data
}

/// What the device keeps: the key (in the simulated OS key store) and the OS enrolment it belongs to.
enum BiometricStorageKey {
    static let privateKey = "biometric.privateKey"
    static let enrollmentGeneration = "biometric.enrollmentGeneration"
}

enum BiometricCrypto {
    static let version = "gatehouse-biometric-v1"

    /// What the key signs: purpose, profile and the server's single-use nonce.
    static func signingInput(purpose: String, profile: UserProfile, nonce: Data) -> Data {
        Data("\(version)|\(purpose)|\(profile.id)|".utf8) + nonce
    }

    static func nonce() -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    static func isValid(_ signature: Data?, by publicKey: Data, over input: Data) -> Bool {
        guard let signature, let key = try? P256.Signing.PublicKey(x963Representation: publicKey),
            let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature)
        else { return false }
        return key.isValidSignature(parsed, for: input)
    }

    static func encode(_ value: some Encodable) throws -> Data { try JSONEncoder().encode(value) }
    static func decode<T: Decodable>(_ type: T.Type, _ data: Data?) -> T? {
        data.flatMap { try? JSONDecoder().decode(type, from: $0) }
    }
}
