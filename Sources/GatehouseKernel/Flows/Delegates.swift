// Two layers: the app implements the delegate of the flow it starts (registration,
// authentication, change PIN), where only the challenges that flow cannot do without are
// required. Plugins see a ``ChallengeResponder``, which answers every kind of challenge; the SDK
// builds one from the app's delegate with ``ChallengeResponders``, so a challenge the app did
// not implement gets a safe default.

/// Answers every kind of challenge. Plugins ask the user through this protocol.
public protocol ChallengeResponder: Sendable {
    /// Ask the user to choose a PIN of ``CreatePinChallenge/pinLength`` digits.
    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse
    /// Ask the user for the PIN.
    func pin(_ challenge: PinChallenge) async -> PinResponse
    /// Ask to scan with a biometric sensor, with a prompt or a fallback to the PIN.
    func biometric(_ challenge: BiometricChallenge) async -> BiometricResponse
    /// Ask the user for a custom authenticator's answer, or a fallback to the PIN.
    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) async -> CustomAuthenticatorResponse
    /// Open a browser at the challenge's URL and hand back the redirect that ends the login.
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse
    /// Supply data for a step of a custom-API registration.
    func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse
    /// Supply the data that finishes registering a custom authenticator. Default: cancel.
    func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) async -> CustomAuthenticatorRegistrationResponse
    /// Confirm deregistering a custom authenticator. Default: cancel.
    func customAuthenticatorDeregistration(
        _ challenge: CustomAuthenticatorDeregistrationChallenge
    ) async -> CustomAuthenticatorDeregistrationResponse
}

extension ChallengeResponder {
    /// Cancels: a responder that does not register custom authenticators refuses to.
    public func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) async -> CustomAuthenticatorRegistrationResponse { .cancel }
    /// Cancels: a responder that does not deregister custom authenticators refuses to.
    public func customAuthenticatorDeregistration(
        _ challenge: CustomAuthenticatorDeregistrationChallenge
    ) async -> CustomAuthenticatorDeregistrationResponse { .cancel }
}

/// Answers the challenge that finishes registering a custom authenticator, at registration (when
/// `server.registrationAuthenticators` names one) or when registering it later.
public protocol CustomAuthenticatorRegistrationDelegate: Sendable {
    /// The default registers without app data: the authenticator's device half makes its own.
    func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) async -> CustomAuthenticatorRegistrationResponse
}

extension CustomAuthenticatorRegistrationDelegate {
    /// Registers without app data: the authenticator's device half makes its own.
    public func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) async -> CustomAuthenticatorRegistrationResponse { .data(nil) }
}

/// What the app implements to register a user.
public protocol RegistrationDelegate: CustomAuthenticatorRegistrationDelegate {
    /// Registration started with this identity provider. Optional.
    func registrationDidStart(identityProvider: IdentityProviderDescriptor) async
    /// Ask the user to choose a PIN. Required: every registration creates one.
    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse
    /// Open a browser for a browser identity provider. The default cancels, so implement it
    /// when a browser provider is configured.
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse
    /// Supply data for a custom-API identity provider. The default answers without data.
    func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse
    /// Registration with this identity provider failed with `error` (the same error
    /// `registerUser` throws). Optional. Not called when no identity provider could be chosen:
    /// that error is `RegistrationError.invalidIdentityProvider`.
    func registrationDidFail(identityProvider: IdentityProviderDescriptor, error: any Error) async
}

extension RegistrationDelegate {
    /// Does nothing.
    public func registrationDidStart(identityProvider: IdentityProviderDescriptor) async {}
    /// Does nothing; the same error reaches the caller of `registerUser`.
    public func registrationDidFail(identityProvider: IdentityProviderDescriptor, error: any Error) async {}
    /// Cancels, so an app with a browser identity provider configured has to implement it.
    public func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        .cancel
    }
    /// Answers without data.
    public func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse {
        .data(nil)
    }
}

/// What the app implements to authenticate a user.
public protocol AuthenticationDelegate: Sendable {
    /// Authentication started with this authenticator. Optional.
    func authenticationDidStart(profile: UserProfile, authenticator: AuthenticatorDescriptor) async
    /// Ask the user for the PIN. Required: the PIN is always the fallback.
    func pin(_ challenge: PinChallenge) async -> PinResponse
    /// Biometric authentication is about to scan. The default scans with the default prompt.
    func biometric(_ challenge: BiometricChallenge) async -> BiometricResponse
    /// A custom authenticator needs the user. The default falls back to the PIN.
    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) async -> CustomAuthenticatorResponse
}

extension AuthenticationDelegate {
    /// Does nothing.
    public func authenticationDidStart(profile: UserProfile, authenticator: AuthenticatorDescriptor) async {}
    /// Scans with the sensor's default prompt.
    public func biometric(_ challenge: BiometricChallenge) async -> BiometricResponse { .defaultPrompt }
    /// Falls back to the PIN.
    public func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) async -> CustomAuthenticatorResponse {
        .fallbackToPin
    }
}

/// What the app implements to change the PIN: the current PIN, then the new one.
public protocol ChangePinDelegate: AuthenticationDelegate {
    /// Ask the user to choose the new PIN, after the current one was accepted.
    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse
}

/// What the app implements to register another authenticator (biometric, custom) for the
/// authenticated user: the PIN first, then what the authenticator needs.
public protocol AuthenticatorRegistrationDelegate: CustomAuthenticatorRegistrationDelegate {
    /// Ask for the PIN. Required: registering an authenticator needs a PIN authentication first.
    func pin(_ challenge: PinChallenge) async -> PinResponse
}

/// What the app implements to deregister an authenticator. Everything is optional.
public protocol AuthenticatorDeregistrationDelegate: Sendable {
    /// Confirm deregistering a custom authenticator. The default proceeds.
    func customAuthenticatorDeregistration(
        _ challenge: CustomAuthenticatorDeregistrationChallenge
    ) async -> CustomAuthenticatorDeregistrationResponse
}

extension AuthenticatorDeregistrationDelegate {
    /// Proceeds without asking.
    public func customAuthenticatorDeregistration(
        _ challenge: CustomAuthenticatorDeregistrationChallenge
    ) async -> CustomAuthenticatorDeregistrationResponse { .proceed }
}

/// Deregisters without asking anything.
public struct ProceedingDeregistrationDelegate: AuthenticatorDeregistrationDelegate {
    /// Makes the delegate.
    public init() {}
}

/// Builds the ``ChallengeResponder`` a flow hands to plugins from the app's delegate. A
/// challenge the flow's delegate does not know is cancelled: a plugin that asks for something
/// outside its flow fails closed.
public enum ChallengeResponders {
    /// The responder of a registration: it asks `delegate` to create the PIN, open a browser,
    /// supply custom-API data and register a custom authenticator, and cancels everything else.
    public static func registration(_ delegate: any RegistrationDelegate) -> any ChallengeResponder {
        RegistrationResponder(delegate: delegate)
    }

    /// The responder of an authentication: it asks `delegate` for the PIN, a biometric scan or a
    /// custom authenticator's answer, and cancels everything else (creating a PIN among them).
    public static func authentication(_ delegate: any AuthenticationDelegate) -> any ChallengeResponder {
        AuthenticationResponder(delegate: delegate, createPin: nil)
    }

    /// The responder of a PIN change: as ``authentication(_:)``, and it also asks `delegate` to
    /// create the new PIN.
    public static func changePin(_ delegate: any ChangePinDelegate) -> any ChallengeResponder {
        AuthenticationResponder(delegate: delegate, createPin: { await delegate.createPin($0) })
    }

    /// The responder of registering an authenticator: it asks `delegate` for the PIN and the custom
    /// authenticator's registration data, and cancels everything else.
    public static func authenticatorRegistration(
        _ delegate: any AuthenticatorRegistrationDelegate
    ) -> any ChallengeResponder {
        AuthenticatorRegistrationResponder(delegate: delegate)
    }

    /// The responder of deregistering an authenticator: it asks `delegate` to confirm a custom
    /// authenticator's deregistration, and cancels everything else.
    public static func authenticatorDeregistration(
        _ delegate: any AuthenticatorDeregistrationDelegate
    ) -> any ChallengeResponder {
        AuthenticatorDeregistrationResponder(delegate: delegate)
    }
}

/// Cancels every challenge; the flow-specific responders override what their flow asks.
private protocol CancellingResponder: ChallengeResponder {}

extension CancellingResponder {
    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse { .cancel }
    func pin(_ challenge: PinChallenge) async -> PinResponse { .cancel }
    func biometric(_ challenge: BiometricChallenge) async -> BiometricResponse { .cancel }
    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) async -> CustomAuthenticatorResponse { .cancel }
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse { .cancel }
    func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse { .cancel }
}

private struct AuthenticatorRegistrationResponder: CancellingResponder {
    let delegate: any AuthenticatorRegistrationDelegate

    func pin(_ challenge: PinChallenge) async -> PinResponse { await delegate.pin(challenge) }
    func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) async -> CustomAuthenticatorRegistrationResponse { await delegate.customAuthenticatorRegistration(challenge) }
}

private struct AuthenticatorDeregistrationResponder: CancellingResponder {
    let delegate: any AuthenticatorDeregistrationDelegate

    func customAuthenticatorDeregistration(
        _ challenge: CustomAuthenticatorDeregistrationChallenge
    ) async -> CustomAuthenticatorDeregistrationResponse { await delegate.customAuthenticatorDeregistration(challenge) }
}

private struct RegistrationResponder: ChallengeResponder {
    let delegate: any RegistrationDelegate

    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse { await delegate.createPin(challenge) }
    func pin(_ challenge: PinChallenge) async -> PinResponse { .cancel }
    func biometric(_ challenge: BiometricChallenge) async -> BiometricResponse { .cancel }
    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) async -> CustomAuthenticatorResponse { .cancel }
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        await delegate.browserRegistration(challenge)
    }
    func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse {
        await delegate.customRegistration(challenge)
    }
    func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) async -> CustomAuthenticatorRegistrationResponse { await delegate.customAuthenticatorRegistration(challenge) }
}

private struct AuthenticationResponder: ChallengeResponder {
    let delegate: any AuthenticationDelegate
    let createPin: (@Sendable (CreatePinChallenge) async -> CreatePinResponse)?

    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse {
        guard let createPin else { return .cancel }
        return await createPin(challenge)
    }
    func pin(_ challenge: PinChallenge) async -> PinResponse { await delegate.pin(challenge) }
    func biometric(_ challenge: BiometricChallenge) async -> BiometricResponse { await delegate.biometric(challenge) }
    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) async -> CustomAuthenticatorResponse {
        await delegate.customAuthenticator(challenge)
    }
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse { .cancel }
    func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse { .cancel }
}
