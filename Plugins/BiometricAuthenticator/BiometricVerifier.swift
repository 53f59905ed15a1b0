import Foundation
public import GatehouseKernel

/// The server half: hands out single-use nonces and checks signatures with the device key's
/// public half. A wrong signature and a reported failed scan count as attempts; an invalidated
/// key removes the registration, and the flow falls back to the PIN.
public struct BiometricVerifier: AuthenticatorVerifier {
    /// This authenticator as the manifest configures it: its id, name and plugin type.
    public let descriptor: AuthenticatorDescriptor

    /// Makes the server half.
    public init(descriptor: AuthenticatorDescriptor) { self.descriptor = descriptor }

    /// Handles one enrolment message: hands out a nonce, then keeps the device key's public half
    /// once its signature over the nonce checks.
    public func enroll(_ request: VerificationRequest) async throws -> AuthenticationOutcome {
        let message = try decode(request.message)
        switch message.op {
        case .begin:
            return try nonceChallenge()
        case .register:
            let session = try decodeSession(request.session)
            guard let publicKey = message.publicKey,
                BiometricCrypto.isValid(
                    message.signature,
                    by: publicKey,
                    over: BiometricCrypto.signingInput(purpose: "enrol", profile: request.profile, nonce: session.nonce)
                )
            else { throw invalid("the enrolment signature is not valid") }
            return .success(
                AuthenticationSuccess(
                    registration: try BiometricCrypto.encode(BiometricRegistration(publicKey: publicKey))
                )
            )
        case .prove, .noMatch, .invalidate:
            throw invalid("\(message.op.rawValue) during enrolment")
        }
    }

    /// Handles one authentication message: hands out a nonce, checks the signature over it, counts
    /// a reported failed scan, and removes the registration when the device reports its key
    /// invalidated.
    public func verify(_ request: VerificationRequest) async throws -> AuthenticationOutcome {
        guard let registration = BiometricCrypto.decode(BiometricRegistration.self, request.registration) else {
            return refusal(.authenticatorNotRegistered, counts: false, removes: true)
        }
        let message = try decode(request.message)
        switch message.op {
        case .begin:
            return try nonceChallenge()
        case .prove:
            let session = try decodeSession(request.session)
            let input = BiometricCrypto.signingInput(
                purpose: "authenticate",
                profile: request.profile,
                nonce: session.nonce
            )
            guard BiometricCrypto.isValid(message.signature, by: registration.publicKey, over: input) else {
                return refusal(.biometricAuthenticatorFailure, counts: true)
            }
            return .success(AuthenticationSuccess())
        case .noMatch:
            _ = try decodeSession(request.session)
            return refusal(.biometricAuthenticatorFailure, counts: true)
        case .invalidate:
            _ = try decodeSession(request.session)
            return refusal(.authenticatorDeregistered, counts: false, removes: true)
        case .register:
            throw invalid("register during authentication")
        }
    }

    /// A fresh nonce; it lets the client test nothing, so it holds no attempt.
    private func nonceChallenge() throws -> AuthenticationOutcome {
        let nonce = BiometricCrypto.nonce()
        return .challenge(
            AuthenticatorChallenge(
                payload: try BiometricCrypto.encode(BiometricChallengePayload(nonce: nonce)),
                session: try BiometricCrypto.encode(BiometricSession(nonce: nonce))
            )
        )
    }

    private func refusal(_ code: AuthenticationError.Code, counts: Bool, removes: Bool = false) -> AuthenticationOutcome
    {
        .failure(
            AuthenticationFailure(
                AuthenticationError(
                    code,
                    details: ErrorDetails(authenticatorID: removes ? descriptor.id : nil),
                    plugin: descriptor.type
                ),
                countsAsAttempt: counts,
                removesRegistration: removes
            )
        )
    }

    private func decode(_ data: Data) throws -> BiometricMessage {
        guard let message = BiometricCrypto.decode(BiometricMessage.self, data) else {
            throw invalid("the message is malformed")
        }
        return message
    }

    private func decodeSession(_ data: Data?) throws -> BiometricSession {
        guard let session = BiometricCrypto.decode(BiometricSession.self, data) else {
            throw invalid("the message is out of order")
        }
        return session
    }

    private func invalid(_ detail: String) -> GenericError {
        GenericError(.requestInvalid, message: "\(descriptor.name): \(detail).", plugin: descriptor.type)
    }
}

/// `biometric.simulated`: biometric authentication with PIN fallback, against a simulated sensor.
/// Never for production (see ``BiometricAuthenticator``); loaded only where a manifest names it.
///
/// Configuration: `sensor`, the name of a ``SimulatedBiometricSensor`` the host provides as a
/// service (shared with tests or a demo that script it at run time); or, without it, `script` (a
/// list of `match`, `noMatch`, `lockout`, `unavailable` answered in order, then `match`) and
/// `latencyMilliseconds` [0] 0–10000 for a sensor of its own.
public enum BiometricAuthenticatorPlugin: AuthenticatorPlugin {
    /// The manifest entry's `config`. Unknown keys are refused.
    public struct Configuration: Decodable, Sendable {
        /// The service name of a host-provided ``SimulatedBiometricSensor``; `nil`: a sensor of its own.
        public var sensor: String?
        /// What the plugin's own sensor answers, in order, before it answers `match`. Default: empty.
        public var script: [SensorResult]
        /// How long the plugin's own sensor takes to answer each scan. Default 0, from 0 to 10000.
        public var latencyMilliseconds: Int

        private enum CodingKeys: String, CodingKey { case sensor, script, latencyMilliseconds }

        /// Reads `config`; throws when `latencyMilliseconds` is out of range, or when `sensor` is
        /// given with `script` or `latencyMilliseconds`.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            sensor = try container.decodeIfPresent(String.self, forKey: .sensor)
            script = try container.decode([SensorResult].self, forKey: .script, default: [])
            latencyMilliseconds = try container.decode(
                Int.self,
                forKey: .latencyMilliseconds,
                default: 0,
                in: 0...10_000
            )
            if sensor != nil, !script.isEmpty || latencyMilliseconds != 0 {
                throw container.invalid(
                    .sensor,
                    "a shared sensor is scripted by its host; drop script and latencyMilliseconds"
                )
            }
        }
    }

    /// `"biometric.simulated"`.
    public static let typeIdentifier: PluginTypeIdentifier = "biometric.simulated"
    /// `AuthenticatorKind.biometric`: the app gets a biometric challenge, with the PIN as fallback.
    public static let authenticatorKind = AuthenticatorKind.biometric
    /// One line for listings, which says it is a simulation.
    public static let summary =
        "Biometric authentication against a SIMULATED sensor, with PIN fallback (not for production)"

    /// Makes the client half, ``BiometricAuthenticator``, with the host's sensor `sensor` names or
    /// one of its own; throws a `ConfigurationError` when the host provides no sensor by that name.
    public static func makeAuthenticator(
        configuration: Configuration,
        context: PluginContext
    ) throws -> any Authenticator {
        BiometricAuthenticator(descriptor: context.descriptor, sensor: try sensor(configuration, context))
    }

    /// Makes the server half, ``BiometricVerifier``.
    public static func makeVerifier(configuration: Configuration, context: PluginContext) -> any AuthenticatorVerifier {
        BiometricVerifier(descriptor: context.descriptor)
    }

    private static func sensor(
        _ configuration: Configuration,
        _ context: PluginContext
    ) throws -> SimulatedBiometricSensor {
        guard let name = configuration.sensor else {
            return SimulatedBiometricSensor(
                script: configuration.script,
                latency: .milliseconds(configuration.latencyMilliseconds)
            )
        }
        return try context.services.require(
            SimulatedBiometricSensorKey.self,
            named: name,
            forConfigurationKey: "sensor"
        )
    }
}
