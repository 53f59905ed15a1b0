import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@Suite("One flow engine for the harness and the server", .serialized)
struct FlowParityTests {
    @Test("the harness and the server count the same answers identically")
    func harnessMatchesServer() async throws {
        let statuses = [4000, 4000, 2000, 4000, 5000]
        // The harness: the scripted service alone, through the kernel's machine.
        let alone = StatusScript()
        let registry = try PluginRegistry.testing(alone)
        let manifest = try Manifest(
            ["authenticators": [["id": "scripted", "type": "test.scripted"]]],
            source: "harness"
        )
        let loaded = try #require(try registry.load(manifest).authenticator(id: "scripted"))
        let harness = try AuthenticatorHarness(loaded, maximumFailures: 5)
        _ = try await harness.enroll(responder: ScriptedResponder([.customAuthenticatorRegistration(.data(nil))]))
        var counted: [Int] = []
        for status in statuses {
            alone.answer(status)
            _ = try? await harness.authenticate(responder: ScriptedResponder([.customAuthenticator(.data("x"))]))
            counted.append(await harness.failureCount)
        }
        // The server, over the SDK.
        var served: [Int] = []
        try await withFixture(.embedded, maxPinFailures: 5) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            try await add("scripted", to: client)
            for status in statuses {
                fixture.script.answer(status)
                _ = try? await client.authenticateUser(
                    profile,
                    authenticator: "scripted",
                    delegate: ScriptedResponder([.customAuthenticator(.data("x"))])
                )
                served.append(try await failures(fixture) ?? -1)
            }
        }
        #expect(counted == [1, 2, 0, 1, 2])
        #expect(served == counted)
    }

    @Test(
        "two overlapping registrations of one user: the newer supersedes the older (abandoned, say), which then ends",
        arguments: Mode.allCases
    )
    func overlappingRegistrations(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let first = try fixture.client("shared")
            _ = try await first.identityProviders()
            let gate = PinGate()
            let firstRun = Task {
                try await first.registerUser(
                    delegate: GatedRegistration(gate: gate, email: "jane@example.com", pin: "258147")
                )
            }
            await gate.waitUntilAsked()
            // The same user registers again on this installation (the first was abandoned): no
            // refusal, no waiting for the first to expire.
            let second = try fixture.client("shared")
            let profile = try await register(second)
            #expect(try await second.userProfiles() == [profile])
            // The older one, if it ever answers, finds itself ended; the newer profile stands.
            gate.release()
            await #expect(throws: (any Error).self) { try await firstRun.value }
            #expect(!fixture.transport.recorded.contains { $0.1.status >= 500 })
            #expect(try await fixture.count("profiles") == 1)
            #expect(try await fixture.count("flows") == 0)
            try await second.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
        }
    }

    @Test("one TOTP code answered in 8 flows at once opens exactly one session", arguments: Mode.allCases)
    func totpCodeOnce(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 10) { fixture in
            let owner = try fixture.client()
            let profile = try await registeredAndLoggedIn(owner)
            try await add("totp", to: owner)
            await owner.logout()
            // All 8 answers must be one code: a 30-second step that ends mid-test would give the
            // later ones the next step's code, a different (and unused) one.
            let intoStep = Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 30)
            if intoStep > 20 { try await Task.sleep(for: .seconds(30 - intoStep + 0.5)) }
            let outcomes = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        let client = try? fixture.client()
                        let answer = ScriptedResponder([.customAuthenticator(.data(nil))])
                        return (try? await client?.authenticateUser(profile, authenticator: "totp", delegate: answer))
                            != nil
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 1, "\(outcomes)")
        }
    }

    @Test("an app task cancelled while the server checks an answer ends with actionCancelled and holds nothing")
    func cancelledTask() async throws {
        try await withFixture(.embedded, maxPinFailures: 1) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            try await add("scripted", to: client)
            fixture.script.delay.withLock { $0 = .milliseconds(300) }
            let attempt = Task {
                try await client.authenticateUser(
                    profile,
                    authenticator: "scripted",
                    delegate: ScriptedResponder([.customAuthenticator(.data("slow"))])
                )
            }
            try await Task.sleep(for: .milliseconds(100))
            attempt.cancel()
            do {
                _ = try await attempt.value
            } catch let error as GenericError {
                #expect(error.code == .actionCancelled || error.code == .userDeregistered, "\(error)")
            }
            fixture.script.delay.withLock { $0 = .zero }
            // With one attempt allowed, a hold left behind would refuse the next login for 30 s.
            if try await !client.userProfiles().isEmpty {
                let login = ScriptedResponder([.pin("258147")])
                try await client.authenticateUser(profile, delegate: login)
                #expect(await login.receivedKinds == ["pin"])
            }
        }
    }

    @Test("a registration enrols every authenticator the manifest lists, the PIN first", arguments: Mode.allCases)
    func registrationEnrolsListed(mode: Mode) async throws {
        try await withFixture(mode, registrationAuthenticators: ["pin", "totp"]) { fixture in
            let client = try fixture.client()
            let script = ScriptedResponder([
                .customRegistration(.data("jane@example.com")), .customRegistration(.data("4821")),
                .createPin("258147"),
                .customAuthenticatorRegistration(.data(nil)),
            ])
            let profile = try await client.registerUser(delegate: script).profile
            #expect(await script.isFinished)
            #expect(try await client.authenticators(.registered, for: profile).map(\.id) == ["pin", "totp"])
            #expect(try await fixture.count("registrations") == 2)
            try await client.authenticateUser(
                profile,
                authenticator: "totp",
                delegate: ScriptedResponder([.customAuthenticator(.data(nil))])
            )
        }
        await #expect(throws: ManifestError.self) {
            try await withFixture(.embedded, registrationAuthenticators: ["totp", "pin"]) { _ in }
        }
    }
}
