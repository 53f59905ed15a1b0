public import Foundation
public import GatehouseKernel

/// Runs an identity provider's client half against its server half in memory, through the same
/// kernel `FlowMachine` and `StageOutcome.identityProvider` the token server runs, so a plugin
/// tested alone is refused, revoked and failed closed exactly as in production: a server half's
/// thrown error that is no `DomainError` reaches the client as
/// `RegistrationError.externalIdentityProviderFailure`, and a client half that returns before its
/// server half named the user fails, as the SDK makes it fail.
///
/// Each registration is a flow of its own (the identity stage alone); the harness records every
/// message the client half sent and the user the server half named.
public actor IdentityProviderHarness {
    /// The client half under test.
    public nonisolated let identityProvider: any IdentityProvider
    /// The server half under test.
    public nonisolated let host: any IdentityProviderHost
    /// The clock the server half reads `RegistrationStepRequest.now` from; a ``ManualClock``
    /// unless given.
    public nonisolated let clock: any WallClock
    /// The user the server half vouched for in the last registration, once it succeeded.
    public private(set) var identity: RegisteredIdentity?
    /// Users whose sessions the provider asked to revoke (a replayed credential).
    public private(set) var revokedSubjects: [String] = []
    /// The grants (single-use credentials) whose sessions the provider asked to revoke.
    public private(set) var revokedGrants: [String] = []
    /// Every message the client half sent, in order, over all registrations.
    public private(set) var sentMessages: [Data] = []
    /// The messages the client half sent in the last registration.
    public private(set) var lastMessages: [Data] = []
    /// The errors the server refused messages with, in order, as the client received them.
    public private(set) var refusals: [any DomainError] = []

    /// What happens to one message of a registration, for the conformance suite.
    enum Interception: Sendable {
        /// Hand it to the server half.
        case deliver
        /// Hand the server half this instead.
        case replace(Data)
        /// Keep it from the server half (unused, for later) and refuse it.
        case withhold
    }

    /// Builds the server half that handles one message; by default always ``host``.
    private let hostForMessage: (@Sendable () throws -> any IdentityProviderHost)?
    private var flow: FlowState?
    /// The session the server half was (or, for a withheld message, would have been) handed with
    /// each message of the last registration.
    private(set) var sessions: [Data?] = []
    /// The messages withheld from the server half, in order.
    private(set) var withheld: [Data] = []
    /// Whether the client half of the last registration returned (rather than threw).
    private(set) var clientReturned = false

    /// Makes a harness for the two halves; the clock is a ``ManualClock`` unless given.
    public init(
        identityProvider: any IdentityProvider,
        host: any IdentityProviderHost,
        clock: any WallClock = ManualClock()
    ) {
        self.identityProvider = identityProvider
        self.host = host
        self.clock = clock
        self.hostForMessage = nil
    }

    /// A harness for a plugin loaded with ``PluginHarness/identityProvider(_:config:environment:)``.
    public init(_ loaded: LoadedPlugins.LoadedIdentityProvider, clock: any WallClock = ManualClock()) throws {
        guard let identityProvider = loaded.identityProvider, let host = loaded.host else {
            throw GenericError(.configurationInvalid, message: "Load both halves of the identity provider to test it.")
        }
        self.init(identityProvider: identityProvider, host: host, clock: clock)
    }

    /// A harness whose every message reaches a server half `load` builds afresh, as when each
    /// request of a flow lands on another instance of a cluster.
    init(
        _ loaded: LoadedPlugins.LoadedIdentityProvider,
        clock: any WallClock,
        hostForMessage load: @escaping @Sendable () throws -> any IdentityProviderHost
    ) throws {
        guard let identityProvider = loaded.identityProvider, let host = loaded.host else {
            throw GenericError(.configurationInvalid, message: "Load both halves of the identity provider to test it.")
        }
        self.identityProvider = identityProvider
        self.host = host
        self.clock = clock
        self.hostForMessage = load
    }

    /// Runs a registration, answering challenges with `responder`. `scopes` are the app's; the
    /// server half is handed them as the token server grants them (unique, sorted).
    public func register(responder: any ChallengeResponder, scopes: [String] = []) async throws -> RegistrationResult {
        try await register(responder: responder, scopes: scopes) { _, _ in .deliver }
    }

    /// Runs a registration whose messages go through `intercept` (by index) on their way.
    func register(
        responder: any ChallengeResponder,
        scopes: [String],
        intercept: @escaping @Sendable (Int, Data) -> Interception
    ) async throws -> RegistrationResult {
        try begin()
        clientReturned = false
        let granted = Array(Set(scopes)).sorted()
        let server = ServerConversation { message in
            try await self.deliver(message, scopes: granted, intercept: intercept)
        }
        let result: RegistrationResult
        do {
            result = try await identityProvider.register(
                RegistrationContext(scopes: scopes, server: server, responder: responder)
            )
        } catch {
            // The SDK cancels a flow its plugin gave up.
            cancel()
            throw error
        }
        clientReturned = true
        guard identity != nil else {
            cancel()
            throw GenericError(
                .requestInvalid,
                message:
                    "The \(identityProvider.descriptor.id) plugin ended its part before the server finished the stage."
            )
        }
        return result
    }

    /// Sends `messages` (recorded from an earlier registration) straight to the server half in a
    /// new registration, as an attacker replaying them would. Returns whether it named a user.
    public func replay(_ messages: [Data], scopes: [String] = []) async -> Bool {
        do {
            try begin()
            for message in messages {
                _ = try await handle(message, scopes: Array(Set(scopes)).sorted())
                if identity != nil { return true }
            }
        } catch {}
        cancel()
        return false
    }

    private func begin() throws {
        identity = nil
        sessions = []
        lastMessages = []
        let plan = FlowPlan.registration(identityProvider: identityProvider.descriptor.id, enrol: [])
        let (machine, actions) = FlowMachine.start(plan, counter: nil)
        flow = machine.state
        _ = try apply(actions)
    }

    private func cancel() {
        guard let state = flow else { return }
        var machine = FlowMachine(state: state)
        _ = try? apply(machine.cancel(counter: nil))
        flow = nil
    }

    private func deliver(
        _ message: Data,
        scopes: [String],
        intercept: @Sendable (Int, Data) -> Interception
    ) async throws -> ServerReply {
        let index = lastMessages.count
        sentMessages.append(message)
        lastMessages.append(message)
        sessions.append(flow?.session)
        switch intercept(index, message) {
        case .deliver:
            return try await handle(message, scopes: scopes)
        case .replace(let other):
            return try await handle(other, scopes: scopes)
        case .withhold:
            withheld.append(message)
            throw GenericError(.requestInvalid, message: "The test withheld this message from the server half.")
        }
    }

    private func handle(_ message: Data, scopes: [String]) async throws -> ServerReply {
        guard let state = flow else { throw GenericError(.requestInvalid, message: "The flow is over.") }
        var machine = FlowMachine(state: state)
        if let reply = try apply(machine.messageArrived(counter: nil)) { return reply }
        let host = try hostForMessage?() ?? self.host
        let request = RegistrationStepRequest(
            message: message,
            session: machine.state.session,
            scopes: scopes,
            now: clock.now
        )
        let outcome = await StageOutcome.identityProvider(host.descriptor.type) { try await host.handle(request) }
        guard let reply = try apply(machine.apply(outcome, counter: nil)) else {
            throw GenericError(.requestInvalid, message: "The flow produced no answer.")
        }
        return reply
    }

    /// Applies the machine's actions as the token server's store does. Returns the reply, throws
    /// the refusal, `nil` when there is nothing to say.
    private func apply(_ actions: [FlowAction]) throws -> ServerReply? {
        for action in actions {
            switch action {
            case .identifyUser(let registered): identity = registered
            case .revokeUser(let subject, let grant):
                revokedSubjects.append(subject)
                if let grant { revokedGrants.append(grant) }
            case .saveFlow(let state): flow = state
            case .endFlow: flow = nil
            case .reply(let reply):
                if let challenge = reply.challenge { return .challenge(challenge) }
                return reply.stage == nil ? .completed(nil, info: reply.info) : nil
            case .refuse(let refusal):
                refusals.append(refusal.error)
                throw refusal.error
            case .reserveAttempt, .commitAttempt, .releaseAttempt, .countFailure, .attemptFailed, .resetFailures,
                .createProfile, .storeRegistration, .removeRegistration, .deregister, .issueTokens, .approveTransaction,
                .denyTransaction:
                break
            }
        }
        return nil
    }
}
