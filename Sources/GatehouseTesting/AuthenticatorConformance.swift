import Foundation
public import GatehouseKernel

/// The checks every authenticator plugin must pass, built-in or an integrator's, in one call:
/// enrol and authenticate, a wrong answer refused and counted once, the maximum deregisters, a
/// cancelled challenge counts nothing, replayed messages and stale sessions are refused, and
/// the fallback to the PIN where the authenticator offers one.
///
/// ```swift
/// @Test func conforms() async throws {
///     try await AuthenticatorConformance(
///         TOTPAuthenticatorPlugin.self,
///         enrol: [.customAuthenticatorRegistration(.data(nil))],
///         authenticate: [.customAuthenticator(.data(nil))],
///         wrongAttempt: .spoilDeviceStorage,
///         fallback: [.customAuthenticator(.fallbackToPin)]
///     ).run()
/// }
/// ```
/// Each check runs on a fresh harness sharing one ``ManualClock``, which moves on a minute
/// before every attempt. ``run()`` throws ``ConformanceFailure`` listing every failed check.
public struct AuthenticatorConformance: Sendable {
    /// How to make one wrong attempt.
    public enum WrongAttempt: Sendable {
        /// Answer with these (a wrong PIN, say).
        case answers([ScriptedAnswer])
        /// Replace every value the device half stored with random bytes, then answer as for a
        /// right attempt: for authenticators whose device holds the secret (TOTP).
        case spoilDeviceStorage
        /// Prepare the harness (script a sensor, say), then answer with these.
        case prepared(@Sendable (AuthenticatorHarness) async throws -> Void, [ScriptedAnswer])
    }

    private let load: @Sendable (PluginEnvironment) throws -> LoadedPlugins.LoadedAuthenticator
    private let enrol: [ScriptedAnswer]
    private let authenticate: [ScriptedAnswer]
    private let wrongAttempt: WrongAttempt
    private let fallback: [ScriptedAnswer]?
    private let services: PluginServices

    /// - Parameters:
    ///   - plugin: the authenticator plugin under test.
    ///   - config: its manifest entry's configuration.
    ///   - services: services the plugin's configuration names (a shared sensor, say), under
    ///     their typed keys.
    ///   - enrol: the app's answers that enrol the authenticator.
    ///   - authenticate: the app's answers to one right authentication.
    ///   - wrongAttempt: how to make one authentication fail as a wrong answer.
    ///   - fallback: the app's answers that choose the PIN instead; `nil` for the PIN itself.
    public init<P: AuthenticatorPlugin>(
        _ plugin: P.Type,
        config: [String: ConfigValue] = [:],
        services: PluginServices = PluginServices(),
        enrol: [ScriptedAnswer],
        authenticate: [ScriptedAnswer],
        wrongAttempt: WrongAttempt,
        fallback: [ScriptedAnswer]?
    ) {
        self.load = { try PluginHarness.authenticator(plugin, config: config, environment: $0) }
        self.enrol = enrol
        self.authenticate = authenticate
        self.wrongAttempt = wrongAttempt
        self.fallback = fallback
        self.services = services
    }

    /// What passed, what failed and what did not apply.
    public typealias Report = ConformanceReport

    /// Runs every check; throws ``ConformanceFailure`` if any failed.
    @discardableResult
    public func run() async throws -> Report {
        var report = Report()
        let clock = ManualClock()
        func harness(maximum: Int = 0) async throws -> AuthenticatorHarness {
            let environment = PluginEnvironment(logger: RecordingLogger().logger, clock: clock, services: services)
            let harness = try AuthenticatorHarness(load(environment), maximumFailures: maximum, clock: clock)
            _ = try await harness.enroll(responder: ScriptedResponder(enrol))
            return harness
        }
        func attempt(_ harness: AuthenticatorHarness, _ answers: [ScriptedAnswer]) async throws -> AuthenticatorResult {
            clock.advance(by: 60)
            return try await harness.authenticate(responder: ScriptedResponder(answers))
        }

        await report.check("enrols and authenticates") {
            let subject = try await harness()
            guard await subject.registration != nil else { return "enrolment stored no registration data" }
            guard case .completed = try await attempt(subject, authenticate) else { return "fell back instead" }
            return await subject.failureCount == 0 ? nil : "a success left the counter at \(await subject.failureCount)"
        }
        await report.check("a wrong answer is refused and counted once; the right one then resets the counter") {
            let subject = try await harness()
            let kept = await subject.storage.values
            do {
                _ = try await wrong(subject, attempt)
                return "a wrong answer authenticated"
            } catch is any DomainError {}
            guard await subject.failureCount == 1 else {
                return "counted \(await subject.failureCount) times, not once"
            }
            for (key, value) in kept { await subject.storage.setValue(value, forKey: key) }
            _ = try await attempt(subject, authenticate)
            return await subject.failureCount == 0 ? nil : "success did not reset the counter"
        }
        await report.check("the maximum of wrong answers deregisters the profile, exactly") {
            let subject = try await harness(maximum: 3)
            for index in 1...3 {
                do {
                    _ = try await wrong(subject, attempt)
                    return "wrong answer \(index) authenticated"
                } catch let error as GenericError where error.code == .userDeregistered {
                    guard index == 3 else { return "deregistered after \(index) of 3" }
                } catch is any DomainError {
                    guard index < 3 else { return "still registered after 3 wrong answers" }
                }
            }
            return await subject.isDeregistered ? nil : "not deregistered"
        }
        await report.check("a cancelled challenge ends with actionCancelled and counts nothing") {
            let subject = try await harness()
            do {
                _ = try await attempt(subject, [.cancel])
                return "a cancelled authentication succeeded"
            } catch let error as GenericError where error.code == .actionCancelled {}
            return await subject.failureCount == 0 ? nil : "cancelling counted a failure"
        }
        await report.check("replayed messages are refused") {
            let subject = try await harness()
            let before = await subject.sentMessages.count
            _ = try await attempt(subject, authenticate)
            let messages = Array(await subject.sentMessages.dropFirst(before))
            clock.advance(by: 1)
            return await subject.replay(messages) ? "a replay authenticated" : nil
        }
        await report.check("a stale session (an earlier attempt's nonce) is refused") {
            let subject = try await harness()
            _ = try await attempt(subject, authenticate)
            await subject.replayStaleSessions(true)
            let result = try? await attempt(subject, authenticate)
            // Nothing to replay when the plugin keeps no per-attempt secret in its session.
            guard await subject.handedStaleSession else { return nil }
            if case .completed = result { return "authenticated with a stale session" }
            return nil
        }
        if let fallback {
            await report.check("falling back to the PIN counts nothing") {
                let subject = try await harness()
                guard case .fallbackToPin = try await attempt(subject, fallback) else { return "did not fall back" }
                return await subject.failureCount == 0 ? nil : "falling back counted a failure"
            }
        } else {
            report.skipped.append("falling back to the PIN (the PIN itself)")
        }
        if !report.failed.isEmpty { throw ConformanceFailure(report: report) }
        return report
    }

    private func wrong(
        _ subject: AuthenticatorHarness,
        _ attempt: (AuthenticatorHarness, [ScriptedAnswer]) async throws -> AuthenticatorResult
    ) async throws -> AuthenticatorResult {
        switch wrongAttempt {
        case .answers(let answers):
            return try await attempt(subject, answers)
        case .spoilDeviceStorage:
            for (key, value) in await subject.storage.values {
                await subject.storage.setValue(Data((0..<value.count).map { _ in .random(in: 0...255) }), forKey: key)
            }
            return try await attempt(subject, authenticate)
        case .prepared(let prepare, let answers):
            try await prepare(subject)
            return try await attempt(subject, answers)
        }
    }
}

/// What a conformance suite's checks found: each check by name, with the problem after a colon
/// when it failed, or why it did not apply.
public struct ConformanceReport: Sendable {
    /// The checks that passed, by name.
    public var passed: [String] = []
    /// The checks that failed, each as `name: problem`.
    public var failed: [String] = []
    /// The checks that did not apply to the plugin, each as `name (reason)`.
    public var skipped: [String] = []

    /// A check that does not apply to the plugin under test (it asks the app nothing, say).
    struct NotApplicable: Error {
        var reason: String
    }

    /// Runs the check `name` and records what came of it: `body` returns the problem, or `nil`
    /// when the check passed; throwing ``NotApplicable`` skips it, anything else fails it.
    mutating func check(_ name: String, _ body: () async throws -> String?) async {
        do {
            if let problem = try await body() {
                failed.append("\(name): \(problem)")
            } else {
                passed.append(name)
            }
        } catch let skipped as NotApplicable {
            self.skipped.append("\(name) (\(skipped.reason))")
        } catch {
            failed.append("\(name): unexpected \(Self.describe(error))")
        }
    }

    /// An error as a check reports it: a Gatehouse error by domain, code and message.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? any DomainError else { return String(reflecting: error) }
        return "\(error.domainName) \(error.codeName) (\"\(error.message)\")"
    }
}

/// The conformance checks that failed, from ``AuthenticatorConformance`` or
/// ``IdentityProviderConformance``.
public struct ConformanceFailure: Error, CustomStringConvertible {
    /// What the suite found, failures among it.
    public var report: ConformanceReport
    /// `Conformance failed:` and each failed check on a line of its own, for a test's failure
    /// message.
    public var description: String { "Conformance failed:\n- " + report.failed.joined(separator: "\n- ") }
}
