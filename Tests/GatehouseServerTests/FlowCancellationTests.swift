import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseServer

/// A user in front of a PIN prompt who answers only when the test says so: `pin` and
/// `createPin` wait without heeding cancellation, as a screen left open would; with `holdsStart`,
/// `authenticationDidStart` waits too (before the flow opens).
final class HeldPrompt: AuthenticationDelegate, RegistrationDelegate {
    private struct State {
        var shown = 0
        var answer: String?
        var waiting: [CheckedContinuation<String, Never>] = []
    }

    private let state = Mutex(State())
    let email: String
    let holdsStart: Bool

    init(email: String = "jane@example.com", holdsStart: Bool = false) {
        self.email = email
        self.holdsStart = holdsStart
    }

    /// How often the user was asked.
    var timesShown: Int { state.withLock { $0.shown } }

    func authenticationDidStart(profile: UserProfile, authenticator: AuthenticatorDescriptor) async {
        if holdsStart { _ = await held() }
    }

    func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse {
        .data(challenge.step == .initialize ? email : "4821")
    }

    func pin(_ challenge: PinChallenge) async -> PinResponse { .pin(PIN(await held())) }

    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse { .pin(PIN(await held())) }

    private func held() async -> String {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { state -> String? in
                state.shown += 1
                if let answer = state.answer { return answer }
                state.waiting.append(continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// Waits (at most 10 s) until the prompt is shown.
    func waitUntilShown() async throws {
        for _ in 0..<400 where state.withLock({ $0.shown == 0 }) { try await Task.sleep(for: .milliseconds(25)) }
        try #require(state.withLock { $0.shown } > 0, "the prompt was never shown")
    }

    /// The user types `answer` at last.
    func answer(_ answer: String) {
        let waiting = state.withLock { state in
            state.answer = answer
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume(returning: answer) }
    }
}

/// Whether `body` threw `GenericError.actionCancelled`.
func endsCancelled(_ body: () async throws -> Void) async -> Bool {
    do {
        try await body()
        return false
    } catch let error as GenericError {
        return error.code == .actionCancelled
    } catch {
        return false
    }
}

@Suite("Cancelling the flow in progress from outside its task", .serialized)
struct FlowCancellationTests {
    @Test(
        "a login waiting at the PIN prompt ends cancelled; the server forgets its flow and counts nothing",
        arguments: Mode.allCases
    )
    func loginAtPinPrompt(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let prompt = HeldPrompt()
            let login = Task { try await client.authenticateUser(profile, delegate: prompt) }
            try await prompt.waitUntilShown()
            #expect(try await fixture.count("flows") == 1)

            await client.cancelFlowInProgress()
            #expect(await endsCancelled { _ = try await login.value })
            #expect(try await fixture.count("flows") == 0)
            let held = try await fixture.read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM flows WHERE attempt <> 'none'")
            }
            #expect(held == 0)
            #expect(try await failures(fixture) == 0)
            #expect(await client.authenticatedUserProfile == nil)

            // The user answers after all: the server no longer knows the flow, and nothing counts.
            let cancelled = fixture.transport.recorded.count
            prompt.answer("000000")
            var late: [Int] = []
            for _ in 0..<400 {
                late = fixture.transport.recorded.dropFirst(cancelled).map(\.1.status)
                if !late.isEmpty { break }
                try await Task.sleep(for: .milliseconds(25))
            }
            #expect(late == [404])
            #expect(try await failures(fixture) == 0)

            // The client is free again: the next login works.
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            #expect(await client.authenticatedUserProfile == profile)
            #expect(try await fixture.count("flows") == 0)
        }
    }

    @Test(
        "cancelled before its flow opens, a login cancels the flow once it opens and asks for no PIN",
        arguments: Mode.allCases
    )
    func beforeTheFlowOpens(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let prompt = HeldPrompt(holdsStart: true)
            let login = Task { try await client.authenticateUser(profile, delegate: prompt) }
            try await prompt.waitUntilShown()
            let asked = ContinuousClock.now
            // Nothing to tell the server yet: it returns at once, not after its 30 s bound (the
            // test's own bound leaves room for a loaded machine).
            await client.cancelFlowInProgress(timeout: .seconds(30))
            #expect(ContinuousClock.now - asked < .seconds(15))
            prompt.answer("258147")
            #expect(await endsCancelled { _ = try await login.value })
            #expect(prompt.timesShown == 1)
            #expect(try await fixture.count("flows") == 0)
            #expect(try await failures(fixture) == 0)
            // The flow was opened, then cancelled.
            let cancels = fixture.transport.recorded.filter { request, _ in
                String(decoding: request.body, as: UTF8.self).contains(#""action":"cancel""#)
            }
            #expect(cancels.map(\.1.status) == [200])
        }
    }

    @Test("a registration waiting for its new PIN ends cancelled; nothing is registered", arguments: Mode.allCases)
    func registrationAtCreatePin(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let prompt = HeldPrompt()
            let registration = Task { try await client.registerUser(delegate: prompt) }
            try await prompt.waitUntilShown()
            #expect(try await fixture.count("flows") == 1)

            await client.cancelFlowInProgress()
            #expect(await endsCancelled { _ = try await registration.value })
            #expect(try await fixture.count("flows") == 0)
            #expect(try await fixture.count("profiles") == 0)
            #expect(try await client.userProfiles().isEmpty)
            prompt.answer("258147")

            let profile = try await register(client)
            #expect(try await client.userProfiles() == [profile])
        }
    }

    @Test("with no action running, cancelling does nothing and returns at once")
    func nothingToCancel() async throws {
        try await withFixture(.embedded) { fixture in
            let client = try fixture.client()
            // At once each time, not after the 30 s bound it is given (the test's own bound leaves
            // room for a loaded machine).
            let started = ContinuousClock.now
            await client.cancelFlowInProgress(timeout: .seconds(30))
            #expect(ContinuousClock.now - started < .seconds(15))
            let profile = try await register(client)
            #expect(try await fixture.count("flows") == 0)
            let registered = ContinuousClock.now
            await client.cancelFlowInProgress(timeout: .seconds(30))
            #expect(ContinuousClock.now - registered < .seconds(15))
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            #expect(await client.authenticatedUserProfile == profile)
        }
    }
}
