public import Foundation
public import GatehouseKernel

/// Runs an authenticator's client half against its server half in memory, the way the token
/// server would route their messages, so a plugin can be tested alone.
///
/// It keeps the server half's session between messages and its registration after enrolment,
/// counts the attempts the server would count (challenges with `reservesAttempt`, and counted
/// failures outside them), and records every message the client sent.
public actor AuthenticatorHarness {
    public nonisolated let authenticator: any Authenticator
    public nonisolated let verifier: any AuthenticatorVerifier
    public nonisolated let profile: UserProfile
    public nonisolated let storage: InMemoryKeyValueStore
    public nonisolated let clock: any WallClock
    /// What the server half stored at enrolment.
    public private(set) var registration: Data?
    /// Attempts the server would have counted so far.
    public private(set) var countedAttempts = 0
    /// Every message the client half sent, in order.
    public private(set) var sentMessages: [Data] = []

    private var session: Data?

    public init(
        authenticator: any Authenticator,
        verifier: any AuthenticatorVerifier,
        profile: UserProfile = UserProfile(id: "TEST01"),
        clock: any WallClock = ManualClock()
    ) {
        self.authenticator = authenticator
        self.verifier = verifier
        self.profile = profile
        self.storage = InMemoryKeyValueStore()
        self.clock = clock
    }

    /// A harness for a plugin loaded with ``PluginHarness/authenticator(_:config:environment:)``.
    public init(_ loaded: LoadedPlugins.LoadedAuthenticator, profile: UserProfile = UserProfile(id: "TEST01")) throws {
        guard let authenticator = loaded.authenticator, let verifier = loaded.verifier else {
            throw GenericError(.configurationInvalid, message: "Load both halves of the authenticator to test it.")
        }
        self.init(authenticator: authenticator, verifier: verifier, profile: profile)
    }

    /// Enrols the authenticator, answering challenges with `responder`.
    public func enroll(responder: any ChallengeResponder) async throws -> AuthenticatorResult {
        session = nil
        let context = AuthenticatorContext(
            profile: profile,
            storage: storage,
            server: conversation(enrolling: true),
            responder: responder
        )
        return try await authenticator.enroll(context)
    }

    /// Runs one authentication attempt.
    public func authenticate(
        responder: any ChallengeResponder,
        failureCounts: FailureCounts? = nil,
        previousError: (any DomainError)? = nil
    ) async throws -> AuthenticatorResult {
        session = nil
        let context = AuthenticatorContext(
            profile: profile,
            storage: storage,
            server: conversation(enrolling: false),
            responder: responder,
            failureCounts: failureCounts,
            previousError: previousError
        )
        return try await authenticator.authenticate(context)
    }

    private nonisolated func conversation(enrolling: Bool) -> ServerConversation {
        ServerConversation { message in try await self.deliver(message, enrolling: enrolling) }
    }

    private func deliver(_ message: Data, enrolling: Bool) async throws -> ServerReply {
        sentMessages.append(message)
        let request = VerificationRequest(
            subject: "subject-\(profile.id)",
            profile: profile,
            message: message,
            session: session,
            registration: registration,
            now: clock.now
        )
        let outcome = enrolling ? try await verifier.enroll(request) : try await verifier.verify(request)
        switch outcome {
        case .challenge(let challenge):
            session = challenge.session
            if challenge.reservesAttempt { countedAttempts += 1 }
            return .challenge(challenge.payload)
        case .success(let success):
            session = nil
            if let stored = success.registration { registration = stored }
            return .completed(success.reply, info: success.info)
        case .failure(let failure):
            session = nil
            throw failure.error
        case .notApplicable:
            throw GenericError(.requestInvalid, message: "The server half said the message was not for it.")
        }
    }
}

/// Runs an identity provider's client half against its server half in memory.
public actor IdentityProviderHarness {
    public nonisolated let identityProvider: any IdentityProvider
    public nonisolated let host: any IdentityProviderHost
    public nonisolated let clock: any WallClock
    /// The user the server half vouched for, after a successful registration.
    public private(set) var identity: RegisteredIdentity?
    /// Every message the client half sent, in order.
    public private(set) var sentMessages: [Data] = []

    private var session: Data?

    public init(
        identityProvider: any IdentityProvider,
        host: any IdentityProviderHost,
        clock: any WallClock = ManualClock()
    ) {
        self.identityProvider = identityProvider
        self.host = host
        self.clock = clock
    }

    /// A harness for a plugin loaded with ``PluginHarness/identityProvider(_:config:environment:)``.
    public init(_ loaded: LoadedPlugins.LoadedIdentityProvider) throws {
        guard let identityProvider = loaded.identityProvider, let host = loaded.host else {
            throw GenericError(.configurationInvalid, message: "Load both halves of the identity provider to test it.")
        }
        self.init(identityProvider: identityProvider, host: host)
    }

    /// Runs a registration, answering challenges with `responder`.
    public func register(responder: any ChallengeResponder, scopes: [String] = []) async throws -> RegistrationResult {
        session = nil
        identity = nil
        let server = ServerConversation { message in try await self.deliver(message, scopes: scopes) }
        return try await identityProvider.register(
            RegistrationContext(scopes: scopes, server: server, responder: responder)
        )
    }

    private func deliver(_ message: Data, scopes: [String]) async throws -> ServerReply {
        sentMessages.append(message)
        let outcome = try await host.handle(
            RegistrationStepRequest(message: message, session: session, scopes: scopes, now: clock.now)
        )
        switch outcome {
        case .challenge(let payload, let newSession):
            session = newSession
            return .challenge(payload)
        case .registered(let registered):
            session = nil
            identity = registered
            return .completed(nil, info: registered.info)
        case .failure(let error):
            session = nil
            throw error
        }
    }
}
