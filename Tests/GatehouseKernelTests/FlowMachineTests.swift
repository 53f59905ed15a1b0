import Foundation
import GatehouseKernel
import GatehouseTesting
import Testing

private let pin = "pin"
private let face = "face"

private func names(_ actions: [FlowAction]) -> [String] { actions.map(\.description) }

private func challenge(reserves: Bool) -> StageOutcome {
    .challenge(AuthenticatorChallenge(payload: Data("c".utf8), session: Data("s".utf8), reservesAttempt: reserves))
}

private func failure(counts: Bool, removes: Bool = false) -> StageOutcome {
    .failed(StageFailure(AuthenticationError(.invalidPin), countsAsAttempt: counts, removesRegistration: removes))
}

private func refusal(_ actions: [FlowAction]) -> FlowRefusal? {
    for case .refuse(let refusal) in actions { return refusal }
    return nil
}

/// A machine for an authentication with `authenticator`, started with `counter`.
private func authentication(_ authenticator: String = pin, counter: AttemptCounter) -> FlowMachine {
    FlowMachine.start(.authentication(with: authenticator, fallback: pin), counter: counter).0
}

@Suite("Flow machine")
struct FlowMachineTests {
    @Test("a registration identifies the user, enrols the PIN, then writes the profile and issues tokens")
    func registration() {
        let plan = FlowPlan.registration(identityProvider: "idp", enrol: [pin, face])
        var (machine, actions) = FlowMachine.start(plan, counter: nil)
        #expect(names(actions) == ["saveFlow(identity(idp), none)", "reply(identity(idp))"])
        #expect(names(machine.messageArrived(counter: nil)) == [])
        actions = machine.apply(.identified(RegisteredIdentity(subject: "ann")), counter: nil)
        #expect(names(actions) == ["identifyUser", "saveFlow(enrol(pin), none)", "reply(enrol(pin))"])
        #expect(
            names(machine.apply(challenge(reserves: false), counter: nil)) == [
                "saveFlow(enrol(pin), none)", "reply(enrol(pin))",
            ]
        )
        actions = machine.apply(.succeeded(AuthenticationSuccess(registration: Data("p".utf8))), counter: nil)
        #expect(names(actions) == ["saveFlow(enrol(face), none)", "reply(enrol(face))"])
        actions = machine.apply(.succeeded(AuthenticationSuccess(registration: Data("f".utf8))), counter: nil)
        #expect(
            names(actions) == [
                "createProfile", "storeRegistration(pin)", "storeRegistration(face)", "issueTokens", "endFlow",
                "reply(done)",
            ]
        )
    }

    @Test("an enrolment without registration data, or a refused one, ends the flow and writes nothing")
    func enrolmentRefused() {
        var machine = FlowMachine.start(.registration(identityProvider: "idp", enrol: [pin]), counter: nil).0
        _ = machine.apply(.identified(RegisteredIdentity(subject: "ann")), counter: nil)
        var copy = machine
        #expect(
            names(machine.apply(.succeeded(AuthenticationSuccess()), counter: nil)) == [
                "endFlow", "refuse(configurationInvalid, ended)",
            ]
        )
        #expect(names(copy.apply(failure(counts: true), counter: nil)) == ["endFlow", "refuse(invalidPin, ended)"])
    }

    @Test("every authentication message holds an attempt; a challenge that tests nothing gives it back")
    func holds() {
        var machine = authentication(face, counter: AttemptCounter(failures: 0, maximum: 5))
        let counter = AttemptCounter(failures: 0, maximum: 5)
        #expect(
            names(machine.messageArrived(counter: counter)) == ["reserveAttempt", "saveFlow(authenticate(face), held)"]
        )
        #expect(names(machine.messageArrived(counter: counter)) == [])
        #expect(names(machine.apply(challenge(reserves: false), counter: counter)).first == "releaseAttempt")
        #expect(machine.state.attempt == .none)
    }

    @Test("a challenge that lets the client test a guess turns the hold into a failure until success")
    func commits() {
        let counter = AttemptCounter(failures: 2, maximum: 5)
        var machine = authentication(counter: counter)
        _ = machine.messageArrived(counter: counter)
        #expect(names(machine.apply(challenge(reserves: true), counter: counter)).first == "commitAttempt")
        #expect(machine.state.attempt == .committed)
        #expect(names(machine.messageArrived(counter: AttemptCounter(failures: 3, maximum: 5))) == [])
        let actions = machine.apply(
            .succeeded(AuthenticationSuccess()),
            counter: AttemptCounter(failures: 3, maximum: 5)
        )
        #expect(names(actions) == ["resetFailures", "issueTokens", "endFlow", "reply(done)"])
    }

    @Test("an attempt is reported failed once, when it fails: never on a released guess that then succeeds")
    func failuresReported() {
        func failed(_ actions: [FlowAction]) -> Int { names(actions).filter { $0.hasPrefix("attemptFailed") }.count }
        let counter = AttemptCounter(failures: 0, maximum: 5)
        // A PIN evaluation (commits), then the right PIN: no failure.
        var right = authentication(counter: counter)
        var reported = failed(right.messageArrived(counter: counter))
        reported += failed(right.apply(challenge(reserves: true), counter: counter))
        reported += failed(
            right.apply(.succeeded(AuthenticationSuccess()), counter: AttemptCounter(failures: 1, maximum: 5))
        )
        #expect(reported == 0)
        // The evaluation, then a wrong PIN: one.
        var wrong = authentication(counter: counter)
        reported = failed(wrong.messageArrived(counter: counter))
        reported += failed(wrong.apply(challenge(reserves: true), counter: counter))
        reported += failed(wrong.apply(failure(counts: true), counter: AttemptCounter(failures: 1, maximum: 5)))
        #expect(reported == 1)
        // The evaluation, then the flow cancelled: the guess stands, one.
        var cancelled = authentication(counter: counter)
        reported = failed(cancelled.messageArrived(counter: counter))
        reported += failed(cancelled.apply(challenge(reserves: true), counter: counter))
        reported += failed(cancelled.cancel(counter: AttemptCounter(failures: 1, maximum: 5)))
        #expect(reported == 1)
    }

    @Test("a second guess released in one flow is another attempt, counted before it is released")
    func secondGuessInOneFlow() {
        var machine = authentication(counter: AttemptCounter(failures: 0, maximum: 3))
        _ = machine.messageArrived(counter: AttemptCounter(failures: 0, maximum: 3))
        #expect(
            names(machine.apply(challenge(reserves: true), counter: AttemptCounter(failures: 0, maximum: 3))).first
                == "commitAttempt"
        )
        #expect(names(machine.messageArrived(counter: AttemptCounter(failures: 1, maximum: 3))) == [])
        // The first guess, never answered, has failed; the second is counted before it goes out.
        #expect(
            names(machine.apply(challenge(reserves: true), counter: AttemptCounter(failures: 1, maximum: 3))).prefix(2)
                == ["attemptFailed(pin)", "countFailure"]
        )
        #expect(
            names(machine.apply(challenge(reserves: true), counter: AttemptCounter(failures: 2, held: 1, maximum: 3)))
                == [
                    "refuse(actionAlreadyInProgress, authenticate(pin))"
                ]
        )
        #expect(
            names(machine.apply(challenge(reserves: true), counter: AttemptCounter(failures: 3, maximum: 3))) == [
                "attemptFailed(pin)", "deregister", "endFlow", "refuse(userDeregistered, ended)",
            ]
        )
    }

    @Test("a counted failure below the maximum keeps the flow at its stage with the remaining count")
    func countedFailure() throws {
        let counter = AttemptCounter(failures: 1, maximum: 3)
        var machine = authentication(face, counter: counter)
        _ = machine.messageArrived(counter: counter)
        let actions = machine.apply(failure(counts: true), counter: counter)
        #expect(
            names(actions) == [
                "commitAttempt", "attemptFailed(face)", "saveFlow(authenticate(face), none)",
                "refuse(invalidPin, authenticate(face))",
            ]
        )
        let refused = try #require(refusal(actions))
        #expect(refused.failureCounts?.remaining == 1)
    }

    @Test("the failure that reaches the maximum deregisters the profile")
    func maximum() {
        let counter = AttemptCounter(failures: 2, maximum: 3)
        var machine = authentication(counter: counter)
        _ = machine.messageArrived(counter: counter)
        #expect(
            names(machine.apply(failure(counts: true), counter: counter)) == [
                "commitAttempt", "attemptFailed(pin)", "deregister", "endFlow", "refuse(userDeregistered, ended)",
            ]
        )
    }

    @Test("a failure that does not count gives the attempt back and ends the flow; after a commit it counts")
    func uncountedFailure() {
        let counter = AttemptCounter(failures: 0, maximum: 3)
        var machine = authentication(counter: counter)
        _ = machine.messageArrived(counter: counter)
        #expect(
            names(machine.apply(failure(counts: false), counter: counter)) == [
                "releaseAttempt", "endFlow", "refuse(invalidPin, ended)",
            ]
        )
        var committed = authentication(counter: counter)
        _ = committed.messageArrived(counter: counter)
        _ = committed.apply(challenge(reserves: true), counter: counter)
        #expect(
            names(committed.apply(failure(counts: false), counter: AttemptCounter(failures: 1, maximum: 3))) == [
                "attemptFailed(pin)", "saveFlow(authenticate(pin), none)", "refuse(invalidPin, authenticate(pin))",
            ]
        )
    }

    @Test("an authenticator that lost its registration is forgotten and the flow falls back to the PIN")
    func removesRegistration() throws {
        let counter = AttemptCounter(failures: 0, maximum: 3)
        var machine = authentication(face, counter: counter)
        _ = machine.messageArrived(counter: counter)
        let actions = machine.apply(failure(counts: false, removes: true), counter: counter)
        #expect(
            names(actions) == [
                "releaseAttempt", "removeRegistration(face)", "saveFlow(authenticate(pin), none)",
                "refuse(invalidPin, authenticate(pin))",
            ]
        )
        #expect(machine.state.stage == .authenticate(pin))
    }

    @Test("when every attempt left is held by others, a message waits; when none is left, the user is deregistered")
    func busyAndExhausted() {
        var machine = authentication(counter: AttemptCounter(failures: 0, maximum: 3))
        let busy = machine.messageArrived(counter: AttemptCounter(failures: 1, held: 2, maximum: 3))
        #expect(names(busy) == ["refuse(actionAlreadyInProgress, authenticate(pin))"])
        #expect(machine.state.attempt == .none)
        #expect(
            names(machine.messageArrived(counter: AttemptCounter(failures: 3, maximum: 3))) == [
                "deregister", "endFlow", "refuse(userDeregistered, ended)",
            ]
        )
        #expect(
            names(
                FlowMachine.start(.authentication(with: pin, fallback: pin), counter: .init(failures: 3, maximum: 3)).1
            ) == [
                "deregister", "endFlow", "refuse(userDeregistered, ended)",
            ]
        )
        // Unlimited: never busy, never exhausted.
        var unlimited = authentication(counter: AttemptCounter(failures: 0, maximum: 0))
        #expect(
            names(unlimited.messageArrived(counter: AttemptCounter(failures: 900, held: 50, maximum: 0))).first
                == "reserveAttempt"
        )
    }

    @Test("cancel gives a held attempt back; a committed one stays a failure and may reach the maximum")
    func cancel() {
        let counter = AttemptCounter(failures: 0, maximum: 2)
        var held = authentication(counter: counter)
        _ = held.messageArrived(counter: counter)
        #expect(names(held.cancel(counter: counter)) == ["releaseAttempt", "endFlow", "reply(done)"])
        var committed = authentication(counter: AttemptCounter(failures: 1, maximum: 2))
        _ = committed.messageArrived(counter: AttemptCounter(failures: 1, maximum: 2))
        _ = committed.apply(challenge(reserves: true), counter: AttemptCounter(failures: 1, maximum: 2))
        #expect(
            names(committed.cancel(counter: AttemptCounter(failures: 2, maximum: 2))) == [
                "attemptFailed(pin)", "deregister", "endFlow", "refuse(userDeregistered, ended)",
            ]
        )
    }

    @Test("falling back switches the stage to the PIN; a flow without a fallback refuses and stays")
    func fallBack() {
        let counter = AttemptCounter(failures: 1, maximum: 5)
        var machine = authentication(face, counter: counter)
        #expect(
            names(machine.fallBack(counter: counter)) == [
                "saveFlow(authenticate(pin), none)", "reply(authenticate(pin))",
            ]
        )
        #expect(names(machine.fallBack(counter: counter)) == ["refuse(requestInvalid, authenticate(pin))"])
        var change = FlowMachine.start(.changePin(pin), counter: counter).0
        #expect(names(change.fallBack(counter: counter)) == ["refuse(requestInvalid, authenticate(pin))"])
    }

    @Test("change PIN: the current PIN, then the new one; no new session")
    func changePin() {
        let counter = AttemptCounter(failures: 1, maximum: 5)
        var machine = FlowMachine.start(.changePin(pin), counter: counter).0
        _ = machine.messageArrived(counter: counter)
        #expect(
            names(machine.apply(.succeeded(AuthenticationSuccess()), counter: counter)) == [
                "releaseAttempt", "resetFailures", "saveFlow(enrol(pin), none)", "reply(enrol(pin))",
            ]
        )
        #expect(
            names(machine.apply(.succeeded(AuthenticationSuccess(registration: Data([1]))), counter: counter)) == [
                "storeRegistration(pin)", "endFlow", "reply(done)",
            ]
        )
    }

    /// One shared profile counter, as the store keeps it, for interleaving many flows.
    private struct Profile {
        var failures = 0
        var holders: Set<Int> = []
        var deregistered = false
        let maximum: Int

        func counter(excluding flow: Int) -> AttemptCounter {
            AttemptCounter(failures: failures, held: holders.subtracting([flow]).count, maximum: maximum)
        }

        /// Applies the counter actions; returns whether the request was refused.
        mutating func apply(_ actions: [FlowAction], flow: Int) -> Bool {
            for action in actions {
                switch action {
                case .reserveAttempt: holders.insert(flow)
                case .releaseAttempt: holders.remove(flow)
                case .commitAttempt:
                    holders.remove(flow)
                    failures += 1
                case .countFailure: failures += 1
                case .resetFailures: failures = 0
                case .deregister: deregistered = true
                case .refuse: return true
                default: break
                }
            }
            return false
        }
    }

    @Test(
        "64 interleaved wrong answers of mixed kinds never test more guesses than the maximum",
        arguments: [1, 2, 3, 5, 10]
    )
    func interleaved(maximum: Int) {
        var generator = SeededGenerator(seed: UInt64(maximum))
        for _ in 0..<50 {
            var profile = Profile(maximum: maximum)
            var machines = (0..<64).map { index in
                authentication(index.isMultiple(of: 2) ? pin : face, counter: profile.counter(excluding: index))
            }
            var tested = 0
            // A PIN flow: hold, release an evaluation (commit), then its failure. A biometric or
            // custom flow: hold, then the failed check. Steps of one flow stay in order.
            var steps = (0..<64).map { $0.isMultiple(of: 2) ? 3 : 2 }
            var done = Array(repeating: 0, count: 64)
            while !profile.deregistered, let _ = steps.indices.first(where: { done[$0] < steps[$0] }) {
                let open = steps.indices.filter { done[$0] < steps[$0] }
                let flow = open[Int(generator.next() % UInt64(open.count))]
                let counter = profile.counter(excluding: flow)
                let actions: [FlowAction]
                switch (done[flow], steps[flow]) {
                case (0, _): actions = machines[flow].messageArrived(counter: counter)
                case (1, 3):
                    tested += 1
                    actions = machines[flow].apply(challenge(reserves: true), counter: counter)
                case (1, _):
                    tested += 1
                    actions = machines[flow].apply(failure(counts: true), counter: counter)
                default: actions = machines[flow].apply(failure(counts: true), counter: counter)
                }
                done[flow] += 1
                if profile.apply(actions, flow: flow), done[flow] == 1 { steps[flow] = 0 }
                #expect(profile.failures + profile.holders.count <= maximum)
            }
            #expect(tested <= maximum)
            #expect(profile.deregistered)
            #expect(profile.failures == maximum)
        }
    }

    @Test("an identity provider's replayed credential revokes its user's sessions and ends the flow")
    func replayedCredential() {
        var (machine, _) = FlowMachine.start(.registration(identityProvider: "web", enrol: ["pin"]), counter: nil)
        var failure = StageFailure(RegistrationError(.externalIdentityProviderFailure), countsAsAttempt: false)
        failure.revokesSubject = "ann@example.com"
        let actions = machine.apply(.failed(failure), counter: nil)
        #expect(
            actions.map(\.description) == ["revokeUser", "endFlow", "refuse(externalIdentityProviderFailure, ended)"]
        )
    }
}

@Suite("Flow machine: what the host knows")
struct FlowMachineFactsTests {
    private let counter = AttemptCounter(failures: 0, maximum: 3)
    private let success = StageOutcome.succeeded(AuthenticationSuccess())

    @Test("a decision that comes after the held attempt lapsed is refused without counting")
    func holdLapsed() {
        var machine = authentication(counter: counter)
        _ = machine.messageArrived(counter: counter)
        let actions = machine.apply(success, counter: counter, facts: OutcomeFacts(holdLapsed: true))
        #expect(names(actions) == ["releaseAttempt", "endFlow", "refuse(requestInvalid, ended)"])
        #expect(refusal(actions)?.error.message == "The answer took too long to check; try again.")
        // The same success in time stands.
        var inTime = authentication(counter: counter)
        _ = inTime.messageArrived(counter: counter)
        #expect(names(inTime.apply(success, counter: counter)).contains("issueTokens"))
    }

    @Test("a success about a registration that changed meanwhile is refused without counting; a failure stands")
    func registrationChanged() {
        var machine = authentication(face, counter: counter)
        _ = machine.messageArrived(counter: counter)
        let actions = machine.apply(success, counter: counter, facts: OutcomeFacts(registrationChanged: true))
        #expect(names(actions) == ["releaseAttempt", "endFlow", "refuse(authenticatorInvalid, ended)"])
        var failing = authentication(face, counter: counter)
        _ = failing.messageArrived(counter: counter)
        let counted = failing.apply(
            failure(counts: true),
            counter: counter,
            facts: OutcomeFacts(registrationChanged: true)
        )
        #expect(names(counted).contains("attemptFailed(face)"))
    }

    @Test("a mobile authentication's flow that ends unapproved denies its transaction: refused or cancelled")
    func mobileAuthenticationDenied() {
        let plan = FlowPlan.mobileAuthentication(with: pin, fallback: nil)
        var refused = FlowMachine.start(plan, counter: counter).0
        _ = refused.messageArrived(counter: counter)
        #expect(names(refused.apply(failure(counts: false), counter: counter)).last == "denyTransaction(refused)")
        var cancelled = FlowMachine.start(plan, counter: counter).0
        _ = cancelled.messageArrived(counter: counter)
        #expect(names(cancelled.cancel(counter: counter)).last == "denyTransaction(cancelled)")
        var approved = FlowMachine.start(plan, counter: counter).0
        _ = approved.messageArrived(counter: counter)
        let approving = names(approved.apply(success, counter: counter))
        #expect(approving.contains("approveTransaction") && !approving.contains { $0.hasPrefix("denyTransaction") })
        // An authentication that is not a mobile one has no transaction to deny.
        var plain = authentication(counter: counter)
        _ = plain.messageArrived(counter: counter)
        #expect(!names(plain.cancel(counter: counter)).contains { $0.hasPrefix("denyTransaction") })
    }
}
