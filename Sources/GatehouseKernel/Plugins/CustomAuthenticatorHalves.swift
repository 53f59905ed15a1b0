import Foundation

// The two Gatehouse halves every custom authenticator shares. The integrator's device and
// service halves only produce and check payloads; the messages, the app's challenges, the
// statuses and what counts as an attempt are decided here, once.

private struct CustomMessage: Codable {
    enum Operation: String, Codable { case register, begin, answer }
    var op: Operation
    var payload: String?
}

private struct CustomChallengePayload: Codable {
    var challengeData: String?
}

private struct CustomSession: Codable {
    var begun: Bool
    /// What the service sent with its challenge, handed back with the answer.
    var challengeData: String?
}

/// What the server keeps for a registration: the service's own data, as JSON (a `String`
/// service's is stored as `{"data": "…"}`).
private struct StoredRegistration<RegistrationData: Codable>: Codable {
    var data: RegistrationData?
}

private enum CustomCoding {
    static func encode(_ value: some Encodable) throws -> Data { try JSONEncoder().encode(value) }
    static func decode<T: Decodable>(_ type: T.Type, _ data: Data?) -> T? {
        data.flatMap { try? JSONDecoder().decode(type, from: $0) }
    }
}

/// The client half of a custom authenticator: asks the app, runs the device half, talks to the
/// server half.
public struct CustomAuthenticatorClient<Device: CustomAuthenticatorDevice>: Authenticator {
    /// This authenticator as the manifest configures it: its id, name and plugin type.
    public let descriptor: AuthenticatorDescriptor
    /// The integrator's device half, which makes the payloads.
    public let device: Device
    private let clock: any WallClock

    /// Makes the client half; `clock` gives the time the device half sees as
    /// ``CustomDeviceRequest/now``.
    public init(descriptor: AuthenticatorDescriptor, device: Device, clock: any WallClock = SystemWallClock()) {
        self.descriptor = descriptor
        self.device = device
        self.clock = clock
    }

    /// Registers the authenticator: asks the app for registration data, has the device half make
    /// the payload and sends it to the server half. Throws ``GenericError`` `actionCancelled` when
    /// the app cancels.
    public func enroll(_ context: AuthenticatorContext) async throws -> AuthenticatorResult {
        let answer = await context.responder.customAuthenticatorRegistration(
            CustomAuthenticatorRegistrationChallenge(
                profile: context.profile,
                authenticator: descriptor,
                error: context.previousError,
                prompt: device.registrationPrompt
            )
        )
        guard case .data(let appData) = answer else { throw GenericError(.actionCancelled) }
        let payload = try await device.registrationPayload(
            CustomDeviceRequest(profile: context.profile, storage: context.storage, appData: appData, now: clock.now)
        )
        let reply = try await context.server.send(CustomCoding.encode(CustomMessage(op: .register, payload: payload)))
        guard case .completed(_, let info) = reply else {
            throw malformed("the server did not finish the registration")
        }
        return .completed(info: info)
    }

    /// Authenticates: fetches the service's challenge data, asks the app for the answer, has the
    /// device half make the payload and sends it. Falls back to the PIN when the app asks to;
    /// throws ``GenericError`` `actionCancelled` when it cancels.
    public func authenticate(_ context: AuthenticatorContext) async throws -> AuthenticatorResult {
        let begun = try await context.server.send(CustomCoding.encode(CustomMessage(op: .begin)))
        guard case .challenge(let payload) = begun,
            let challenge = CustomCoding.decode(CustomChallengePayload.self, payload)
        else { throw malformed("the server sent no challenge") }
        let answer = await context.responder.customAuthenticator(
            CustomAuthenticatorChallenge(
                profile: context.profile,
                authenticator: descriptor,
                challengeData: challenge.challengeData,
                error: context.previousError,
                prompt: device.answerPrompt,
                failureCounts: context.failureCounts
            )
        )
        let appData: String?
        switch answer {
        case .data(let data): appData = data
        case .fallbackToPin: return .fallbackToPin(reason: nil)
        case .cancel: throw GenericError(.actionCancelled)
        }
        let answerPayload = try await device.authenticationPayload(
            CustomDeviceRequest(
                profile: context.profile,
                storage: context.storage,
                appData: appData,
                challengeData: challenge.challengeData,
                now: clock.now
            )
        )
        let reply = try await context.server.send(
            CustomCoding.encode(CustomMessage(op: .answer, payload: answerPayload))
        )
        guard case .completed(_, let info) = reply else {
            throw malformed("the server did not finish the authentication")
        }
        return .completed(info: info)
    }

    /// Deregisters after the app confirms, letting the device half clean up; throws
    /// ``GenericError`` `actionCancelled` when the app does not confirm.
    public func deregister(_ context: AuthenticatorContext) async throws {
        let answer = await context.responder.customAuthenticatorDeregistration(
            CustomAuthenticatorDeregistrationChallenge(profile: context.profile, authenticator: descriptor)
        )
        guard answer == .proceed else { throw GenericError(.actionCancelled) }
        try await device.deregister(
            CustomDeviceRequest(profile: context.profile, storage: context.storage, now: clock.now)
        )
    }

    private func malformed(_ detail: String) -> GenericError {
        GenericError(.requestInvalid, message: "\(descriptor.name): \(detail).", plugin: descriptor.type)
    }
}

/// The server half of a custom authenticator: runs the service half and maps its results.
///
/// | result (status) | enrolment | authentication |
/// | --- | --- | --- |
/// | `.success` (2000) | registered, data kept | authenticated, data kept if new |
/// | `.retry` (4000) | refused | refused, counted, may retry |
/// | `.alreadyRegistered` (4001) | refused: already registered | refused, counted |
/// | `.notRegistered` (4002) | refused | refused, registration removed, PIN takes over |
/// | `.failure` (5000) | refused | refused, counted, registration removed, PIN takes over |
/// | the service throws | refused, temporarily (9035) | refused, temporarily (9035), not counted |
///
/// A service that throws could not check the answer (its backing service is down): that is a
/// temporary failure, not a wrong answer, so an outage costs the user no attempt.
public struct CustomAuthenticatorVerifier<Service: CustomAuthenticatorService>: AuthenticatorVerifier {
    /// This authenticator as the manifest configures it: its id, name and plugin type.
    public let descriptor: AuthenticatorDescriptor
    /// The integrator's service half, which checks the payloads.
    public let service: Service

    /// Makes the server half.
    public init(descriptor: AuthenticatorDescriptor, service: Service) {
        self.descriptor = descriptor
        self.service = service
    }

    /// Checks a registration payload with the service half and keeps its registration data on
    /// success.
    public func enroll(_ request: VerificationRequest) async throws -> AuthenticationOutcome {
        guard let message = CustomCoding.decode(CustomMessage.self, request.message), message.op == .register else {
            throw invalid("expected a registration")
        }
        let result: CustomAuthenticatorResult<Service.RegistrationData>
        do {
            result = try await service.register(serviceRequest(request, payload: message.payload))
        } catch {
            return temporaryFailure()
        }
        let info = CustomInfo(status: result.status, data: result.payload)
        switch result {
        case .success(_, let registrationData):
            return .success(
                AuthenticationSuccess(
                    registration: try CustomCoding.encode(StoredRegistration(data: registrationData)),
                    info: info
                )
            )
        case .alreadyRegistered:
            return refusal(.authenticatorAlreadyRegistered, info, counts: false)
        case .retry, .notRegistered, .failure:
            return refusal(.customAuthenticatorFailure, info, counts: false)
        }
    }

    /// Checks an authentication answer with the service half, as the table above says.
    public func verify(_ request: VerificationRequest) async throws -> AuthenticationOutcome {
        // Data the service can no longer read (its type changed incompatibly) is no registration.
        guard let stored = CustomCoding.decode(StoredRegistration<Service.RegistrationData>.self, request.registration)
        else {
            return .failure(
                AuthenticationFailure(
                    AuthenticationError(.authenticatorNotRegistered, plugin: descriptor.type),
                    countsAsAttempt: false,
                    removesRegistration: true
                )
            )
        }
        guard let message = CustomCoding.decode(CustomMessage.self, request.message) else {
            throw invalid("the message is malformed")
        }
        switch message.op {
        case .begin:
            let data: String?
            do {
                data = try await service.challengeData(serviceRequest(request, payload: nil, stored: stored.data))
            } catch {
                return temporaryFailure()
            }
            return .challenge(
                AuthenticatorChallenge(
                    payload: try CustomCoding.encode(CustomChallengePayload(challengeData: data)),
                    session: try CustomCoding.encode(CustomSession(begun: true, challengeData: data))
                )
            )
        case .answer:
            guard let session = CustomCoding.decode(CustomSession.self, request.session), session.begun else {
                throw invalid("an answer before the challenge")
            }
            let result: CustomAuthenticatorResult<Service.RegistrationData>
            do {
                var checked = serviceRequest(request, payload: message.payload, stored: stored.data)
                checked.challengeData = session.challengeData
                result = try await service.authenticate(checked)
            } catch {
                // Not checked is not wrong: nothing is counted, and the user tries again later.
                return temporaryFailure()
            }
            let info = CustomInfo(status: result.status, data: result.payload)
            switch result {
            case .success(_, let registrationData):
                let renewed = try registrationData.map { try CustomCoding.encode(StoredRegistration(data: $0)) }
                return .success(AuthenticationSuccess(registration: renewed, info: info))
            case .retry:
                return refusal(.customAuthenticatorFailure, info, counts: true)
            case .notRegistered:
                return refusal(.authenticatorDeregistered, info, counts: false, removes: true)
            case .failure:
                return refusal(.authenticatorDeregistered, info, counts: true, removes: true)
            case .alreadyRegistered:
                // Not an answer to an authentication (a confused service): counted, fail closed.
                return refusal(.authenticatorInvalid, info, counts: true)
            }
        case .register:
            throw invalid("\(message.op.rawValue) during authentication")
        }
    }

    private func serviceRequest(
        _ request: VerificationRequest,
        payload: String?,
        stored: Service.RegistrationData? = nil
    )
        -> CustomServiceRequest<Service.RegistrationData>
    {
        CustomServiceRequest(
            subject: request.subject,
            profile: request.profile,
            payload: payload,
            registrationData: stored,
            now: request.now
        )
    }

    private func refusal(
        _ code: AuthenticationError.Code,
        _ info: CustomInfo,
        counts: Bool,
        removes: Bool = false
    ) -> AuthenticationOutcome {
        .failure(
            AuthenticationFailure(
                AuthenticationError(
                    code,
                    details: ErrorDetails(customInfo: info, authenticatorID: removes ? descriptor.id : nil),
                    plugin: descriptor.type
                ),
                countsAsAttempt: counts,
                removesRegistration: removes
            )
        )
    }

    private func invalid(_ detail: String) -> GenericError {
        GenericError(.requestInvalid, message: "\(descriptor.name): \(detail).", plugin: descriptor.type)
    }

    /// The service threw: it could not decide, so nothing counts and nothing is removed.
    private func temporaryFailure() -> AuthenticationOutcome {
        .failure(
            AuthenticationFailure(
                AuthenticationError(
                    .authenticatorUnavailable,
                    message: "\(descriptor.name) could not check the answer just now; no attempt was counted. "
                        + "Try again later.",
                    plugin: descriptor.type
                ),
                countsAsAttempt: false,
                removesRegistration: false
            )
        )
    }
}
