import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseServer

/// The three rules the host's facts decide — a hold that lapsed, a registration that changed
/// meanwhile, a push flow that ends unapproved denying its transaction — fed to the kernel's
/// machines in memory and produced for real on the server (a push answered with the scripted
/// custom authenticator): both must reach the same verdict.
@Suite("The flow rules of OutcomeFacts: the machine and the server rule alike", .serialized)
struct FlowRuleParityTests {
    enum Rule: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// No fact: the flow approves.
        case none
        /// The plugin took longer than the server's hold lifetime.
        case holdLapsed
        /// Another request replaced the registration while the plugin checked against it.
        case registrationChanged
        /// The user cancelled the flow.
        case cancelled

        var testDescription: String { rawValue }
    }

    /// What a rule leads to, as the user, the counter and the portal see it.
    struct Verdict: Equatable, CustomStringConvertible {
        /// The refusal's code and message; nil when the server refused nothing.
        var refusal: String?
        var countedFailures: Int
        var transaction: MobileAuthTransaction.State

        var description: String { "\(refusal ?? "no refusal"), \(countedFailures) counted, \(transaction)" }
    }

    /// The verdict of the kernel's flow machine and the transaction machine, in memory.
    static func machineVerdict(_ rule: Rule) -> Verdict {
        let counter = AttemptCounter(failures: 0, maximum: 3)
        var (flow, _) = FlowMachine.start(.mobileAuthentication(with: "scripted", fallback: "pin"), counter: counter)
        var actions = flow.messageArrived(counter: counter)
        let facts = OutcomeFacts(holdLapsed: rule == .holdLapsed, registrationChanged: rule == .registrationChanged)
        actions +=
            rule == .cancelled
            ? flow.cancel(counter: counter)
            : flow.apply(.succeeded(AuthenticationSuccess()), counter: counter, facts: facts)
        var transaction = MobileAuthTransaction(expiresAt: .infinity, method: .custom)
        var verdict = Verdict(refusal: nil, countedFailures: 0, transaction: .pending)
        for action in actions {
            switch action {
            case .commitAttempt, .countFailure: verdict.countedFailures += 1
            case .approveTransaction: _ = transaction.flowApproved(method: "scripted", by: "DEV001", at: 0)
            case .denyTransaction(let refused):
                _ = transaction.flowEndedUnapproved(refused: refused, by: "DEV001", at: 0)
            case .refuse(let refusal): verdict.refusal = "\(refusal.error.codeName): \(refusal.error.message)"
            default: break
            }
        }
        verdict.transaction = transaction.state
        return verdict
    }

    @Test("the machines alone: each rule's verdict, so the parity below cannot pass on an empty one")
    func machineVerdicts() {
        #expect(Self.machineVerdict(.none) == Verdict(refusal: nil, countedFailures: 0, transaction: .approved))
        let lapsed = Self.machineVerdict(.holdLapsed)
        #expect(lapsed.refusal == "requestInvalid: The answer took too long to check; try again.")
        #expect(lapsed.countedFailures == 0 && lapsed.transaction == .denied(.invalidAnswer))
        let changed = Self.machineVerdict(.registrationChanged)
        #expect(changed.refusal?.hasPrefix("authenticatorInvalid: ") == true)
        #expect(changed.countedFailures == 0 && changed.transaction == .denied(.invalidAnswer))
        #expect(
            Self.machineVerdict(.cancelled)
                == Verdict(refusal: nil, countedFailures: 0, transaction: .denied(.notAccepted))
        )
    }

    @Test("the server reaches the machine's verdict for each rule", arguments: Rule.allCases)
    func serverMatchesMachine(rule: Rule) async throws {
        let clock = ManualClock(Date())
        var served: Verdict?
        try await withFixture(.embedded, clock: clock) { fixture in
            let (client, _) = try await enrolledDevice(fixture)
            try await add("scripted", to: client)
            let portal = Portal(fixture: fixture)
            let started = try await portal.started("custom")
            fixture.script.answer(2000)
            // The fact happens while the plugin checks the answer.
            fixture.script.delay.withLock { $0 = rule == .none || rule == .cancelled ? .zero : .seconds(5) }
            let begun = fixture.script.begun.withLock { $0 }
            let meanwhile = Task {
                guard rule == .holdLapsed || rule == .registrationChanged else { return }
                // Once the service has begun checking, the flow holds its attempt and the server
                // has read the registration (the check lasts 5 s, ample under a loaded run): that
                // is when the fact must happen.
                var checking = false
                for _ in 0..<500 where !checking {
                    try await Task.sleep(for: .milliseconds(20))
                    checking = fixture.script.begun.withLock { $0 } > begun
                }
                #expect(checking, "the service never began checking")
                let held = try await fixture.read { db in
                    try Bool.fetchOne(db, sql: "SELECT 1 FROM flows WHERE attempt = 'held'") != nil
                }
                #expect(held, "the flow holds no attempt while the service checks")
                switch rule {
                case .holdLapsed:
                    clock.advance(by: ServerStore.holdLifetime + 1)
                case .registrationChanged:
                    try await fixture.write { db in
                        try db.execute(
                            sql: "UPDATE registrations SET data = ? WHERE authenticator = 'scripted'",
                            arguments: [Data("renewed elsewhere".utf8)]
                        )
                    }
                case .none, .cancelled: break
                }
            }
            let delegate = ScriptedResponder([
                rule == .cancelled ? .cancel : .customAuthenticator(.data("signed-by-token"))
            ])
            let result = await client.handlePushMobileAuthRequest(
                try pending(client, from: lastPush(fixture)),
                delegate: delegate
            )
            try await meanwhile.value
            fixture.script.delay.withLock { $0 = .zero }
            var refusal: String?
            switch result {
            case .approved: break
            case .failed(let error as any DomainError) where error.codeName != "actionCancelled":
                refusal = "\(error.codeName): \(error.message)"
            case .failed(let error as GenericError) where rule == .cancelled:
                #expect(error.code == .actionCancelled)
            default:
                let exchanges = fixture.transport.recorded.map { "\($0.0.method) \($0.0.path) → \($0.1.status)" }
                Issue.record("unexpected: \(result); last requests: \(exchanges.suffix(6))")
            }
            let reported = try await portal.result(started.transactionID)
            served = Verdict(
                refusal: refusal,
                countedFailures: try #require(try await failures(fixture)),
                transaction: try #require(
                    MobileAuthTransaction.State(status: reported.status.rawValue, reason: reported.reason)
                )
            )
            #expect(try await fixture.count("flows") == 0)
        }
        #expect(served == Self.machineVerdict(rule))
    }

    @Test("the harness rules as the server: an answer decided after the hold's lifetime is refused uncounted")
    func harnessRulesAlike() async throws {
        let script = StatusScript()
        let manifest = try Manifest(
            ["authenticators": [["id": "scripted", "type": "test.scripted"]]],
            source: "harness"
        )
        let loaded = try #require(try PluginRegistry.testing(script).load(manifest).authenticator(id: "scripted"))
        let clock = ManualClock()
        let harness = try AuthenticatorHarness(loaded, maximumFailures: 3, clock: clock)
        _ = try await harness.enroll(responder: ScriptedResponder([.customAuthenticatorRegistration(.data(nil))]))
        // In time, the answer is accepted: the refusal below is the lapse's, not the plugin's.
        _ = try await harness.authenticate(responder: ScriptedResponder([.customAuthenticator(.data("x"))]))
        #expect(await harness.failureCount == 0)

        // The service checks the answer for 2 s; once it has begun (the attempt is held), the
        // clock passes the hold's lifetime.
        script.delay.withLock { $0 = .seconds(2) }
        let begun = script.begun.withLock { $0 }
        let meanwhile = Task {
            for _ in 0..<400 where script.begun.withLock({ $0 }) == begun {
                try await Task.sleep(for: .milliseconds(5))
            }
            clock.advance(by: FlowMachine.attemptHoldLifetime + 1)
        }
        var refusal: String?
        do {
            _ = try await harness.authenticate(responder: ScriptedResponder([.customAuthenticator(.data("x"))]))
        } catch let error as any DomainError {
            refusal = "\(error.codeName): \(error.message)"
        }
        try await meanwhile.value
        let actions = await harness.actions.suffix(3)
        #expect(refusal == Self.machineVerdict(.holdLapsed).refusal, "\(actions)")
        #expect(await harness.failureCount == 0)
    }
}
