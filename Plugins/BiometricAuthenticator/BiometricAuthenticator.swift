import Crypto
import Foundation
public import GatehouseKernel

// A SIMULATION. `biometric.simulated` shows every biometric flow of the seed SDK — default and
// custom prompts, fallback to the PIN, cancel, a sensor lockout or an OS-invalidated key that
// deregisters the authenticator — on machines without a sensor. Its "OS key store" is the SDK's
// sealed plugin storage, so anyone with the device's data can use the key without a scan: never
// configure it in production. A real device half keeps the key in the Secure Enclave (or Android
// Keystore) behind LocalAuthentication (BiometricPrompt) and replaces `SimulatedBiometricSensor`;
// the server half and the messages stay as they are.

/// The client half: the app is asked first (scan, PIN or cancel), then the sensor; a match
/// releases the device key, which signs the server's nonce.
public struct BiometricAuthenticator: Authenticator {
    /// This authenticator as the manifest configures it: its id, name and plugin type.
    public let descriptor: AuthenticatorDescriptor
    /// The simulated sensor that answers the scans, in place of the OS's biometric prompt.
    public let sensor: SimulatedBiometricSensor
    /// The prompt shown when the app answers `.defaultPrompt`.
    public static let defaultPrompt = "Confirm it's you"

    /// Makes the client half with `sensor`.
    public init(descriptor: AuthenticatorDescriptor, sensor: SimulatedBiometricSensor) {
        self.descriptor = descriptor
        self.sensor = sensor
    }

    /// Creates the device key (no scan: making an OS biometric key needs none) and registers its
    /// public half by signing the server's nonce.
    public func enroll(_ context: AuthenticatorContext) async throws -> AuthenticatorResult {
        let nonce = try await challenge(context.server.send(BiometricCrypto.encode(BiometricMessage(op: .begin))))
        let key = P256.Signing.PrivateKey()
        let signature = try key.signature(
            for: BiometricCrypto.signingInput(purpose: "enrol", profile: context.profile, nonce: nonce)
        )
        let reply = try await context.server.send(
            BiometricCrypto.encode(
                BiometricMessage(
                    op: .register,
                    publicKey: key.publicKey.x963Representation,
                    signature: signature.derRepresentation
                )
            )
        )
        guard case .completed = reply else { throw malformed("the server did not finish the enrolment") }
        try await context.storage.setValue(key.rawRepresentation, forKey: BiometricStorageKey.privateKey)
        try await context.storage.setValue(
            Data(String(await sensor.enrollmentGeneration).utf8),
            forKey: BiometricStorageKey.enrollmentGeneration
        )
        return .completed(info: nil)
    }

    /// Authenticates: asks the app (scan, PIN or cancel), scans, and on a match signs the server's
    /// nonce with the device key. A failed scan is counted on the server; a lockout or an
    /// invalidated key deregisters the authenticator and falls back to the PIN. Throws
    /// `GenericError` `actionCancelled` when the app cancels.
    public func authenticate(_ context: AuthenticatorContext) async throws -> AuthenticatorResult {
        let answer = await context.responder.biometric(
            BiometricChallenge(
                profile: context.profile,
                authenticator: descriptor,
                error: context.previousError,
                failureCounts: context.failureCounts
            )
        )
        let prompt: String
        switch answer {
        case .defaultPrompt: prompt = Self.defaultPrompt
        case .prompt(let text): prompt = text
        case .fallbackToPin: return .fallbackToPin(reason: nil)
        case .cancel: throw GenericError(.actionCancelled)
        }
        let nonce = try await challenge(context.server.send(BiometricCrypto.encode(BiometricMessage(op: .begin))))
        switch await sensor.scan(prompt: prompt) {
        case .match:
            guard let key = try await releasedKey(context.storage) else {
                return try await invalidate(context)
            }
            let signature = try key.signature(
                for: BiometricCrypto.signingInput(purpose: "authenticate", profile: context.profile, nonce: nonce)
            )
            let reply = try await context.server.send(
                BiometricCrypto.encode(BiometricMessage(op: .prove, signature: signature.derRepresentation))
            )
            guard case .completed(_, let info) = reply else { throw malformed("the server did not accept the proof") }
            return .completed(info: info)
        case .noMatch:
            // Counted on the server like any wrong answer; the SDK asks again with the error.
            _ = try await context.server.send(BiometricCrypto.encode(BiometricMessage(op: .noMatch)))
            throw malformed("the server accepted a failed scan")
        case .lockout:
            return try await invalidate(context)
        case .unavailable:
            return .fallbackToPin(reason: nil)
        }
    }

    /// Removes the device key and everything else the plugin keeps for the profile.
    public func deregister(_ context: AuthenticatorContext) async throws {
        try await context.storage.removeAll()
    }

    /// The key, if the OS still releases it: stored, and made under the biometrics enrolled now.
    private func releasedKey(_ storage: any KeyValueStore) async throws -> P256.Signing.PrivateKey? {
        guard let raw = try await storage.value(forKey: BiometricStorageKey.privateKey),
            let generation = try await storage.value(forKey: BiometricStorageKey.enrollmentGeneration),
            String(decoding: generation, as: UTF8.self) == String(await sensor.enrollmentGeneration)
        else { return nil }
        return try P256.Signing.PrivateKey(rawRepresentation: raw)
    }

    /// The sensor locked out or the OS invalidated the key: the key is gone and the server forgets
    /// this authenticator, which answers `authenticatorDeregistered` and falls back to the PIN.
    private func invalidate(_ context: AuthenticatorContext) async throws -> AuthenticatorResult {
        try await context.storage.removeAll()
        _ = try await context.server.send(BiometricCrypto.encode(BiometricMessage(op: .invalidate)))
        throw malformed("the server kept an invalidated authenticator")
    }

    private func challenge(_ reply: ServerReply) throws -> Data {
        guard case .challenge(let payload) = reply,
            let decoded = BiometricCrypto.decode(BiometricChallengePayload.self, payload)
        else { throw malformed("the server sent no nonce") }
        return decoded.nonce
    }

    private func malformed(_ detail: String) -> GenericError {
        GenericError(.requestInvalid, message: "\(descriptor.name): \(detail).", plugin: descriptor.type)
    }
}
