public import Foundation

/// What an app sees of an identity provider.
public typealias IdentityProviderDescriptor = PluginDescriptor

/// The client half of an identity provider: runs the registration challenges of one provider
/// type (open a browser, send custom data) and talks to its server half.
public protocol IdentityProvider: Sendable {
    var descriptor: IdentityProviderDescriptor { get }

    /// Runs the provider's part of a registration. Success is the return value; a refusal is a
    /// thrown ``DomainError`` such as `RegistrationError.customRegistrationFailure`.
    func register(_ context: RegistrationContext) async throws -> RegistrationResult
}

/// What a client half is given for one registration.
public struct RegistrationContext: Sendable {
    /// The scopes requested; empty means the application's defaults.
    public var scopes: [String]
    /// The channel to this provider's server half.
    public var server: ServerConversation
    /// The app's answers to challenges.
    public var responder: any ChallengeResponder

    /// Makes the context; the SDK does this for each registration.
    public init(scopes: [String], server: ServerConversation, responder: any ChallengeResponder) {
        self.scopes = scopes
        self.server = server
        self.responder = responder
    }
}

/// The end of a provider's part of a registration.
public struct RegistrationResult: Sendable, Equatable {
    /// What a custom API reported, handed to the app.
    public var info: CustomInfo?

    /// Makes a result; `info` is `nil` when the provider reported nothing.
    public init(info: CustomInfo? = nil) { self.info = info }
}

/// The server half of an identity provider: establishes who the user is.
public protocol IdentityProviderHost: Sendable {
    var descriptor: IdentityProviderDescriptor { get }

    /// Handles one registration message from the client half.
    func handle(_ request: RegistrationStepRequest) async throws -> RegistrationOutcome
}

/// One registration message, with the session the host returned with its previous challenge.
public struct RegistrationStepRequest: Sendable {
    /// The client half's message.
    public var message: Data
    /// The session the host returned with its previous challenge in this registration; `nil` for
    /// the first message.
    public var session: Data?
    /// The scopes the app requested; empty means the application's defaults.
    public var scopes: [String]
    /// The current time, from the server's clock.
    public var now: Date

    /// Makes a request; the server does this for each message.
    public init(message: Data, session: Data? = nil, scopes: [String], now: Date) {
        self.message = message
        self.session = session
        self.scopes = scopes
        self.now = now
    }
}

/// What an identity provider's server half decided about one message.
public enum RegistrationOutcome: Sendable {
    /// More is needed from the client; `session` stays on the server.
    case challenge(payload: Data, session: Data)
    /// The user is identified.
    case registered(RegisteredIdentity)
    /// The registration is refused.
    case failure(RegistrationError)
    /// The registration is refused because the credential that names `subject` was used before
    /// (a replayed authorization code): whatever it issued then must be revoked (RFC 9700 §4.5).
    /// With `grant` (the ``RegisteredIdentity/grant`` its first use reported), exactly the
    /// sessions that use issued are revoked; without it, every session of `subject`.
    case replayed(RegistrationError, subject: String, grant: String? = nil)
}

/// The user an identity provider vouched for.
public struct RegisteredIdentity: Sendable, Equatable {
    /// The user's stable identifier at the provider; registering it again reuses its profile.
    public var subject: String
    /// What a custom API reported.
    public var info: CustomInfo?
    /// The single-use credential the user was identified with (say, an authorization code's
    /// hash): the sessions this registration issues carry it, so a replay of that credential
    /// revokes exactly them.
    public var grant: String?

    /// Makes an identity; `info` and `grant` are `nil` unless the provider has them.
    public init(subject: String, info: CustomInfo? = nil, grant: String? = nil) {
        self.subject = subject
        self.info = info
        self.grant = grant
    }
}
