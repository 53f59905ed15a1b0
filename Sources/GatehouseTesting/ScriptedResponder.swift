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

    public init(_ script: [ScriptedAnswer]) { self.script = script }

    /// Answers not used yet.
    public var remaining: Int { script.count }
    /// Whether every answer was used and no challenge was unexpected.
    public var isFinished: Bool { script.isEmpty && unexpected.isEmpty }
    /// The kinds of the challenges received, in order.
    public var receivedKinds: [String] { received.map(\.kind) }

    public func registrationDidFail(identityProvider: IdentityProviderDescriptor, error: any Error) {
        registrationFailures.append(identityProvider)
    }

    public func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse {
        switch next(.createPin(challenge)) {
        case .createPin(let pin): .pin(PIN(pin))
        default: .cancel
        }
    }

    public func pin(_ challenge: PinChallenge) -> PinResponse {
        switch next(.pin(challenge)) {
        case .pin(let pin): .pin(PIN(pin))
        default: .cancel
        }
    }

    public func biometric(_ challenge: BiometricChallenge) -> BiometricResponse {
        switch next(.biometric(challenge)) {
        case .biometric(let response): response
        default: .cancel
        }
    }

    public func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) -> CustomAuthenticatorResponse {
        switch next(.customAuthenticator(challenge)) {
        case .customAuthenticator(let response): response
        default: .cancel
        }
    }

    public func browserRegistration(_ challenge: BrowserRegistrationChallenge) -> BrowserRegistrationResponse {
        switch next(.browserRegistration(challenge)) {
        case .browserRegistration(let response): response
        default: .cancel
        }
    }

    public func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse {
        switch next(.customRegistration(challenge)) {
        case .customRegistration(let response): response
        default: .cancel
        }
    }

    public func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) -> CustomAuthenticatorRegistrationResponse {
        switch next(.customAuthenticatorRegistration(challenge)) {
        case .customAuthenticatorRegistration(let response): response
        default: .cancel
        }
    }

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

    public func confirmation(_ challenge: MobileAuthConfirmationChallenge) -> MobileAuthConfirmationResponse {
        switch next(.confirmation(challenge)) {
        case .confirmation(let response): response
        default: .deny(.notAccepted)
        }
    }

    public func pin(_ challenge: PinChallenge, for request: MobileAuthRequest) -> PinResponse { pin(challenge) }
    public func biometric(_ challenge: BiometricChallenge, for request: MobileAuthRequest) -> BiometricResponse {
        biometric(challenge)
    }
    public func customAuthenticator(
        _ challenge: CustomAuthenticatorChallenge,
        for request: MobileAuthRequest
    ) -> CustomAuthenticatorResponse { customAuthenticator(challenge) }
    public func didHandle(_ request: MobileAuthRequest, info: CustomInfo?) { handled.append((request, info)) }
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
