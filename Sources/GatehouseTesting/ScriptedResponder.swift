public import GatehouseKernel

/// One scripted answer, consumed by the challenge it matches.
public enum ScriptedAnswer: Sendable {
    case createPin(String)
    case pin(String)
    case biometric(BiometricResponse)
    case customAuthenticator(CustomAuthenticatorResponse)
    case browserRegistration(BrowserRegistrationResponse)
    case customRegistration(CustomRegistrationResponse)
    case customAuthenticatorRegistration(CustomAuthenticatorRegistrationResponse)
    case customAuthenticatorDeregistration(CustomAuthenticatorDeregistrationResponse)
    /// A mobile authentication's confirmation (accept, with the typed number, or deny).
    case confirmation(MobileAuthConfirmationResponse)
    /// Cancels whatever challenge comes next.
    case cancel
}

/// A challenge the responder received, kept for assertions.
public enum RecordedChallenge: Sendable {
    case createPin(CreatePinChallenge)
    case pin(PinChallenge)
    case biometric(BiometricChallenge)
    case customAuthenticator(CustomAuthenticatorChallenge)
    case browserRegistration(BrowserRegistrationChallenge)
    case customRegistration(CustomRegistrationChallenge)
    case customAuthenticatorRegistration(CustomAuthenticatorRegistrationChallenge)
    case customAuthenticatorDeregistration(CustomAuthenticatorDeregistrationChallenge)
    case confirmation(MobileAuthConfirmationChallenge)

    /// The kind, e.g. `"createPin"`, for compact assertions.
    public var kind: String {
        switch self {
        case .createPin: "createPin"
        case .pin: "pin"
        case .biometric: "biometric"
        case .customAuthenticator: "customAuthenticator"
        case .browserRegistration: "browserRegistration"
        case .customRegistration: "customRegistration"
        case .customAuthenticatorRegistration: "customAuthenticatorRegistration"
        case .customAuthenticatorDeregistration: "customAuthenticatorDeregistration"
        case .confirmation: "confirmation"
        }
    }

    /// The error the challenge carried from the previous attempt.
    public var error: (any DomainError)? {
        switch self {
        case .createPin(let challenge): challenge.error
        case .pin(let challenge): challenge.error
        case .biometric(let challenge): challenge.error
        case .customAuthenticator(let challenge): challenge.error
        case .browserRegistration(let challenge): challenge.error
        case .customRegistration(let challenge): challenge.error
        case .customAuthenticatorRegistration(let challenge): challenge.error
        case .customAuthenticatorDeregistration, .confirmation: nil
        }
    }
}

/// Answers challenges from a script, in order, and records every challenge it was asked.
///
/// Use it as the delegate of any flow, or as a plugin's `ChallengeResponder`. A challenge that
/// does not match the next answer (or comes after the script ran out) is cancelled and noted in
/// ``unexpected``, so a test can tell "the flow asked something it should not have" apart from
/// "the flow failed". Check ``isFinished`` at the end: every answer used, nothing unexpected.
public actor ScriptedResponder: ChallengeResponder, RegistrationDelegate, ChangePinDelegate,
    AuthenticatorRegistrationDelegate, AuthenticatorDeregistrationDelegate, MobileAuthRequestDelegate
{
    private var script: [ScriptedAnswer]
    /// Every challenge received, in order.
    public private(set) var received: [RecordedChallenge] = []
    /// Challenges that found no matching answer.
    public private(set) var unexpected: [RecordedChallenge] = []
    /// The identity provider of each registration that failed, as the SDK named it to the
    /// delegate.
    public private(set) var registrationFailures: [IdentityProviderDescriptor] = []

    /// Makes a responder that gives the answers of `script` in order.
    public init(_ script: [ScriptedAnswer]) { self.script = script }

    /// Answers not used yet.
    public var remaining: Int { script.count }
    /// Whether every answer was used and no challenge was unexpected.
    public var isFinished: Bool { script.isEmpty && unexpected.isEmpty }
    /// The kinds of the challenges received, in order.
    public var receivedKinds: [String] { received.map(\.kind) }

    /// Records the identity provider in ``registrationFailures``.
    public func registrationDidFail(identityProvider: IdentityProviderDescriptor, error: any Error) {
        registrationFailures.append(identityProvider)
    }

    /// Answers with the next scripted `.createPin`; cancels otherwise.
    public func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse {
        switch next(.createPin(challenge)) {
        case .createPin(let pin): .pin(PIN(pin))
        default: .cancel
        }
    }

    /// Answers with the next scripted `.pin`; cancels otherwise.
    public func pin(_ challenge: PinChallenge) -> PinResponse {
        switch next(.pin(challenge)) {
        case .pin(let pin): .pin(PIN(pin))
        default: .cancel
        }
    }

    /// Answers with the next scripted `.biometric`; cancels otherwise.
    public func biometric(_ challenge: BiometricChallenge) -> BiometricResponse {
        switch next(.biometric(challenge)) {
        case .biometric(let response): response
        default: .cancel
        }
    }

    /// Answers with the next scripted `.customAuthenticator`; cancels otherwise.
    public func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) -> CustomAuthenticatorResponse {
        switch next(.customAuthenticator(challenge)) {
        case .customAuthenticator(let response): response
        default: .cancel
        }
    }

    /// Answers with the next scripted `.browserRegistration`; cancels otherwise.
    public func browserRegistration(_ challenge: BrowserRegistrationChallenge) -> BrowserRegistrationResponse {
        switch next(.browserRegistration(challenge)) {
        case .browserRegistration(let response): response
        default: .cancel
        }
    }

    /// Answers with the next scripted `.customRegistration`; cancels otherwise.
    public func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse {
        switch next(.customRegistration(challenge)) {
        case .customRegistration(let response): response
        default: .cancel
        }
    }

    /// Answers with the next scripted `.customAuthenticatorRegistration`; cancels otherwise.
    public func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) -> CustomAuthenticatorRegistrationResponse {
        switch next(.customAuthenticatorRegistration(challenge)) {
        case .customAuthenticatorRegistration(let response): response
        default: .cancel
        }
    }

    /// Answers with the next scripted `.customAuthenticatorDeregistration`; cancels otherwise.
    public func customAuthenticatorDeregistration(
        _ challenge: CustomAuthenticatorDeregistrationChallenge
    ) -> CustomAuthenticatorDeregistrationResponse {
        switch next(.customAuthenticatorDeregistration(challenge)) {
        case .customAuthenticatorDeregistration(let response): response
        default: .cancel
        }
    }

    // MARK: Mobile authentication

    /// The mobile authentication requests the delegate was told were handled, with their info.
    public private(set) var handled: [(MobileAuthRequest, CustomInfo?)] = []
    /// The errors the delegate was told of, with the request when it could be opened.
    public private(set) var failures: [(MobileAuthRequest?, any Error)] = []

    /// Answers with the next scripted `.confirmation`; denies as not accepted otherwise.
    public func confirmation(_ challenge: MobileAuthConfirmationChallenge) -> MobileAuthConfirmationResponse {
        switch next(.confirmation(challenge)) {
        case .confirmation(let response): response
        default: .deny(.notAccepted)
        }
    }

    /// Answers as ``pin(_:)`` does, whatever the request.
    public func pin(_ challenge: PinChallenge, for request: MobileAuthRequest) -> PinResponse { pin(challenge) }
    /// Answers as ``biometric(_:)`` does, whatever the request.
    public func biometric(_ challenge: BiometricChallenge, for request: MobileAuthRequest) -> BiometricResponse {
        biometric(challenge)
    }
    /// Answers as ``customAuthenticator(_:)`` does, whatever the request.
    public func customAuthenticator(
        _ challenge: CustomAuthenticatorChallenge,
        for request: MobileAuthRequest
    ) -> CustomAuthenticatorResponse { customAuthenticator(challenge) }
    /// Records the request and its info in ``handled``.
    public func didHandle(_ request: MobileAuthRequest, info: CustomInfo?) { handled.append((request, info)) }
    /// Records the request and the error in ``failures``.
    public func didFail(_ request: MobileAuthRequest?, error: any Error) { failures.append((request, error)) }

    /// Records `challenge` and takes the next answer if it fits; `nil` (cancel) otherwise.
    private func next(_ challenge: RecordedChallenge) -> ScriptedAnswer? {
        received.append(challenge)
        guard let answer = script.first else {
            unexpected.append(challenge)
            return nil
        }
        let fits =
            switch (answer, challenge) {
            case (.createPin, .createPin), (.pin, .pin), (.biometric, .biometric),
                (.customAuthenticator, .customAuthenticator), (.browserRegistration, .browserRegistration),
                (.customRegistration, .customRegistration),
                (.customAuthenticatorRegistration, .customAuthenticatorRegistration),
                (.customAuthenticatorDeregistration, .customAuthenticatorDeregistration),
                (.confirmation, .confirmation), (.cancel, _):
                true
            default:
                false
            }
        guard fits else {
            unexpected.append(challenge)
            return nil
        }
        script.removeFirst()
        return answer
    }
}
