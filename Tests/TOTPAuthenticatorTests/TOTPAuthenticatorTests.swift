import Foundation
import GatehouseKernel
import GatehouseTesting
import TOTPAuthenticator
import Testing

/// RFC 6238 appendix B (SHA-1, 8 digits, secret "12345678901234567890").
private let vectors: [(Double, String)] = [
    (59, "94287082"), (1_111_111_109, "07081804"), (1_111_111_111, "14050471"), (1_234_567_890, "89005924"),
    (2_000_000_000, "69279037"), (20_000_000_000, "65353130"),
]

@Suite("TOTP authenticator example")
struct TOTPAuthenticatorTests {
    @Test("RFC 6238 known-answer vectors", arguments: vectors)
    func knownAnswers(time: Double, code: String) throws {
        let key = TOTP.Key(secret: Data("12345678901234567890".utf8), digits: 8, period: 30)
        #expect(key.code(at: Date(timeIntervalSince1970: time)) == code)
    }

    @Test("a registration keeps its digits and period when the configuration changes")
    func configurationChange() async throws {
        let clock = ManualClock()
        let environment = PluginEnvironment.testing(clock: clock)  // one clock for both halves
        let before = try AuthenticatorHarness(
            PluginHarness.authenticator(TOTPAuthenticatorPlugin.self, environment: environment),
            clock: clock
        )
        _ = try await before.enroll(responder: ScriptedResponder([.customAuthenticatorRegistration(.data(nil))]))
        let changed = try PluginHarness.authenticator(
            TOTPAuthenticatorPlugin.self,
            config: ["digits": 8, "period": 60],
            environment: environment
        )
        let after = try await AuthenticatorHarness(changed, continuing: before)
        for _ in 0..<3 {
            clock.advance(by: 61)
            _ = try await after.authenticate(responder: ScriptedResponder([.customAuthenticator(.data(nil))]))
        }
        #expect(await after.failureCount == 0)
        // Codes made with the new settings are not this registration's.
        let stored = try #require(await after.storage.value(forKey: "totp.key"))
        var key = try JSONDecoder().decode(TOTP.Key.self, from: stored)
        #expect(key.digits == 6 && key.period == 30)
        key.digits = 8
        key.period = 60
        try await after.storage.setValue(JSONEncoder().encode(key), forKey: "totp.key")
        clock.advance(by: 61)
        await #expect(throws: AuthenticationError.self) {
            try await after.authenticate(responder: ScriptedResponder([.customAuthenticator(.data(nil))]))
        }
        #expect(await after.failureCount == 1)
    }

    @Test("a device whose settings are not the server's cannot register; a device with no key spends no attempt")
    func settingsAgree() async throws {
        let device = try PluginHarness.authenticator(TOTPAuthenticatorPlugin.self, config: ["period": 60])
        let server = try PluginHarness.authenticator(TOTPAuthenticatorPlugin.self)
        let mixed = AuthenticatorHarness(
            authenticator: try #require(device.authenticator),
            verifier: try #require(server.verifier)
        )
        await #expect(throws: AuthenticationError.self) {
            try await mixed.enroll(responder: ScriptedResponder([.customAuthenticatorRegistration(.data(nil))]))
        }
        #expect(await mixed.registration == nil)

        let harness = try AuthenticatorHarness(server)
        _ = try await harness.enroll(responder: ScriptedResponder([.customAuthenticatorRegistration(.data(nil))]))
        await harness.storage.removeValue(forKey: "totp.key")
        await #expect(throws: AuthenticationError.self) {
            try await harness.authenticate(responder: ScriptedResponder([.customAuthenticator(.data(nil))]))
        }
        #expect(await harness.countedAttempts == 0)
    }

    @Test("passes the authenticator conformance suite; a code is accepted once")
    func conformance() async throws {
        try await AuthenticatorConformance(
            TOTPAuthenticatorPlugin.self,
            enrol: [.customAuthenticatorRegistration(.data(nil))],
            authenticate: [.customAuthenticator(.data(nil))],
            wrongAttempt: .spoilDeviceStorage,
            fallback: [.customAuthenticator(.fallbackToPin)]
        ).run()
        let harness = try AuthenticatorHarness(PluginHarness.authenticator(TOTPAuthenticatorPlugin.self))
        _ = try await harness.enroll(responder: ScriptedResponder([.customAuthenticatorRegistration(.data(nil))]))
        _ = try await harness.authenticate(responder: ScriptedResponder([.customAuthenticator(.data(nil))]))
        await #expect(throws: AuthenticationError.self) {
            try await harness.authenticate(responder: ScriptedResponder([.customAuthenticator(.data(nil))]))
        }
        #expect(PluginHarness.configurationProblem(TOTPAuthenticatorPlugin.self, config: ["digits": 9]) != nil)
    }

    @Test("the example is as long as README.md and docs/ARCHITECTURE.md say")
    func sizeAsDocumented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let source = try String(
            contentsOf: root.appendingPathComponent("Examples/TOTPAuthenticator/TOTPAuthenticator.swift"),
            encoding: .utf8
        )
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false).count - 1
        for document in ["README.md", "docs/ARCHITECTURE.md"] {
            let text = try String(contentsOf: root.appendingPathComponent(document), encoding: .utf8)
            #expect(text.contains("one \(lines)-line file"), "\(document) gives another size than \(lines) lines")
        }
    }
}
