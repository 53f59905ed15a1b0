public import Foundation

/// How a mobile authentication type is approved on the device.
public enum MobileAuthMethod: String, Sendable, Codable, CaseIterable {
    /// Accept or deny (with the number the portal shows, when number matching is on).
    case confirmation
    /// The PIN.
    case pin
    /// The biometric authenticator, with the PIN as fallback.
    case biometric
    /// A custom authenticator, with the PIN as fallback.
    case custom
}

/// A mobile authentication request as a push or the server's pending list announces it. It
/// holds nothing sensitive: the transaction's content is fetched sealed for this device.
public struct PendingMobileAuthRequest: Sendable, Hashable, Codable {
    /// The server's id of the transaction, which the answer names.
    public var transactionID: String
    /// The profile on this device the request is for.
    public var profile: UserProfile
    /// When the portal started the transaction.
    public var date: Date
    /// Seconds the transaction stays open after `date`.
    public var timeToLive: Int
    /// The portal's short message (at most 155 characters), safe for a lock screen.
    public var message: String
    /// The push payload it was read from, as received, each value as JSON has it (empty when
    /// listed by the server or brought by the events channel).
    public var userInfo: [String: ConfigValue]

    /// Makes a pending request; `userInfo` is empty unless it came from a push.
    public init(
        transactionID: String,
        profile: UserProfile,
        date: Date,
        timeToLive: Int,
        message: String,
        userInfo: [String: ConfigValue] = [:]
    ) {
        self.transactionID = transactionID
        self.profile = profile
        self.date = date
        self.timeToLive = timeToLive
        self.message = message
        self.userInfo = userInfo
    }

    /// When the transaction expires.
    public var expiresAt: Date { date.addingTimeInterval(Double(timeToLive)) }
}

/// A mobile authentication request as the device sees it once it opened the sealed payload.
public struct MobileAuthRequest: Sendable, Hashable {
    /// The server's id of the transaction, which the answer names.
    public var transactionID: String
    /// The profile on this device the request is for.
    public var profile: UserProfile
    /// The server-configured type's name, e.g. `login` or `payment`.
    public var type: String
    /// How the user approves it: a confirmation, the PIN, biometrics or a custom authenticator.
    public var method: MobileAuthMethod
    /// The portal's short message (the one a push shows).
    public var message: String
    /// The portal's secure message, of any length: it only ever travels sealed for this device.
    public var secureMessage: String?
    /// What the user approves when the type signs transactions; the device signs it.
    public var signingData: String?
    /// Whether the user must type the number the portal shows.
    public var numberMatching: Bool
    /// The push payload the request came from, as received (empty when none).
    public var userInfo: [String: ConfigValue]

    /// Makes a request; the optional parts are off or empty unless the server's type sets them.
    public init(
        transactionID: String,
        profile: UserProfile,
        type: String,
        method: MobileAuthMethod,
        message: String,
        secureMessage: String? = nil,
        signingData: String? = nil,
        numberMatching: Bool = false,
        userInfo: [String: ConfigValue] = [:]
    ) {
        self.transactionID = transactionID
        self.profile = profile
        self.type = type
        self.method = method
        self.message = message
        self.secureMessage = secureMessage
        self.signingData = signingData
        self.numberMatching = numberMatching
        self.userInfo = userInfo
    }
}

/// Why the user refused a mobile authentication request.
public enum MobileAuthDenialReason: String, Sendable, Codable, CaseIterable {
    /// The user said no.
    case notAccepted = "not_accepted"
    /// The user does not recognise the request (possible fraud).
    case notRecognised = "not_recognised"
}

/// A confirmation challenge: accept or deny the request, typing the portal's number when
/// number matching is on.
public struct MobileAuthConfirmationChallenge: Sendable {
    /// The request to accept or deny.
    public var request: MobileAuthRequest
    /// Makes the challenge for `request`.
    public init(request: MobileAuthRequest) { self.request = request }
}

/// The user's answer to a confirmation challenge.
public enum MobileAuthConfirmationResponse: Sendable, Equatable {
    /// Accept. `number`: what the user typed, required when number matching is on.
    case accept(number: Int?)
    case deny(MobileAuthDenialReason)

    /// Accept without number matching.
    public static var accept: Self { .accept(number: nil) }
}

/// What the app implements to handle mobile authentication requests. Only the confirmation is
/// required: a PIN challenge the app does not answer is cancelled (which denies the request), a
/// biometric one falls back to the PIN, a custom authenticator one too, as in the seed SDK.
public protocol MobileAuthRequestDelegate: Sendable {
    /// Ask the user to accept or deny the request.
    func confirmation(_ challenge: MobileAuthConfirmationChallenge) async -> MobileAuthConfirmationResponse
    /// Ask the user for the PIN to approve `request`.
    func pin(_ challenge: PinChallenge, for request: MobileAuthRequest) async -> PinResponse
    /// Ask to scan with a biometric sensor to approve `request`, or to fall back to the PIN.
    func biometric(_ challenge: BiometricChallenge, for request: MobileAuthRequest) async -> BiometricResponse
    /// Ask the user for a custom authenticator's answer to approve `request`, or to fall back to
    /// the PIN.
    func customAuthenticator(
        _ challenge: CustomAuthenticatorChallenge,
        for request: MobileAuthRequest
    ) async -> CustomAuthenticatorResponse
    /// The request was answered (approved or denied) and the server took the answer.
    func didHandle(_ request: MobileAuthRequest, info: CustomInfo?) async
    /// The request could not be handled; `request` is nil when its payload could not be opened.
    func didFail(_ request: MobileAuthRequest?, error: any Error) async
}

extension MobileAuthRequestDelegate {
    /// Cancels, which denies the request.
    public func pin(_ challenge: PinChallenge, for request: MobileAuthRequest) async -> PinResponse { .cancel }
    /// Falls back to the PIN.
    public func biometric(_ challenge: BiometricChallenge, for request: MobileAuthRequest) async -> BiometricResponse {
        .fallbackToPin
    }
    /// Falls back to the PIN.
    public func customAuthenticator(
        _ challenge: CustomAuthenticatorChallenge,
        for request: MobileAuthRequest
    ) async -> CustomAuthenticatorResponse { .fallbackToPin }
    /// Does nothing.
    public func didHandle(_ request: MobileAuthRequest, info: CustomInfo?) async {}
    /// Does nothing.
    public func didFail(_ request: MobileAuthRequest?, error: any Error) async {}
}

extension ChallengeResponders {
    /// The responder a mobile authentication's authenticators see: each challenge reaches the
    /// delegate with the request it is about.
    public static func mobileAuthentication(
        _ delegate: any MobileAuthRequestDelegate,
        request: MobileAuthRequest
    ) -> any ChallengeResponder {
        MobileAuthResponder(delegate: delegate, request: request)
    }
}

private struct MobileAuthResponder: ChallengeResponder {
    let delegate: any MobileAuthRequestDelegate
    let request: MobileAuthRequest

    func pin(_ challenge: PinChallenge) async -> PinResponse { await delegate.pin(challenge, for: request) }
    func biometric(_ challenge: BiometricChallenge) async -> BiometricResponse {
        await delegate.biometric(challenge, for: request)
    }
    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) async -> CustomAuthenticatorResponse {
        await delegate.customAuthenticator(challenge, for: request)
    }
    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse { .cancel }
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        .cancel
    }
    func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse { .cancel }
}
