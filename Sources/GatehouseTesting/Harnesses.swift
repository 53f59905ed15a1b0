public import Foundation
public import GatehouseKernel

/// Runs an authenticator's client half against its server half in memory, through the same
/// kernel `FlowMachine` the token server runs, so a plugin tested alone counts attempts,
/// deregisters at the maximum and stores registrations exactly as in production. It hands the
/// machine the same facts the server does: a decision that comes after
/// `FlowMachine.attemptHoldLifetime` on ``clock``, or after the registration changed, is refused
/// uncounted.
///
/// It keeps one profile's counter and the server half's registration between calls, and records
/// every message the client sent.
public actor AuthenticatorHarness {
    /// The client half under test.
    public nonisolated let authenticator: any Authenticator
    /// The server half under test.
    public nonisolated let verifier: any AuthenticatorVerifier
    /// The one profile the harness enrolls and authenticates, `TEST01` unless given.
    public nonisolated let profile: UserProfile
    /// The client half's storage for the profile, kept between calls, to check what it stored.
    public nonisolated let storage: InMemoryKeyValueStore
    /// The clock the server half reads `VerificationRequest.now` from; a ``ManualClock`` unless
    /// given.
    public nonisolated let clock: any WallClock
    /// Failures allowed before the profile is deregistered; 0 means unlimited.
    public nonisolated let maximumFailures: Int
    /// What the server half stored at enrolment (and after a rotating authentication).
    public private(set) var registration: Data?
    /// The profile's failure counter as the server holds it (success resets it).
    public private(set) var failureCount = 0
    /// Every attempt the counter took and kept, whatever came after.
    public private(set) var countedAttempts = 0
    /// Whether the last counted failure reached the maximum and deregistered the profile.
    public private(set) var isDeregistered = false
    /// Every message the client half sent, in order.
    public private(set) var sentMessages: [Data] = []
    /// The machine's actions for every message, in order, for assertions.
    public private(set) var actions: [[String]] = []

    private var flow: FlowState?
    /// The sessions of the current flow and of the previous one, by message.
    private var sessions: [Data?] = []
    private var previousSessions: [Data?] = []
    /// When set, each message is handed the session the previous flow had at the same message
    /// instead of its own, as an attacker replaying a stale session (an old nonce) would.
    public private(set) var replaysStaleSessions = false
    /// Whether a stale session that differs from the current one was handed over.
    public private(set) var handedStaleSession = false

    /// Turns on (or off) handing each message the session the previous flow had at the same
    /// message, to check that the server half refuses a stale session.
    public func replayStaleSessions(_ on: Bool) {
        replaysStaleSessions = on
        handedStaleSession = false
    }

    /// Makes a harness for the two halves, for one profile with no maximum of failures unless
    /// given.
    public init(
        authenticator: any Authenticator,
        verifier: any AuthenticatorVerifier,
        profile: UserProfile = UserProfile(id: "TEST01"),
        maximumFailures: Int = 0,
        clock: any WallClock = ManualClock()
    ) {
        self.authenticator = authenticator
        self.verifier = verifier
        self.profile = profile
        self.storage = InMemoryKeyValueStore()
        self.maximumFailures = maximumFailures
        self.clock = clock
    }

    /// A harness for `loaded` that starts where `previous` left off: the same device storage,
    /// registration, profile and counter, as after the operator changed the plugin's
    /// configuration and restarted — to test that existing registrations keep working.
    public init(_ loaded: LoadedPlugins.LoadedAuthenticator, continuing previous: AuthenticatorHarness) async throws {
        guard let authenticator = loaded.authenticator, let verifier = loaded.verifier else {
            throw GenericError(.configurationInvalid, message: "Load both halves of the authenticator to test it.")
        }
        self.authenticator = authenticator
        self.verifier = verifier
        self.profile = previous.profile
        self.storage = previous.storage
        self.maximumFailures = previous.maximumFailures
        self.clock = previous.clock
        self.registration = await previous.registration
        self.failureCount = await previous.failureCount
        self.countedAttempts = await previous.countedAttempts
        self.isDeregistered = await previous.isDeregistered
    }

    /// A harness for a plugin loaded with ``PluginHarness/authenticator(_:config:environment:)``.
    public init(
        _ loaded: LoadedPlugins.LoadedAuthenticator,
        profile: UserProfile = UserProfile(id: "TEST01"),
        maximumFailures: Int = 0,
        clock: any WallClock = ManualClock()
    ) throws {
        guard let authenticator = loaded.authenticator, let verifier = loaded.verifier else {
            throw GenericError(.configurationInvalid, message: "Load both halves of the authenticator to test it.")
        }
        self.init(
            authenticator: authenticator,
            verifier: verifier,
            profile: profile,
            maximumFailures: maximumFailures,
            clock: clock
        )
    }

    private var id: String { authenticator.descriptor.id }
    private var counter: AttemptCounter { AttemptCounter(failures: failureCount, maximum: maximumFailures) }

    /// Enrols the authenticator, answering challenges with `responder`.
    public func enroll(responder: any ChallengeResponder) async throws -> AuthenticatorResult {
        try begin(FlowPlan(kind: .authenticatorRegistration, stages: [.enrol(id)]))
        let context = AuthenticatorContext(
            profile: profile,
            storage: storage,
            server: conversation(),
            responder: responder
        )
        return try await authenticator.enroll(context)
    }

    /// Runs one authentication attempt. `failureCounts` overrides what the first challenge shows.
    public func authenticate(
        responder: any ChallengeResponder,
        failureCounts: FailureCounts? = nil,
        previousError: (any DomainError)? = nil
    ) async throws -> AuthenticatorResult {
        // As in production, the PIN (here a stand-in id) is the fallback of every other authenticator.
        try begin(.authentication(with: id, fallback: Self.fallbackID))
        let context = AuthenticatorContext(
            profile: profile,
            storage: storage,
            server: conversation(),
            responder: responder,
            failureCounts: failureCounts ?? counter.failureCounts,
            previousError: previousError
        )
        do {
            let result = try await authenticator.authenticate(context)
            // The SDK tells the server of a fallback; the machine decides what it costs.
            if case .fallbackToPin = result, let state = flow {
                var machine = FlowMachine(state: state)
                _ = try apply(machine.fallBack(counter: counter))
                flow = nil
            }
            return result
        } catch {
            // The SDK cancels a flow it gives up; the machine settles the attempt it held.
            if let state = flow {
                var machine = FlowMachine(state: state)
                _ = try? apply(machine.cancel(counter: counter))
                flow = nil
            }
            throw error
        }
    }

    /// The id standing for the PIN when the plugin under test falls back.
    static let fallbackID = "harness.pin"

    /// Deregisters the authenticator: the client half's clean-up, then the server forgets it.
    public func deregister(responder: any ChallengeResponder) async throws {
        let refusing = ServerConversation { _ in
            throw GenericError(.requestInvalid, message: "Deregistration sends nothing to the server half.")
        }
        try await authenticator.deregister(
            AuthenticatorContext(profile: profile, storage: storage, server: refusing, responder: responder)
        )
        registration = nil
    }

    /// Sends `messages` (recorded from an earlier authentication) straight to the server half in
    /// a new authentication, as an attacker replaying them would. Returns whether it succeeded.
    public func replay(_ messages: [Data]) async -> Bool {
        do {
            try begin(.authentication(with: id, fallback: nil))
            for message in messages {
                if case .completed = try await deliver(message) { return true }
            }
            return false
        } catch {
            return false
        }
    }

    private func begin(_ plan: FlowPlan) throws {
        guard !isDeregistered else { throw GenericError(.userDeregistered) }
        if !sessions.isEmpty { previousSessions = sessions }
        sessions = []
        let (machine, startActions) = FlowMachine.start(plan, counter: plan.kind == .authentication ? counter : nil)
        flow = machine.state
        _ = try apply(startActions)
    }

    private nonisolated func conversation() -> ServerConversation {
        ServerConversation { message in try await self.deliver(message) }
    }

    private func deliver(_ message: Data) async throws -> ServerReply {
        sentMessages.append(message)
        guard let state = flow else { throw GenericError(.requestInvalid, message: "The flow is over.") }
        let counted = state.plan.kind == .authentication ? counter : nil
        var machine = FlowMachine(state: state)
        if let reply = try apply(machine.messageArrived(counter: counted)) { return reply }
        // What the server's store knows when the decision comes back: whether the held attempt
        // outlived its lifetime, and whether the registration changed while the plugin looked.
        let heldUntil = clock.now.addingTimeInterval(FlowMachine.attemptHoldLifetime)
        let registrationSeen = registration
        var session = machine.state.session
        let index = sessions.count
        sessions.append(session)
        if replaysStaleSessions, index < previousSessions.count, let stale = previousSessions[index], stale != session {
            handedStaleSession = true
            session = stale
        }
        let request = VerificationRequest(
            subject: "subject-\(profile.id)",
            profile: profile,
            message: message,
            session: session,
            registration: registration,
            now: clock.now
        )
        let type = verifier.descriptor.type
        let outcome: StageOutcome
        if case .enrol = machine.state.stage {
            outcome = await StageOutcome.authenticator(type) { try await verifier.enroll(request) }
        } else {
            outcome = await StageOutcome.authenticator(type) { try await verifier.verify(request) }
        }
        let facts = OutcomeFacts(
            holdLapsed: machine.state.attempt == .held && heldUntil <= clock.now,
            registrationChanged: registration != registrationSeen
        )
        let applied = machine.apply(outcome, counter: state.plan.kind == .authentication ? counter : nil, facts: facts)
        guard let reply = try apply(applied) else {
            throw GenericError(.requestInvalid, message: "The flow produced no answer.")
        }
        return reply
    }

    /// Applies the machine's actions to the harness' in-memory state, as the server's store does
    /// to its database. Returns the reply, throws the refusal, `nil` when there is nothing to say.
    private func apply(_ list: [FlowAction]) throws -> ServerReply? {
        if !list.isEmpty { actions.append(list.map(\.description)) }
        for action in list {
            switch action {
            case .reserveAttempt, .releaseAttempt: break
            case .commitAttempt, .countFailure:
                failureCount += 1
                countedAttempts += 1
            case .attemptFailed: break
            case .resetFailures: failureCount = 0
            case .identifyUser, .createProfile, .issueTokens, .approveTransaction, .denyTransaction, .revokeUser: break
            case .storeRegistration(_, let data): registration = data
            case .removeRegistration: registration = nil
            case .deregister:
                isDeregistered = true
                registration = nil
            case .saveFlow(let state): flow = state
            case .endFlow: flow = nil
            case .reply(let reply):
                guard let challenge = reply.challenge else {
                    return reply.stage == nil || reply.completed != nil ? .completed(nil, info: reply.info) : nil
                }
                return .challenge(challenge)
            case .refuse(let refusal):
                // As the SDK hears a counted refusal over HTTP: with the attempts left.
                if let counts = refusal.failureCounts, var error = refusal.error as? AuthenticationError {
                    error.details.remainingFailureCount = counts.remaining
                    throw error
                }
                throw refusal.error
            }
        }
        return nil
    }
}
