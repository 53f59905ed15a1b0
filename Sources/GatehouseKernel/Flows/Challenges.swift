public import Foundation

// Challenges are values handed to the app; the app's answer is the return value of the delegate
// method that received the challenge. A challenge re-issued after a refused answer carries the
// refusal in `error`.

/// Choose a PIN: during registration, change PIN, or enrolment of the PIN authenticator.
public struct CreatePinChallenge: Sendable {
    /// The profile whose PIN is being chosen.
    public var profile: UserProfile
    /// The exact length the server's PIN policy requires.
    public var pinLength: Int
    /// Why the previous PIN was refused (a ``PinValidationError`` or a ``GenericError``).
    public var error: (any DomainError)?

    /// Makes the challenge; `error` says why the previous PIN was refused, `nil` on the first ask.
    public init(profile: UserProfile, pinLength: Int, error: (any DomainError)? = nil) {
        self.profile = profile
        self.pinLength = pinLength
        self.error = error
    }
}

/// The answer to a ``CreatePinChallenge``.
public enum CreatePinResponse: Sendable {
    case pin(PIN)
    case cancel
}

/// Enter the PIN to authenticate.
public struct PinChallenge: Sendable {
    /// The profile that is authenticating.
    public var profile: UserProfile
    /// The PIN authenticator being asked.
    public var authenticator: AuthenticatorDescriptor
    /// Failures allowed in all; 0 means unlimited.
    public var maxFailureCount: Int
    /// Failures since the last success.
    public var previousFailureCount: Int
    /// Failures left before the profile is deregistered; `nil` when unlimited.
    public var remainingFailureCount: Int?
    /// Why the previous answer was refused, e.g. `AuthenticationError.invalidPin`. After an
    /// automatic fallback from a custom authenticator it carries that authenticator's info in
    /// `details.customInfo`.
    public var error: (any DomainError)?

    /// Makes the challenge, taking the three counts from `failureCounts`; `error` is `nil` on the
    /// first ask.
    public init(
        profile: UserProfile,
        authenticator: AuthenticatorDescriptor,
        failureCounts: FailureCounts,
        error: (any DomainError)? = nil
    ) {
        self.profile = profile
        self.authenticator = authenticator
        self.maxFailureCount = failureCounts.maximum
        self.previousFailureCount = failureCounts.previous
        self.remainingFailureCount = failureCounts.remaining
        self.error = error
    }
}

/// The answer to a ``PinChallenge``.
public enum PinResponse: Sendable {
    case pin(PIN)
    case cancel
}

/// Authenticate with a biometric sensor, or fall back to the PIN.
public struct BiometricChallenge: Sendable {
    /// The profile that is authenticating.
    public var profile: UserProfile
    /// The biometric authenticator being asked.
    public var authenticator: AuthenticatorDescriptor
    /// Why the previous scan was refused (e.g. ``AuthenticationError``
    /// `biometricAuthenticatorFailure`); `nil` on the first ask.
    public var error: (any DomainError)?
    /// Failures left before the profile is deregistered (shared with the PIN and every other
    /// authenticator); `nil` when unlimited or unknown.
    public var remainingFailureCount: Int?

    /// Makes the challenge; `failureCounts` is `nil` when the counts are not known, leaving
    /// ``remainingFailureCount`` `nil`.
    public init(
        profile: UserProfile,
        authenticator: AuthenticatorDescriptor,
        error: (any DomainError)? = nil,
        failureCounts: FailureCounts? = nil
    ) {
        self.profile = profile
        self.authenticator = authenticator
        self.error = error
        self.remainingFailureCount = failureCounts?.remaining
    }
}

/// The answer to a ``BiometricChallenge``.
public enum BiometricResponse: Sendable, Equatable {
    /// Scan with the sensor's default prompt.
    case defaultPrompt
    /// Scan with this prompt, e.g. "Confirm the transfer of €120".
    case prompt(String)
    case fallbackToPin
    case cancel
}

/// Authenticate with an integrator's custom authenticator, or fall back to the PIN.
public struct CustomAuthenticatorChallenge: Sendable {
    /// The profile that is authenticating.
    public var profile: UserProfile
    /// The custom authenticator being asked, with its id and the plugin type behind it.
    public var authenticator: AuthenticatorDescriptor
    /// Data the authenticator's server half sent along, if any.
    public var challengeData: String?
    /// Why the previous answer was refused, e.g. ``AuthenticationError``
    /// `customAuthenticatorFailure` with the server half's ``ErrorDetails/customInfo``; `nil` on
    /// the first ask.
    public var error: (any DomainError)?
    /// How to ask the user for the answer, as the plugin declares it: its label, whether it is a
    /// secret (never shown as typed, never logged), whether to ask twice.
    public var prompt: CustomAnswerPrompt
    /// Failures left before the profile is deregistered (shared with the PIN and every other
    /// authenticator); `nil` when unlimited or unknown.
    public var remainingFailureCount: Int?

    /// Makes the challenge; `prompt` defaults to a label of "Answer", and `failureCounts` is `nil`
    /// when the counts are not known.
    public init(
        profile: UserProfile,
        authenticator: AuthenticatorDescriptor,
        challengeData: String? = nil,
        error: (any DomainError)? = nil,
        prompt: CustomAnswerPrompt = CustomAnswerPrompt(label: "Answer"),
        failureCounts: FailureCounts? = nil
    ) {
        self.profile = profile
        self.authenticator = authenticator
        self.challengeData = challengeData
        self.error = error
        self.prompt = prompt
        self.remainingFailureCount = failureCounts?.remaining
    }
}

/// The answer to a ``CustomAuthenticatorChallenge``.
public enum CustomAuthenticatorResponse: Sendable, Equatable {
    /// Continue with this data: the device half gets it as `CustomDeviceRequest.appData` and
    /// decides what its payload to the server half is.
    case data(String?)
    case fallbackToPin
    case cancel
}

/// Supply the data that finishes registering a custom authenticator (after the PIN).
public struct CustomAuthenticatorRegistrationChallenge: Sendable {
    /// The profile the authenticator is registered for.
    public var profile: UserProfile
    /// The custom authenticator being registered.
    public var authenticator: AuthenticatorDescriptor
    /// Why the previous registration data was refused; `nil` on the first ask.
    public var error: (any DomainError)?
    /// How to ask the user for registration data, as the plugin declares it.
    public var prompt: CustomAnswerPrompt

    /// Makes the challenge; `prompt` defaults to a label of "Registration data".
    public init(
        profile: UserProfile,
        authenticator: AuthenticatorDescriptor,
        error: (any DomainError)? = nil,
        prompt: CustomAnswerPrompt = CustomAnswerPrompt(label: "Registration data")
    ) {
        self.profile = profile
        self.authenticator = authenticator
        self.error = error
        self.prompt = prompt
    }
}

/// The answer to a ``CustomAuthenticatorRegistrationChallenge``.
public enum CustomAuthenticatorRegistrationResponse: Sendable, Equatable {
    /// Register with this data: the device half gets it as `CustomDeviceRequest.appData` and
    /// decides what its registration payload is.
    case data(String?)
    case cancel
}

/// Confirm that a custom authenticator is to be deregistered.
public struct CustomAuthenticatorDeregistrationChallenge: Sendable {
    /// The profile the authenticator is registered for.
    public var profile: UserProfile
    /// The custom authenticator to deregister.
    public var authenticator: AuthenticatorDescriptor

    /// Makes the challenge.
    public init(profile: UserProfile, authenticator: AuthenticatorDescriptor) {
        self.profile = profile
        self.authenticator = authenticator
    }
}

/// The answer to a ``CustomAuthenticatorDeregistrationChallenge``.
public enum CustomAuthenticatorDeregistrationResponse: Sendable, Equatable {
    case proceed
    case cancel
}

/// Open a browser at `url` and hand back the redirect that ends the login.
public struct BrowserRegistrationChallenge: Sendable {
    /// The browser identity provider the user logs in with.
    public var identityProvider: IdentityProviderDescriptor
    /// Where the user logs in.
    public var url: URL
    /// The redirect URI the browser lands on when the login is done.
    public var redirectURI: URL
    /// Why the previous redirect was refused (a state mismatch, say); `nil` on the first ask.
    public var error: (any DomainError)?

    /// Makes the challenge.
    public init(
        identityProvider: IdentityProviderDescriptor,
        url: URL,
        redirectURI: URL,
        error: (any DomainError)? = nil
    ) {
        self.identityProvider = identityProvider
        self.url = url
        self.redirectURI = redirectURI
        self.error = error
    }

    /// Whether ``redirectURI`` is a loopback address (`http://127.0.0.1` or `http://[::1]`): the
    /// app may then listen on any port it gets from the system (RFC 8252 §7.3) and open
    /// ``url(redirectingTo:)`` instead of ``url``.
    public var allowsAnyLoopbackPort: Bool {
        redirectURI.scheme == "http" && ["127.0.0.1", "::1", "[::1]"].contains(redirectURI.host ?? "")
    }

    /// ``url`` with its `redirect_uri` swapped for `listener`: the loopback redirect URI with the
    /// port the app's listener was given. Only the port may differ from ``redirectURI``; anything
    /// else gives nil, and the identity provider checks the redirect again when it comes back.
    public func url(redirectingTo listener: URL) -> URL? {
        guard allowsAnyLoopbackPort, listener.scheme == redirectURI.scheme, listener.host == redirectURI.host,
            listener.path == redirectURI.path, listener.query == nil, listener.port != nil,
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return nil }
        components.queryItems = components.queryItems?.map {
            $0.name == "redirect_uri" ? URLQueryItem(name: $0.name, value: listener.absoluteString) : $0
        }
        return components.url
    }
}

/// The answer to a ``BrowserRegistrationChallenge``.
public enum BrowserRegistrationResponse: Sendable, Equatable {
    /// The full URL the browser was redirected to.
    case redirect(URL)
    case cancel
}

/// Supply data for a custom-API registration step.
public struct CustomRegistrationChallenge: Sendable {
    /// The step of a two-step registration, or the only step of a one-step registration.
    public enum Step: String, Sendable, Equatable {
        /// The first step of a two-step registration.
        case initialize
        /// The second step of a two-step registration, or the only step of a one-step one.
        case finish
    }

    /// The custom-API identity provider being registered with.
    public var identityProvider: IdentityProviderDescriptor
    /// Which step of the registration asks for data: ``Step/initialize`` or ``Step/finish``.
    public var step: Step
    /// What the custom API answered to the previous step (status and data).
    public var info: CustomInfo?
    /// Why the previous step was refused (e.g. ``RegistrationError`` `customRegistrationFailure`);
    /// `nil` on the first ask.
    public var error: (any DomainError)?

    /// Makes the challenge; `info` is what the custom API answered to the previous step, `nil`
    /// before the first.
    public init(
        identityProvider: IdentityProviderDescriptor,
        step: Step,
        info: CustomInfo? = nil,
        error: (any DomainError)? = nil
    ) {
        self.identityProvider = identityProvider
        self.step = step
        self.info = info
        self.error = error
    }
}

/// The answer to a ``CustomRegistrationChallenge``.
public enum CustomRegistrationResponse: Sendable, Equatable {
    /// Continue with this (optional) data; it reaches the custom API.
    case data(String?)
    case cancel
}
