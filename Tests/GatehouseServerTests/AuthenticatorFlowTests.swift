import BiometricAuthenticator
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseServer

/// Registers Jane and logs her in with the PIN.
func registeredAndLoggedIn(_ client: UserClient) async throws -> UserProfile {
    let profile = try await register(client)
    try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
    return profile
}

/// Registers `authenticator` for the logged-in user: the PIN, then the custom data.
@discardableResult
func add(_ authenticator: String, to client: UserClient, data: String? = nil) async throws -> CustomInfo? {
    try await client.registerAuthenticator(
        authenticator,
        delegate: ScriptedResponder([.pin("258147"), .customAuthenticatorRegistration(.data(data))])
    )
}

func failures(_ fixture: Fixture) async throws -> Int? {
    try await fixture.read { db in try Int.fetchOne(db, sql: "SELECT failures FROM profiles") }
}

@Suite("Authenticators in every flow", .serialized)
struct AuthenticatorFlowTests {
    @Test(
        "a custom authenticator registers after the PIN, is not made preferred, and authenticates",
        arguments: Mode.allCases
    )
    func totp(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            #expect(try await client.authenticators(.registered, for: profile).map(\.id) == ["pin"])
            #expect(
                try await client.authenticators(.nonRegistered, for: profile).map(\.id) == ["totp", "scripted", "face"]
            )

            let script = ScriptedResponder([.pin("258147"), .customAuthenticatorRegistration(.data(nil))])
            _ = try await client.registerAuthenticator("totp", delegate: script)
            #expect(await script.receivedKinds == ["pin", "customAuthenticatorRegistration"])
            #expect(try await client.authenticators(.registered, for: profile).map(\.id) == ["pin", "totp"])
            #expect(try await client.preferredAuthenticator(for: profile).id == "pin")
            #expect(try await fixture.count("registrations") == 2)

            // A replay is the same code in the same 30-second step: a pair of logins that crossed
            // into the next step (a loaded machine can take that long) proves nothing, and is
            // tried again, at most three times.
            for attempt in 1...3 {
                // Start early in a step; after a crossed pair, in a step no code was used in yet.
                let intoStep = Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 30)
                if intoStep > 10 || attempt > 1 { try await Task.sleep(for: .seconds(30 - intoStep + 0.1)) }
                let step = Int(Date().timeIntervalSince1970 / 30)
                let login = ScriptedResponder([.customAuthenticator(.data(nil))])
                try await client.authenticateUser(profile, authenticator: "totp", delegate: login)
                #expect(await login.isFinished)
                #expect(try await client.fetchProfileResource().profileID == profile.id)
                // The same code again is refused: the service keeps the last step it accepted.
                let replay = ScriptedResponder([.customAuthenticator(.data(nil)), .cancel])
                let replayed: Result<CustomInfo?, any Error>
                do {
                    replayed = .success(
                        try await client.authenticateUser(profile, authenticator: "totp", delegate: replay)
                    )
                } catch {
                    replayed = .failure(error)
                }
                if Int(Date().timeIntervalSince1970 / 30) != step, attempt < 3 { continue }
                guard case .failure(let error) = replayed else {
                    Issue.record("the same code was accepted twice in one step")
                    break
                }
                #expect(error is GenericError, "\(error)")
                #expect(await replay.received.last?.error?.codeName == "customAuthenticatorFailure")
                break
            }
        }
    }

    @Test(
        "every custom status: 2000, 4000 retry, 4001 already registered, 4002 and 5000 fall back",
        arguments: Mode.allCases
    )
    func customStatuses(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 5) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)

            // 4001 at registration: refused with its info, nothing registered.
            fixture.script.answer(4001)
            do {
                try await add("scripted", to: client)
                Issue.record("a 4001 registration succeeded")
            } catch let error as AuthenticationError {
                #expect(error.code == .authenticatorAlreadyRegistered)
                #expect(error.details.customInfo == CustomInfo(status: 4001, data: "status 4001"))
            }
            #expect(try await client.authenticators(.registered, for: profile).map(\.id) == ["pin"])
            #expect(
                try await add("scripted", to: client, data: "hello") == CustomInfo(status: 2000, data: "status 2000")
            )

            // 4000, then 2000: the second challenge carries the first refusal and its info; counted once.
            fixture.script.answer(4000, 2000)
            let retry = ScriptedResponder([.customAuthenticator(.data("a")), .customAuthenticator(.data("b"))])
            let info = try await client.authenticateUser(profile, authenticator: "scripted", delegate: retry)
            #expect(info == CustomInfo(status: 2000, data: "status 2000"))
            #expect(await retry.received.last?.error?.details.customInfo?.status == 4000)
            #expect(try await failures(fixture) == 0)
            // Each challenge says how many attempts are left: 5, then 4 after the counted retry.
            let left = await retry.received.map { challenge -> Int? in
                guard case .customAuthenticator(let custom) = challenge else { return -1 }
                return custom.remainingFailureCount
            }
            #expect(left == [5, 4])

            // 4002: the server forgets it and the flow falls back to the PIN, whose challenge
            // carries the custom authenticator's info; this device forgets it too.
            fixture.script.answer(4002)
            let gone = ScriptedResponder([.customAuthenticator(.data("a")), .pin("258147")])
            try await client.authenticateUser(profile, authenticator: "scripted", delegate: gone)
            guard case .pin(let fallback) = await gone.received.last else {
                Issue.record("no PIN challenge after 4002")
                return
            }
            #expect(fallback.error?.codeName == "authenticatorDeregistered")
            #expect(fallback.error?.details.customInfo == CustomInfo(status: 4002, data: "status 4002"))
            #expect(try await client.authenticators(.registered, for: profile).map(\.id) == ["pin"])
            #expect(try await fixture.count("registrations") == 1)

            // 5000: the same, and the failure counts.
            try await add("scripted", to: client)
            fixture.script.answer(5000)
            let failed = ScriptedResponder([.customAuthenticator(.data("a")), .cancel])
            await #expect(throws: GenericError.self) {
                try await client.authenticateUser(profile, authenticator: "scripted", delegate: failed)
            }
            #expect(await failed.receivedKinds == ["customAuthenticator", "pin"])
            #expect(try await failures(fixture) == 1)
            #expect(try await client.authenticators(.registered, for: profile).map(\.id) == ["pin"])
        }
    }

    @Test(
        "choosing the PIN instead counts nothing; a cancelled custom challenge counts nothing",
        arguments: Mode.allCases
    )
    func fallbackAndCancel(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            try await add("scripted", to: client)
            let choice = ScriptedResponder([.customAuthenticator(.fallbackToPin), .pin("258147")])
            try await client.authenticateUser(profile, authenticator: "scripted", delegate: choice)
            #expect(await choice.receivedKinds == ["customAuthenticator", "pin"])
            #expect(fixture.script.checked == 1)  // the registration only
            await #expect(throws: GenericError.self) {
                try await client.authenticateUser(
                    profile,
                    authenticator: "scripted",
                    delegate: ScriptedResponder([.cancel])
                )
            }
            #expect(try await failures(fixture) == 0)
            #expect(try await fixture.count("flows") == 0)
        }
    }

    @Test(
        "a custom service that is down costs no attempt and deregisters nobody; the app hears a temporary failure",
        arguments: Mode.allCases
    )
    func serviceOutage(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 3) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            try await add("scripted", to: client)
            // More outages than the maximum of failures.
            for _ in 0..<5 {
                fixture.script.answer(StatusScript.outage)
                do {
                    try await client.authenticateUser(
                        profile,
                        authenticator: "scripted",
                        delegate: ScriptedResponder([.customAuthenticator(.data("123456"))])
                    )
                    Issue.record("authenticated while the service was down")
                } catch let error as AuthenticationError {
                    #expect(error.code == .authenticatorUnavailable)
                }
            }
            #expect(try await failures(fixture) == 0)
            #expect(
                try await client.authenticators(.registered, for: profile).map(\.id).sorted() == ["pin", "scripted"]
            )
            // Back up: the same user authenticates at once.
            try await client.authenticateUser(
                profile,
                authenticator: "scripted",
                delegate: ScriptedResponder([.customAuthenticator(.data("123456"))])
            )
        }
    }

    @Test(
        "one counter for every kind: a wrong PIN, a custom 4000 and a failed scan deregister at exactly three",
        arguments: Mode.allCases
    )
    func mixedCounter(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 3) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            try await add("scripted", to: client)
            _ = try await client.registerAuthenticator("face", delegate: ScriptedResponder([.pin("258147")]))
            await #expect(throws: GenericError.self) {
                try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("000111"), .cancel]))
            }
            #expect(try await failures(fixture) == 1)
            fixture.script.answer(4000)
            let custom = ScriptedResponder([.customAuthenticator(.data("x")), .cancel])
            await #expect(throws: GenericError.self) {
                try await client.authenticateUser(profile, authenticator: "scripted", delegate: custom)
            }
            #expect(try await failures(fixture) == 2)
            #expect(await custom.received.last?.error?.details.remainingFailureCount == 1)
            await fixture.sensor.enqueue(.noMatch)
            do {
                try await client.authenticateUser(
                    profile,
                    authenticator: "face",
                    delegate: ScriptedResponder([.biometric(.defaultPrompt)])
                )
                Issue.record("authenticated after three failures")
            } catch let error as GenericError {
                #expect(error.code == .userDeregistered)
            }
            #expect(try await client.userProfiles().isEmpty)
            #expect(try await fixture.count("profiles") == 0)
        }
    }

    @Test(
        "64 concurrent wrong answers, PIN, biometric and custom mixed, count exactly the maximum and deregister",
        arguments: Mode.allCases
    )
    func concurrentMixed(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 5) { fixture in
            let owner = try fixture.client()
            let profile = try await registeredAndLoggedIn(owner)
            try await add("scripted", to: owner)
            _ = try await owner.registerAuthenticator("face", delegate: ScriptedResponder([.pin("258147")]))
            await owner.logout()
            await fixture.sensor.setDefault(.noMatch)
            fixture.script.answer(contentsOf: Array(repeating: 4000, count: 64))
            let checkedBefore = fixture.script.checked
            let exchangesBefore = fixture.transport.recorded.count
            // Record every value the failure counter takes.
            try await fixture.watchFailures()
            let outcomes = await withTaskGroup(of: String.self) { group in
                for index in 0..<64 {
                    group.addTask {
                        do {
                            let client = try fixture.client()
                            switch index % 3 {
                            case 0:
                                try await client.authenticateUser(
                                    profile,
                                    delegate: ScriptedResponder([.pin("000111")])
                                )
                            case 1:
                                try await client.authenticateUser(
                                    profile,
                                    authenticator: "face",
                                    delegate: ScriptedResponder([.biometric(.defaultPrompt)])
                                )
                            default:
                                try await client.authenticateUser(
                                    profile,
                                    authenticator: "scripted",
                                    delegate: ScriptedResponder([.customAuthenticator(.data("wrong"))])
                                )
                            }
                            return "authenticated"
                        } catch let error as any DomainError {
                            return error.codeName
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                return await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(!outcomes.contains("authenticated"))
            let evaluations = fixture.transport.recorded.dropFirst(exchangesBefore).filter { request, response in
                pinOperation(request) == "evaluate" && response.status == 200
            }
            let customChecks = fixture.script.checked - checkedBefore
            // Secrets tested (PIN evaluations released, custom answers checked) never exceed the
            // maximum; failed scans are reported, not tested, and count on the same counter.
            #expect(evaluations.count + customChecks <= 5, "\(evaluations.count) PIN + \(customChecks) custom")
            #expect(try await fixture.highestFailureSeen() == 5)
            #expect(outcomes.contains("userDeregistered"))
            #expect(try await fixture.count("profiles") == 0)
        }
    }

    @Test(
        "preferred authenticator: set explicitly, used by default, back to the PIN on deregistration",
        arguments: Mode.allCases
    )
    func preferred(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            await #expect(throws: AuthenticationError.self) {
                try await client.setPreferredAuthenticator("scripted", for: profile)
            }
            try await add("scripted", to: client)
            #expect(try await client.preferredAuthenticator(for: profile).id == "pin")
            try await client.setPreferredAuthenticator("scripted", for: profile)
            let byDefault = ScriptedResponder([.customAuthenticator(.data("ok"))])
            try await client.authenticateUser(profile, delegate: byDefault)
            #expect(await byDefault.receivedKinds == ["customAuthenticator"])

            do {
                try await client.deregisterAuthenticator("pin")
                Issue.record("the PIN was deregistered")
            } catch let error as AuthenticationError {
                #expect(error.code == .pinDeregistrationNotPossible)
            }
            let confirm = ScriptedResponder([.customAuthenticatorDeregistration(.cancel)])
            await #expect(throws: GenericError.self) {
                try await client.deregisterAuthenticator("scripted", delegate: confirm)
            }
            #expect(try await fixture.count("registrations") == 2)
            try await client.deregisterAuthenticator(
                "scripted",
                delegate: ScriptedResponder([.customAuthenticatorDeregistration(.proceed)])
            )
            #expect(try await fixture.count("registrations") == 1)
            #expect(try await client.preferredAuthenticator(for: profile).id == "pin")
            let afterwards = ScriptedResponder([.pin("258147")])
            try await client.authenticateUser(profile, delegate: afterwards)
            #expect(await afterwards.receivedKinds == ["pin"])
            await #expect(throws: AuthenticationError.self) {
                try await client.authenticateUser(profile, authenticator: "scripted", delegate: ScriptedResponder([]))
            }
        }
    }
}

/// Holds a registration at its create-PIN challenge until released.
final class PinGate: Sendable {
    private let state = Mutex((asked: false, released: false))

    func waitUntilAsked() async {
        while !state.withLock({ $0.asked }) { try? await Task.sleep(for: .milliseconds(5)) }
    }
    func markAsked() { state.withLock { $0.asked = true } }
    func release() { state.withLock { $0.released = true } }
    func waitForRelease() async {
        while !state.withLock({ $0.released }) { try? await Task.sleep(for: .milliseconds(5)) }
    }
}

struct GatedRegistration: RegistrationDelegate {
    let gate: PinGate
    let email: String
    let pin: String

    func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse {
        .data(challenge.step == .initialize ? email : "4821")
    }

    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse {
        gate.markAsked()
        await gate.waitForRelease()
        return .pin(PIN(pin))
    }
}

extension StatusScript {
    func answer(contentsOf statuses: [Int]) { for status in statuses { answer(status) } }
}
