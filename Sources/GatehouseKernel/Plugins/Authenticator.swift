public import Foundation

/// What an app sees of an authenticator.
public typealias AuthenticatorDescriptor = PluginDescriptor

/// The client half of an authenticator: asks the user through the app's responder and talks to
/// its own server half (an ``AuthenticatorVerifier``) through a ``ServerConversation``.
///
/// One call is one whole flow: success is the return value, a failure is a thrown
/// ``DomainError``, cancellation is `GenericError.actionCancelled` or task cancellation.
public protocol Authenticator: Sendable {
    var descriptor: AuthenticatorDescriptor { get }

    /// Sets the authenticator up for a profile, e.g. the PIN during registration.
    func enroll(_ context: AuthenticatorContext) async throws -> AuthenticatorResult

    /// Proves that the profile's user is present.
    func authenticate(_ context: AuthenticatorContext) async throws -> AuthenticatorResult

    /// The authenticator is being deregistered for the profile: ask the user if it must (a
    /// custom deregistration challenge) and clean up outside the profile's storage, which the SDK
    /// wipes. Throwing (`GenericError.actionCancelled`) keeps it registered. Default: nothing.
    func deregister(_ context: AuthenticatorContext) async throws
}

extension Authenticator {
    /// Does nothing: the SDK removes the plugin's storage for the profile itself.
    public func deregister(_ context: AuthenticatorContext) async throws {}
}

/// A PIN authenticator's client half that can check a PIN against the policy its server half
/// publishes (its entry in the server's configuration), outside a create-PIN challenge: an app
/// can tell the user a PIN will be refused before registering or changing it. The PIN never
/// leaves the device, so this check (and the one the create-PIN challenge makes) is the only one
/// it gets.
public protocol PinPolicyChecker: Sendable {
    /// Every rule of the `published` policy that `pin` breaks, most important first; empty when
    /// the policy accepts it. Throws when `published` holds no policy this authenticator reads.
    func violations(of pin: PIN, publishedConfiguration published: ConfigValue) throws -> [PinValidationError]
}

/// The seed SDK's authenticator types. The PIN is the one every profile has and every other
/// falls back to; hosts find it by this kind, never by a type name.
public enum AuthenticatorKind: String, Sendable, Codable, CaseIterable {
    case pin
    case biometric
    case custom
}

/// What a client half is given for one flow.
public struct AuthenticatorContext: Sendable {
    /// The profile being enrolled or authenticated.
    public var profile: UserProfile
    /// State kept for this plugin and this profile on the device.
    public var storage: any KeyValueStore
    /// The channel to this plugin's server half.
    public var server: ServerConversation
    /// The app's answers to challenges.
    public var responder: any ChallengeResponder
    /// Failure counts known before the flow starts, for the first PIN challenge.
    public var failureCounts: FailureCounts?
    /// Why the previous attempt in this flow was refused, to show with the next challenge.
    public var previousError: (any DomainError)?

    /// Makes the context; the SDK does this for each flow.
    public init(
        profile: UserProfile,
        storage: any KeyValueStore,
        server: ServerConversation,
        responder: any ChallengeResponder,
        failureCounts: FailureCounts? = nil,
        previousError: (any DomainError)? = nil
    ) {
        self.profile = profile
        self.storage = storage
        self.server = server
        self.responder = responder
        self.failureCounts = failureCounts
        self.previousError = previousError
    }
}

/// How a client half ended a flow that did not fail.
public enum AuthenticatorResult: Sendable, Equatable {
    /// The server half accepted the proof; `info` is what a custom authenticator reported.
    case completed(info: CustomInfo?)
    /// The user, or the authenticator itself, chose to authenticate with the PIN instead;
    /// `reason` says why when the authenticator failed rather than the user choosing.
    case fallbackToPin(reason: CustomInfo?)
}

/// A message exchange between a client half and its server half. The client SDK routes the
/// messages (in-process or over HTTP); plugins only see bytes of their own format.
public struct ServerConversation: Sendable {
    private let exchange: @Sendable (Data) async throws -> ServerReply

    /// Makes a conversation that sends each message through `exchange` and returns what the server
    /// half answered.
    public init(_ exchange: @escaping @Sendable (Data) async throws -> ServerReply) {
        self.exchange = exchange
    }

    /// Sends `message` to the server half and returns its reply. A refusal arrives as a thrown
    /// ``DomainError`` (e.g. `AuthenticationError.invalidPin` with the remaining count).
    public func send(_ message: Data) async throws -> ServerReply {
        try await exchange(message)
    }
}

/// The server half's answer to one message.
public enum ServerReply: Sendable, Equatable {
    /// The server half wants another message; the payload is in the plugin's own format.
    case challenge(Data)
    /// The flow succeeded.
    case completed(Data?, info: CustomInfo?)
}

/// The server half of an authenticator: checks what the client half sends.
///
/// Server halves keep no state of their own between messages: what they need later they return
/// as a challenge's `session`, and the server hands it back with the next message. Attempt
/// counting is the server's, not the plugin's: a challenge that lets the client test a guess says
/// so with `reservesAttempt`, a failure says whether it counts, and the server keeps one counter
/// per profile for every authenticator type alike.
public protocol AuthenticatorVerifier: Sendable {
    var descriptor: AuthenticatorDescriptor { get }

    /// Handles one enrolment message; `.success` carries the registration data to keep.
    func enroll(_ request: VerificationRequest) async throws -> AuthenticationOutcome

    /// Handles one authentication message.
    func verify(_ request: VerificationRequest) async throws -> AuthenticationOutcome
}

/// One message to a server half, with everything the server keeps for it.
public struct VerificationRequest: Sendable {
    /// The server's identifier of the user.
    public var subject: String
    /// The profile on the device that sent the message, as the server knows it.
    public var profile: UserProfile
    /// The client half's message.
    public var message: Data
    /// The session the server half returned with its previous challenge in this flow.
    public var session: Data?
    /// What the server half stored when the authenticator was enrolled: given to an
    /// authentication, and to an enrolment that replaces it (a PIN change).
    public var registration: Data?
    /// The current time, from the server's clock.
    public var now: Date

    /// Makes a request; the server does this for each message.
    public init(
        subject: String,
        profile: UserProfile,
        message: Data,
        session: Data? = nil,
        registration: Data? = nil,
        now: Date
    ) {
        self.subject = subject
        self.profile = profile
        self.message = message
        self.session = session
        self.registration = registration
        self.now = now
    }
}

/// What a server half decided about one message. Closed by definition: every check ends in one
/// of these three.
public enum AuthenticationOutcome: Sendable {
    /// The proof is good.
    case success(AuthenticationSuccess)
    /// More is needed from the client.
    case challenge(AuthenticatorChallenge)
    /// The proof is wrong or the request cannot be served.
    case failure(AuthenticationFailure)
}

/// A successful check.
public struct AuthenticationSuccess: Sendable, Equatable {
    /// Sent back to the client half.
    public var reply: Data?
    /// Replaces the stored registration data (enrolment, or a rotated secret).
    public var registration: Data?
    /// Reported to the app.
    public var info: CustomInfo?

    /// Makes a success; with no arguments, nothing is sent, kept or reported.
    public init(reply: Data? = nil, registration: Data? = nil, info: CustomInfo? = nil) {
        self.reply = reply
        self.registration = registration
        self.info = info
    }
}

/// A request for another message from the client half.
public struct AuthenticatorChallenge: Sendable, Equatable {
    /// Sent to the client half.
    public var payload: Data
    /// Kept by the server and handed back with the next message; never sent to the client.
    public var session: Data
    /// Whether answering this challenge lets the client test a guess, as a PIN evaluation does.
    /// The server then counts one attempt before it releases the challenge (refusing it when the
    /// maximum is reached) and clears the count when the flow succeeds.
    public var reservesAttempt: Bool

    /// Makes a challenge; it reserves no attempt unless `reservesAttempt` says so.
    public init(payload: Data, session: Data, reservesAttempt: Bool = false) {
        self.payload = payload
        self.session = session
        self.reservesAttempt = reservesAttempt
    }
}

/// A failed check, with its typed reason.
public struct AuthenticationFailure: Error, Sendable {
    /// Why the check failed, e.g. `invalidPin`; the app gets it.
    public var error: AuthenticationError
    /// Whether the failure counts towards the maximum number of failures. A wrong answer counts;
    /// a malformed or out-of-order message does not.
    public var countsAsAttempt: Bool
    /// Whether the authenticator can no longer be used for this profile (a locked-out sensor, a
    /// custom status 5000): the server forgets its registration and the flow falls back to the
    /// PIN.
    public var removesRegistration: Bool

    /// Makes a failure; it removes nothing unless `removesRegistration` says so.
    public init(_ error: AuthenticationError, countsAsAttempt: Bool, removesRegistration: Bool = false) {
        self.error = error
        self.countsAsAttempt = countsAsAttempt
        self.removesRegistration = removesRegistration
    }
}
