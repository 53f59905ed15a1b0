import Foundation

/// The rules of every flow — stage order, attempt reservation and counting, deregistration at
/// the maximum, fallback, when tokens are issued — as a pure, synchronous state machine: input
/// in, actions out. The token server applies the actions in one transaction; GatehouseTesting's
/// harness runs the very same machine in memory, so the two cannot disagree.
///
/// Attempts: before a plugin looks at a message of an `authenticate` stage, the flow holds one
/// of the profile's attempts (``messageArrived(counter:)``), whatever the authenticator's type;
/// the plugin never counts. Failures plus held attempts never exceed the maximum: when every
/// attempt left is held by requests in progress, a new message waits (`actionAlreadyInProgress`,
/// the flow stays open). Success resets the counter; a counted failure turns the held attempt
/// into a failure; a failure that does not count, or a challenge that lets the client test
/// nothing, gives it back. A challenge that lets the client test a guess (`reservesAttempt`, a
/// PIN evaluation) turns it into a failure at once, cleared only by success. A failure that
/// reaches the maximum deregisters the profile. So concurrent attempts never test more guesses
/// than the maximum allows.
public struct FlowMachine: Sendable {
    /// Where the flow stands; the host stores it after each request (``FlowAction/saveFlow(_:)``)
    /// and resumes from it.
    public private(set) var state: FlowState

    /// Resumes a flow from the state the host stored.
    public init(state: FlowState) { self.state = state }

    /// Seconds a held attempt lasts while a plugin looks at a message: a decision that comes
    /// later (or never, from a request that died) is refused uncounted, as
    /// ``OutcomeFacts/holdLapsed``. The token server and the testing harness both use it.
    public static let attemptHoldLifetime = 30.0

    /// Starts a flow. `counter` is the profile's (nil for a registration, which has no profile yet).
    public static func start(_ plan: FlowPlan, counter: AttemptCounter?) -> (FlowMachine, [FlowAction]) {
        let machine = FlowMachine(state: FlowState(plan: plan))
        if let counter, counter.isExhausted {
            return (machine, machine.concluding(machine.deregistering([])))
        }
        guard let first = plan.stages.first else {
            return (
                machine, [.refuse(FlowRefusal(GenericError(.configurationInvalid, message: "The flow has no stage.")))]
            )
        }
        return (
            machine,
            [.saveFlow(machine.state), .reply(FlowReply(stage: first, failureCounts: counts(first, counter)))]
        )
    }

    /// A message arrived for the current stage; call before the plugin sees it. For an
    /// `authenticate` stage without a held attempt this holds one, or deregisters the profile
    /// when none is left. An empty answer means: nothing to apply.
    public mutating func messageArrived(counter: AttemptCounter?) -> [FlowAction] {
        guard case .authenticate = state.stage, state.attempt == .none, let counter else { return [] }
        if counter.isExhausted { return concluding(deregistering([])) }
        if counter.isBusy { return [.refuse(FlowRefusal(Self.busy, stage: state.stage))] }
        state.attempt = .held
        return [.reserveAttempt, .saveFlow(state)]
    }

    /// The plugin's decision about the message, with what the host knows about the time it took
    /// (`facts`): a decision that comes after the flow's held attempt lapsed, or about a
    /// registration that changed meanwhile, is refused without counting.
    public mutating func apply(
        _ outcome: StageOutcome,
        counter: AttemptCounter?,
        facts: OutcomeFacts = OutcomeFacts()
    ) -> [FlowAction] {
        concluding(decide(ruling(outcome, facts), counter: counter))
    }

    /// The outcome the facts leave standing.
    private func ruling(_ outcome: StageOutcome, _ facts: OutcomeFacts) -> StageOutcome {
        if facts.holdLapsed, state.attempt == .held {
            return .failed(StageFailure(Self.lapsed, countsAsAttempt: false))
        }
        if facts.registrationChanged, case .succeeded = outcome, case .authenticate = state.stage {
            return .failed(StageFailure(Self.registrationChanged, countsAsAttempt: false))
        }
        return outcome
    }

    /// A mobile authentication whose flow ends without its approval denies the transaction.
    private func concluding(_ actions: [FlowAction]) -> [FlowAction] {
        guard state.plan.kind == .mobileAuthentication,
            actions.contains(where: { if case .endFlow = $0 { true } else { false } }),
            !actions.contains(where: { if case .approveTransaction = $0 { true } else { false } })
        else { return actions }
        let refused = actions.contains { if case .refuse = $0 { true } else { false } }
        return actions + [.denyTransaction(refused: refused)]
    }

    private mutating func decide(_ outcome: StageOutcome, counter: AttemptCounter?) -> [FlowAction] {
        guard let stage = state.stage else { return [.endFlow, .refuse(FlowRefusal(Self.finished))] }
        switch outcome {
        case .challenge(let challenge):
            var actions: [FlowAction] = []
            if case .authenticate(let id) = stage {
                switch (challenge.reservesAttempt, state.attempt) {
                case (true, .held): actions.append(.commitAttempt)
                case (true, .none), (true, .committed):
                    // A guess released before and never answered has failed.
                    let abandoned: [FlowAction] = state.attempt == .committed ? [.attemptFailed(authenticator: id)] : []
                    // Another guess in the same flow (a second PIN evaluation) is another attempt:
                    // count it before anything is released, within the same limits as a new flow.
                    if let counter, counter.isExhausted { return deregistering(abandoned) }
                    if let counter, counter.isBusy { return [.refuse(FlowRefusal(Self.busy, stage: stage))] }
                    actions += abandoned
                    actions.append(.countFailure)
                case (false, .held): actions.append(.releaseAttempt)
                case (false, .committed), (false, .none): break
                }
                state.attempt = challenge.reservesAttempt || state.attempt == .committed ? .committed : .none
            }
            state.session = challenge.session
            return actions + [.saveFlow(state), .reply(FlowReply(stage: stage, challenge: challenge.payload))]

        case .identified(let identity):
            guard case .identity = stage else { return internalFailure("an authenticator named a user") }
            state.subject = identity.subject
            state.grant = identity.grant
            state.info = identity.info
            return [.identifyUser(identity)] + advance(from: stage, info: identity.info, failures: counter)

        case .succeeded(let success):
            var actions: [FlowAction] = []
            var counter = counter
            switch stage {
            case .identity:
                return internalFailure("an identity provider reported an authentication")
            case .enrol(let id):
                guard let data = success.registration else {
                    return internalFailure("the \(id) enrolment produced no registration data")
                }
                state.pending.append(PendingRegistration(authenticator: id, data: data))
            case .authenticate(let id):
                if state.attempt == .held { actions.append(.releaseAttempt) }
                actions.append(.resetFailures)
                counter?.failures = 0
                if let data = success.registration {
                    state.pending.append(PendingRegistration(authenticator: id, data: data))
                }
            }
            return actions + advance(from: stage, info: success.info, failures: counter)

        case .failed(let failure):
            return fail(failure, at: stage, counter: counter)
        }
    }

    /// The client gave up: a held attempt is given back; a committed one counts.
    public mutating func cancel(counter: AttemptCounter?) -> [FlowAction] {
        let (actions, failures) = settleHold(counter: counter)
        if let failures, failures.isExhausted { return concluding(deregistering(actions)) }
        return concluding(actions + [.endFlow, .reply(FlowReply(stage: nil))])
    }

    /// The client chose the fallback (the PIN) instead of the current authenticator.
    public mutating func fallBack(counter: AttemptCounter?) -> [FlowAction] {
        guard case .authenticate(let current) = state.stage, let fallback = state.plan.fallback, fallback != current
        else {
            return [
                .refuse(
                    FlowRefusal(
                        GenericError(.requestInvalid, message: "This flow has no authenticator to fall back to."),
                        stage: state.stage
                    )
                )
            ]
        }
        let (actions, failures) = settleHold(counter: counter)
        if let failures, failures.isExhausted { return concluding(deregistering(actions)) }
        let next = FlowStage.authenticate(fallback)
        state.plan.stages[state.position] = next
        state.session = nil
        return actions + [.saveFlow(state), .reply(FlowReply(stage: next, failureCounts: failures?.failureCounts))]
    }

    // MARK: - Rules

    private static let finished = GenericError(.requestInvalid, message: "The flow is already finished.")
    private static let lapsed = GenericError(.requestInvalid, message: "The answer took too long to check; try again.")
    private static let registrationChanged = AuthenticationError(
        .authenticatorInvalid,
        message: "The authenticator changed while the answer was checked; try again."
    )
    private static let busy = GenericError(
        .actionAlreadyInProgress,
        message: "Other attempts for this user are in progress; try again when they are done."
    )

    private static func counts(_ stage: FlowStage, _ counter: AttemptCounter?) -> FailureCounts? {
        guard case .authenticate = stage else { return nil }
        return counter?.failureCounts
    }

    private mutating func advance(
        from completed: FlowStage,
        info: CustomInfo?,
        failures: AttemptCounter?
    )
        -> [FlowAction]
    {
        state.position += 1
        state.session = nil
        state.attempt = .none
        if let next = state.stage {
            return [
                .saveFlow(state),
                .reply(
                    FlowReply(stage: next, completed: completed, info: info, failureCounts: Self.counts(next, failures))
                ),
            ]
        }
        var actions: [FlowAction] = state.plan.kind == .registration ? [.createProfile] : []
        actions += state.pending.map { .storeRegistration(authenticator: $0.authenticator, data: $0.data) }
        if state.plan.issuesTokens { actions.append(.issueTokens) }
        if state.plan.kind == .mobileAuthentication { actions.append(.approveTransaction) }
        return actions + [.endFlow, .reply(FlowReply(stage: nil, completed: completed, info: info ?? state.info))]
    }

    private mutating func fail(_ failure: StageFailure, at stage: FlowStage, counter: AttemptCounter?) -> [FlowAction] {
        guard case .authenticate(let id) = stage else {
            // Identity and enrolment test no guess: a refusal ends the flow, and nothing was written
            // but the revocation a replayed credential asks for.
            let revocation: [FlowAction] =
                failure.revokesSubject.map { [.revokeUser(subject: $0, grant: failure.revokesGrant)] } ?? []
            return revocation + [.endFlow, .refuse(FlowRefusal(failure.error, isTemporary: failure.isTemporary))]
        }
        var actions: [FlowAction] = []
        var counter = counter
        let counted = failure.countsAsAttempt || state.attempt == .committed
        switch (counted, state.attempt) {
        case (true, .held):
            actions.append(.commitAttempt)
            counter?.failures += 1
        case (true, .none):
            actions.append(.countFailure)
            counter?.failures += 1
        case (false, .held): actions.append(.releaseAttempt)
        case (_, .committed), (false, .none): break
        }
        // Counted when the guess was released (a PIN evaluation) or just now: a failure either way.
        if counted { actions.append(.attemptFailed(authenticator: id)) }
        state.attempt = .none
        state.session = nil
        if counted, let counter, counter.isExhausted { return deregistering(actions) }
        let counts = counted ? counter?.failureCounts : nil
        if failure.removesRegistration {
            actions.append(.removeRegistration(authenticator: id))
            guard let fallback = state.plan.fallback, fallback != id else {
                return actions + [.endFlow, .refuse(FlowRefusal(failure.error, failureCounts: counts))]
            }
            let next = FlowStage.authenticate(fallback)
            state.plan.stages[state.position] = next
            return actions + [
                .saveFlow(state), .refuse(FlowRefusal(failure.error, stage: next, failureCounts: counts)),
            ]
        }
        guard counted else { return actions + [.endFlow, .refuse(FlowRefusal(failure.error))] }
        // A counted failure below the maximum: the same stage may be tried again.
        return actions + [.saveFlow(state), .refuse(FlowRefusal(failure.error, stage: stage, failureCounts: counts))]
    }

    /// Gives a held attempt back, or keeps a committed one as a failure. Returns the counter as it
    /// then stands.
    private mutating func settleHold(counter: AttemptCounter?) -> ([FlowAction], AttemptCounter?) {
        var actions: [FlowAction] = []
        switch (state.attempt, state.stage) {
        case (.held, _): actions.append(.releaseAttempt)
        // A released guess given up without its answer has failed.
        case (.committed, .authenticate(let id)?): actions.append(.attemptFailed(authenticator: id))
        default: break
        }
        state.attempt = .none
        return (actions, counter)
    }

    private func deregistering(_ actions: [FlowAction]) -> [FlowAction] {
        actions + [.deregister, .endFlow, .refuse(FlowRefusal(GenericError(.userDeregistered)))]
    }

    private func internalFailure(_ problem: String) -> [FlowAction] {
        [.endFlow, .refuse(FlowRefusal(GenericError(.configurationInvalid, message: "Flow error: \(problem).")))]
    }
}
