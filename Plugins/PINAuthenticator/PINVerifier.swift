import Crypto
import Foundation
public import GatehouseKernel
import _CryptoExtras

/// The server half of the PIN authenticator: holds each user's OPRF key and the public half of
/// the device's PIN-protected key, evaluates blinded PINs and checks signatures over single-use
/// nonces. It never sees a PIN. Attempts are counted by the server's kernel, not here.
public struct PINVerifier: AuthenticatorVerifier {
    /// This authenticator as the manifest configures it: its id, name and plugin type.
    public let descriptor: AuthenticatorDescriptor
    /// The policy new PINs must meet; the device checks it, the server checks its digest at
    /// `commit`.
    public let policy: PinPolicy
    private let cpuWork: any CPUWorkExecutor

    /// Makes the server half; `cpuWork` runs the OPRF evaluations off the server's event loops.
    public init(descriptor: AuthenticatorDescriptor, policy: PinPolicy, cpuWork: any CPUWorkExecutor) {
        self.descriptor = descriptor
        self.policy = policy
        self.cpuWork = cpuWork
    }

    /// Handles one enrolment message: sends the policy and a fresh OPRF key, evaluates the chosen
    /// PIN, then keeps the signed PIN-protected public key.
    public func enroll(_ request: VerificationRequest) async throws -> AuthenticationOutcome {
        let message = try decode(request.message)
        switch message.op {
        case .policy:
            let key = P384._VOPRF.PrivateKey()
            let nonce = Data.randomBytes(32)
            return .challenge(
                AuthenticatorChallenge(
                    payload: try PINCrypto.encode(
                        PINChallengePayload(
                            policy: policy,
                            policyDigest: PINCrypto.policyDigest(policy),
                            oprfPublicKey: key.publicKey.x963Representation,
                            nonce: nonce
                        )
                    ),
                    session: try PINCrypto.encode(PINSession(oprfKey: key.rawRepresentation, nonce: nonce))
                )
            )
        case .evaluate:
            let session = try decodeSession(request.session)
            guard let keyBytes = session.oprfKey else { throw invalid("evaluate before policy") }
            let evaluation = try await evaluate(message.blinded, keyBytes: keyBytes)
            var evaluated = session
            evaluated.evaluated = true
            return .challenge(
                AuthenticatorChallenge(
                    payload: try PINCrypto.encode(PINChallengePayload(evaluation: evaluation)),
                    session: try PINCrypto.encode(evaluated)
                )
            )
        case .commit:
            let session = try decodeSession(request.session)
            guard let keyBytes = session.oprfKey, let publicKeyBytes = message.publicKey,
                let signatureBytes = message.signature
            else { throw invalid("commit without a key or signature") }
            guard session.evaluated == true else { throw invalid("commit before the PIN was evaluated") }
            guard message.policyDigest == PINCrypto.policyDigest(policy) else {
                return .failure(
                    AuthenticationFailure(
                        AuthenticationError(
                            .authenticatorInvalid,
                            message: "The PIN policy changed while the PIN was chosen; choose it again.",
                            plugin: descriptor.type
                        ),
                        countsAsAttempt: false
                    )
                )
            }
            guard let publicKey = try? P256.Signing.PublicKey(x963Representation: publicKeyBytes),
                let signature = try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes),
                publicKey.isValidSignature(
                    signature,
                    for: PINCrypto.signingInput(purpose: "enrol", profile: request.profile, nonce: session.nonce)
                )
            else { throw invalid("the enrolment signature is not valid") }
            // A change keeps the registration it replaces until the device shows which it holds.
            let replaced = request.registration.flatMap { try? PINCrypto.decode(PINRegistration.self, $0) }
            let registration = PINRegistration(
                oprfKey: keyBytes,
                pinPublicKey: publicKeyBytes,
                previous: replaced.map {
                    PINRegistration.PreviousPIN(
                        oprfKey: $0.oprfKey,
                        pinPublicKey: $0.pinPublicKey,
                        until: request.now.timeIntervalSince1970 + PINRegistration.previousLifetime
                    )
                }
            )
            return .success(AuthenticationSuccess(registration: try PINCrypto.encode(registration)))
        case .prove, .abandon:
            throw invalid("\(message.op.rawValue) during enrolment")
        }
    }

    /// Handles one authentication message: evaluates the blinded PIN with the user's OPRF key, then
    /// checks the signature over the nonce. A wrong PIN is a counted failure.
    public func verify(_ request: VerificationRequest) async throws -> AuthenticationOutcome {
        guard let stored = request.registration,
            let registration = try? PINCrypto.decode(PINRegistration.self, stored)
        else {
            return .failure(
                AuthenticationFailure(
                    AuthenticationError(.authenticatorNotRegistered, plugin: descriptor.type),
                    countsAsAttempt: false
                )
            )
        }
        let message = try decode(request.message)
        switch message.op {
        case .evaluate:
            // One evaluation per flow step: a second one is a new attempt, in a new flow.
            guard request.session == nil else { throw invalid("a second evaluation in one attempt") }
            let previous = try usablePrevious(registration, digest: message.oprfKeyDigest, now: request.now)
            let evaluation = try await evaluate(message.blinded, keyBytes: previous?.oprfKey ?? registration.oprfKey)
            let nonce = Data.randomBytes(32)
            return .challenge(
                AuthenticatorChallenge(
                    payload: try PINCrypto.encode(PINChallengePayload(evaluation: evaluation, nonce: nonce)),
                    session: try PINCrypto.encode(PINSession(nonce: nonce, usesPrevious: previous != nil)),
                    reservesAttempt: true
                )
            )
        case .prove:
            let session = try decodeSession(request.session)
            let usesPrevious = session.usesPrevious == true
            let expected = usesPrevious ? registration.previous?.pinPublicKey : registration.pinPublicKey
            guard let signatureBytes = message.signature, let expected,
                let publicKey = try? P256.Signing.PublicKey(x963Representation: expected),
                let signature = try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes),
                publicKey.isValidSignature(
                    signature,
                    for: PINCrypto.signingInput(purpose: "authenticate", profile: request.profile, nonce: session.nonce)
                )
            else {
                return .failure(
                    AuthenticationFailure(
                        AuthenticationError(.invalidPin, plugin: descriptor.type),
                        countsAsAttempt: true
                    )
                )
            }
            // The device showed which registration it holds: a PIN change it never learnt of is
            // undone; one it did learn of drops the registration it replaced.
            guard let previous = registration.previous else { return .success(AuthenticationSuccess()) }
            let settled =
                usesPrevious
                ? PINRegistration(oprfKey: previous.oprfKey, pinPublicKey: previous.pinPublicKey)
                : PINRegistration(oprfKey: registration.oprfKey, pinPublicKey: registration.pinPublicKey)
            return .success(AuthenticationSuccess(registration: try PINCrypto.encode(settled)))
        case .abandon:
            _ = try decodeSession(request.session)
            return .failure(
                AuthenticationFailure(AuthenticationError(.invalidPin, plugin: descriptor.type), countsAsAttempt: true)
            )
        case .policy, .commit:
            throw invalid("\(message.op.rawValue) during authentication")
        }
    }

    /// The replaced registration, when the device names its key and it is still kept.
    private func usablePrevious(
        _ registration: PINRegistration,
        digest: Data?,
        now: Date
    ) throws -> PINRegistration.PreviousPIN? {
        guard let digest, let previous = registration.previous, previous.until > now.timeIntervalSince1970 else {
            return nil
        }
        let publicKey = try P384._VOPRF.PrivateKey(rawRepresentation: previous.oprfKey).publicKey.x963Representation
        return PINCrypto.keyDigest(publicKey: publicKey) == digest ? previous : nil
    }

    private func evaluate(_ blinded: Data?, keyBytes: Data) async throws -> Data {
        guard let blinded else { throw invalid("evaluate without a blinded element") }
        return try await cpuWork.run {
            let key = try P384._VOPRF.PrivateKey(rawRepresentation: keyBytes)
            let element: P384._VOPRF.BlindedElement
            do {
                element = try P384._VOPRF.BlindedElement(oprfRepresentation: blinded)
            } catch {
                throw GenericError(.requestInvalid, message: "PIN: the blinded element is not a P-384 point.")
            }
            return try key.evaluate(element).rawRepresentation
        }
    }

    private func decode(_ data: Data) throws -> PINMessage {
        do {
            return try PINCrypto.decode(PINMessage.self, data)
        } catch {
            throw invalid("the message is malformed")
        }
    }

    private func decodeSession(_ data: Data?) throws -> PINSession {
        guard let data, let session = try? PINCrypto.decode(PINSession.self, data) else {
            throw invalid("the message is out of order")
        }
        return session
    }

    private func invalid(_ detail: String) -> GenericError {
        GenericError(.requestInvalid, message: "PIN: \(detail).", plugin: descriptor.type)
    }
}

extension Data {
    static func randomBytes(_ count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }
}

/// `pin`: the PIN authenticator, always present, the fallback for every other authenticator.
///
/// Configuration: `policy`, the ``PinPolicy`` new PINs must meet (defaults as documented there).
public enum PINAuthenticatorPlugin: AuthenticatorPlugin {
    /// The `config` of a `pin` entry.
    public struct Configuration: Decodable, Sendable {
        /// The policy new PINs must meet, from `config.policy`; ``PinPolicy``'s defaults when left
        /// out.
        public var policy: PinPolicy

        /// Makes a configuration; the default policy unless given.
        public init(policy: PinPolicy = PinPolicy()) { self.policy = policy }

        private enum CodingKeys: String, CodingKey { case policy }

        /// Reads `config`; `policy` may be left out.
        public init(from decoder: any Decoder) throws {
            policy = try decoder.container(keyedBy: CodingKeys.self).decode(
                PinPolicy.self,
                forKey: .policy,
                default: PinPolicy()
            )
        }
    }

    /// `"pin"`.
    public static let typeIdentifier: PluginTypeIdentifier = "pin"
    /// `AuthenticatorKind/pin`: the one a manifest must have and every other
    /// authenticator falls back to.
    public static let authenticatorKind = AuthenticatorKind.pin
    /// One line for listings.
    public static let summary = "PIN authenticator: OPRF-hardened, never stored or sent, policy-checked"
    /// The policy: the app checks a PIN against it (`PinPolicyChecker`) before the PIN is used.
    public static let publishedConfigurationKeys: Set<String> = ["policy"]

    /// Makes the client half, ``PINAuthenticator``.
    public static func makeAuthenticator(configuration: Configuration, context: PluginContext) -> any Authenticator {
        PINAuthenticator(descriptor: context.descriptor)
    }

    /// Makes the server half, ``PINVerifier``, with the configured policy.
    public static func makeVerifier(configuration: Configuration, context: PluginContext) -> any AuthenticatorVerifier {
        PINVerifier(descriptor: context.descriptor, policy: configuration.policy, cpuWork: context.cpuWork)
    }
}
