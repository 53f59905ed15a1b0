import BiometricAuthenticator
import Foundation
import GatehouseKernel
import GatehouseTesting
import Testing

/// A harness around the plugin with a sensor the test scripts.
func harness(_ sensor: SimulatedBiometricSensor, maximumFailures: Int = 0) throws -> AuthenticatorHarness {
    var environment = PluginEnvironment(logger: RecordingLogger().logger)
    environment.services[SimulatedBiometricSensorKey.self, named: "sensor"] = sensor
    return try AuthenticatorHarness(
        PluginHarness.authenticator(
            BiometricAuthenticatorPlugin.self,
            config: ["sensor": "sensor"],
            environment: environment
        ),
        maximumFailures: maximumFailures
    )
}

func enrolled(
    _ sensor: SimulatedBiometricSensor = SimulatedBiometricSensor(),
    maximumFailures: Int = 0
)
    async throws -> AuthenticatorHarness
{
    let subject = try harness(sensor, maximumFailures: maximumFailures)
    _ = try await subject.enroll(responder: ScriptedResponder([]))
    return subject
}

func code(_ error: any Error) -> String { (error as? any DomainError)?.codeName ?? "\(error)" }

/// The messages the client half sent in one authentication (default prompt), which must end with
/// `expecting`'s error code, or succeed when `nil`.
func authenticationMessages(
    _ subject: AuthenticatorHarness,
    expecting expected: String? = nil
) async throws -> [Data] {
    let before = await subject.sentMessages.count
    do {
        let result = try await subject.authenticate(responder: ScriptedResponder([.biometric(.defaultPrompt)]))
        #expect(expected == nil, "expected \(expected ?? "")")
        #expect(result == .completed(info: nil))
    } catch {
        #expect(code(error) == expected)
    }
    return Array(await subject.sentMessages.dropFirst(before))
}

/// A request to the subject's server half, as the server would make it.
func request(
    _ subject: AuthenticatorHarness,
    _ message: Data,
    session: Data?,
    registration: Data?
) -> VerificationRequest {
    VerificationRequest(
        subject: "subject-\(subject.profile.id)",
        profile: subject.profile,
        message: message,
        session: session,
        registration: registration,
        now: subject.clock.now
    )
}

/// Sends `begin` straight to the subject's server half and returns the session it keeps.
func nonceSession(_ subject: AuthenticatorHarness, begin: Data) async throws -> Data {
    let registration = await subject.registration
    let outcome = try await subject.verifier.verify(
        request(subject, begin, session: nil, registration: registration)
    )
    guard case .challenge(let challenge) = outcome else {
        throw GenericError(.requestInvalid, message: "begin was not answered with a nonce")
    }
    #expect(!challenge.reservesAttempt)
    return challenge.session
}

func refusal(_ outcome: AuthenticationOutcome) -> AuthenticationFailure? {
    guard case .failure(let failure) = outcome else { return nil }
    return failure
}
