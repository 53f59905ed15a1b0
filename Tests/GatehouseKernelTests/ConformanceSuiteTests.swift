import Foundation
import GatehouseKernel
import GatehouseTesting
import Testing

/// Accepts whatever it is sent: every wrong answer passes.
private enum AcceptsAnything: CustomAuthenticatorPlugin {
    struct Configuration: Decodable, Sendable {}
    static let typeIdentifier: PluginTypeIdentifier = "test.accepts-anything"
    static let summary = "accepts every answer"
    static func makeDevice(configuration: Configuration, context: PluginContext) -> ClosureCustomAuthenticatorDevice {
        ClosureCustomAuthenticatorDevice()
    }
    static func makeService(configuration: Configuration, context: PluginContext) -> ClosureCustomAuthenticatorService {
        ClosureCustomAuthenticatorService(register: { _ in .success() }, authenticate: { _ in .success() })
    }
}

/// Compares the app's answer with what was registered, as a password would.
private enum Password: CustomAuthenticatorPlugin {
    struct Configuration: Decodable, Sendable {}
    static let typeIdentifier: PluginTypeIdentifier = "test.password"
    static let summary = "a password, compared in constant time"
    static func makeDevice(configuration: Configuration, context: PluginContext) -> ClosureCustomAuthenticatorDevice {
        ClosureCustomAuthenticatorDevice()
    }
    static func makeService(configuration: Configuration, context: PluginContext) -> ClosureCustomAuthenticatorService {
        ClosureCustomAuthenticatorService(
            register: { .success(registrationData: $0.payload) },
            authenticate: { request in
                ConstantTime.equals(request.payload ?? "", request.registrationData ?? "-") ? .success() : .retry()
            }
        )
    }
}

@Suite("Authenticator conformance suite")
struct ConformanceSuiteTests {
    @Test("a closure-made authenticator that checks its answer passes, except for replay it cannot detect")
    func password() async throws {
        let suite = AuthenticatorConformance(
            Password.self,
            enrol: [.customAuthenticatorRegistration(.data("correct horse"))],
            authenticate: [.customAuthenticator(.data("correct horse"))],
            wrongAttempt: .answers([.customAuthenticator(.data("battery staple"))]),
            fallback: [.customAuthenticator(.fallbackToPin)]
        )
        do {
            try await suite.run()
            Issue.record("a static password passed the replay check")
        } catch let failure as ConformanceFailure {
            // A static secret replays: the suite must say so, and only that.
            #expect(failure.report.failed.count == 1)
            #expect(failure.report.failed.first?.hasPrefix("replayed messages are refused") == true)
            #expect(failure.report.passed.count == 6)
        }
    }

    @Test("an authenticator that accepts anything fails the wrong-answer, maximum and replay checks")
    func acceptsAnything() async throws {
        let suite = AuthenticatorConformance(
            AcceptsAnything.self,
            enrol: [.customAuthenticatorRegistration(.data(nil))],
            authenticate: [.customAuthenticator(.data(nil))],
            wrongAttempt: .answers([.customAuthenticator(.data("wrong"))]),
            fallback: [.customAuthenticator(.fallbackToPin)]
        )
        let failure = await #expect(throws: ConformanceFailure.self) { try await suite.run() }
        let failed = failure?.report.failed.map { $0.components(separatedBy: ":").first ?? "" } ?? []
        #expect(failed.contains("a wrong answer is refused and counted once; the right one then resets the counter"))
        #expect(failed.contains("the maximum of wrong answers deregisters the profile, exactly"))
        #expect(failed.contains("replayed messages are refused"))
    }
}
