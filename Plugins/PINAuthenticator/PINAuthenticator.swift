import Crypto
import Foundation
public import GatehouseKernel
import _CryptoExtras

/// The client half of the PIN authenticator.
///
/// Enrolment: the server sends its policy and a fresh OPRF public key; the app is asked for a
/// PIN until one meets the policy; the PIN is blinded and evaluated by the server; the output
/// derives a key that seals a new P-256 signing key on the device; the server keeps the public
/// half. Authentication: the PIN is blinded and evaluated again (the server counts the attempt),
/// the output unseals the signing key, which signs the server's single-use nonce. A wrong PIN
/// cannot be tested on the device alone: every guess needs a server evaluation.
public struct PINAuthenticator: Authenticator, PinPolicyChecker {
    /// This authenticator as the manifest configures it: its id, name and plugin type.
    public let descriptor: AuthenticatorDescriptor

    /// Makes the client half.
    public init(descriptor: AuthenticatorDescriptor) { self.descriptor = descriptor }

    /// Checks `pin` against the policy the server publishes for its PIN authenticator (the
    /// `policy` of its configuration; absent, the default policy).
    public func violations(of pin: PIN, publishedConfiguration published: ConfigValue) throws -> [PinValidationError] {
        try ConfigurationDecoder().decode(PINAuthenticatorPlugin.Configuration.self, from: published).policy
            .violations(of: pin)
    }

    /// Enrolls a PIN: asks the app for a PIN until one meets the server's policy, has the server
    /// evaluate it blinded, and keeps a new signing key sealed under the result. Throws
    /// `GenericError` `actionCancelled` when the app cancels.
    public func enroll(_ context: AuthenticatorContext) async throws -> AuthenticatorResult {
        let policyReply = try await challenge(context.server.send(PINCrypto.encode(PINMessage(op: .policy))))
        guard let policy = policyReply.policy, let digest = policyReply.policyDigest,
            let keyBytes = policyReply.oprfPublicKey
        else { throw malformed("the server sent no PIN policy") }
        let oprfKey = try P384._VOPRF.PublicKey(x963Representation: keyBytes)

        var previousError = context.previousError
        var pin: PIN
        while true {
            let response = await context.responder.createPin(
                CreatePinChallenge(profile: context.profile, pinLength: policy.length, error: previousError)
            )
            guard case .pin(let candidate) = response else { throw GenericError(.actionCancelled) }
            if let violation = policy.violations(of: candidate).first {
                previousError = violation
                continue
            }
            pin = candidate
            break
        }

        let (_, output) = try await evaluate(pin, key: oprfKey, server: context.server)
        guard let nonce = policyReply.nonce else { throw malformed("the server sent no nonce") }
        let signingKey = P256.Signing.PrivateKey()
        let sealed = try AES.GCM.seal(
            signingKey.rawRepresentation,
            using: PINCrypto.wrappingKey(oprfOutput: output, profile: context.profile),
            authenticating: Data(context.profile.id.utf8)
        )
        guard let wrapped = sealed.combined else { throw malformed("could not seal the signing key") }
        let signature = try signingKey.signature(
            for: PINCrypto.signingInput(purpose: "enrol", profile: context.profile, nonce: nonce)
        )
        let reply = try await context.server.send(
            PINCrypto.encode(
                PINMessage(
                    op: .commit,
                    publicKey: signingKey.publicKey.x963Representation,
                    signature: signature.derRepresentation,
                    policyDigest: digest
                )
            )
        )
        guard case .completed = reply else { throw malformed("the server did not accept the PIN") }
        try await context.storage.setValue(wrapped, forKey: PINStorageKey.wrappedSigningKey)
        try await context.storage.setValue(keyBytes, forKey: PINStorageKey.oprfPublicKey)
        return .completed(info: nil)
    }

    /// Authenticates: asks the app for the PIN, has the server evaluate it blinded and signs the
    /// server's nonce with the key it unseals. A wrong PIN fails at the server, which counts it.
    public func authenticate(_ context: AuthenticatorContext) async throws -> AuthenticatorResult {
        guard let wrapped = try await context.storage.value(forKey: PINStorageKey.wrappedSigningKey),
            let keyBytes = try await context.storage.value(forKey: PINStorageKey.oprfPublicKey)
        else { throw AuthenticationError(.authenticatorNotRegistered, plugin: descriptor.type) }
        let oprfKey = try P384._VOPRF.PublicKey(x963Representation: keyBytes)

        let counts = context.failureCounts ?? FailureCounts(maximum: 0, previous: 0)
        let response = await context.responder.pin(
            PinChallenge(
                profile: context.profile,
                authenticator: descriptor,
                failureCounts: counts,
                error: context.previousError
            )
        )
        guard case .pin(let pin) = response else { throw GenericError(.actionCancelled) }

        let (reply, output) = try await evaluate(
            pin,
            key: oprfKey,
            server: context.server,
            keyDigest: PINCrypto.keyDigest(publicKey: keyBytes)
        )
        guard let nonce = reply.nonce else { throw malformed("the server sent no nonce") }
        let signingKey: P256.Signing.PrivateKey
        do {
            let box = try AES.GCM.SealedBox(combined: wrapped)
            let raw = try AES.GCM.open(
                box,
                using: PINCrypto.wrappingKey(oprfOutput: output, profile: context.profile),
                authenticating: Data(context.profile.id.utf8)
            )
            signingKey = try P256.Signing.PrivateKey(rawRepresentation: raw)
        } catch {
            // Wrong PIN. Tell the server, which counts it and answers with the remaining tries.
            _ = try await context.server.send(PINCrypto.encode(PINMessage(op: .abandon)))
            throw AuthenticationError(.invalidPin, plugin: descriptor.type)
        }
        let signature = try signingKey.signature(
            for: PINCrypto.signingInput(purpose: "authenticate", profile: context.profile, nonce: nonce)
        )
        let final = try await context.server.send(
            PINCrypto.encode(PINMessage(op: .prove, signature: signature.derRepresentation))
        )
        guard case .completed = final else { throw malformed("the server did not accept the proof") }
        return .completed(info: nil)
    }

    /// Blinds `pin`, has the server evaluate it, and unblinds the answer, checking the server's
    /// proof that it used the key the device knows.
    private func evaluate(
        _ pin: PIN,
        key oprfKey: P384._VOPRF.PublicKey,
        server: ServerConversation,
        keyDigest: Data? = nil
    ) async throws -> (PINChallengePayload, Data) {
        let blinded = try pin.withUTF8 { try oprfKey.blind(Data($0)) }
        let reply = try challenge(
            await server.send(
                PINCrypto.encode(
                    PINMessage(
                        op: .evaluate,
                        blinded: blinded.blindedElement.oprfRepresentation,
                        oprfKeyDigest: keyDigest
                    )
                )
            )
        )
        guard let evaluation = reply.evaluation else { throw malformed("the server sent no evaluation") }
        do {
            return (
                reply, try oprfKey.finalize(blinded, using: P384._VOPRF.BlindEvaluation(rawRepresentation: evaluation))
            )
        } catch {
            throw AuthenticationError(
                .authenticatorInvalid,
                message: "The server's PIN evaluation does not match its key.",
                plugin: descriptor.type
            )
        }
    }

    private func challenge(_ reply: ServerReply) throws -> PINChallengePayload {
        guard case .challenge(let payload) = reply else { throw malformed("the server ended the PIN flow early") }
        do {
            return try PINCrypto.decode(PINChallengePayload.self, payload)
        } catch {
            throw malformed("the server's PIN message is malformed")
        }
    }

    private func malformed(_ detail: String) -> GenericError {
        GenericError(.requestInvalid, message: "PIN authenticator: \(detail).", plugin: descriptor.type)
    }
}
