import Foundation
public import GatehouseKernel

/// The checks every identity provider plugin must pass, built-in or an integrator's, in one call.
///
/// Both halves are built from the plugin as a host builds them (``PluginHarness``), and every
/// registration runs through ``IdentityProviderHarness``: the kernel's flow engine, as the token
/// server runs it. The checks:
///
/// - A good registration names a user, and registering again — whatever scopes the app asks
///   for — names the same one, so the user keeps one profile on a device.
/// - Each message may reach another instance of the server half (a cluster): what the next
///   message needs travels in the challenge's session.
/// - A refused answer ends with a `RegistrationError`: the server half's own, rethrown by the
///   client half. Nobody is registered.
/// - The app cancelling any challenge ends with `GenericError.actionCancelled`; nobody is
///   registered.
/// - Malformed messages, in place of any message, register nobody and revoke nothing.
/// - A registration handed another registration's last message (unused, as an attacker injecting
///   their own login would) refuses it, when the server half's session tells the two apart.
/// - Replaying a registration's messages in a new registration registers nobody.
/// - A replay the server half recognises (`RegistrationOutcome.replayed`) names the user and the
///   grant its first use reported, so exactly the sessions that use issued are revoked.
///
/// ```swift
/// @Test func conforms() async throws {
///     try await IdentityProviderConformance(
///         InvitationIdentityProviderPlugin.self,
///         config: ["invitations": invitations],
///         register: .scripted { [.customRegistration(.data(unusedCodes.next()))] },
///         refused: .scripted { [.customRegistration(.data("NOT-AN-INVITATION"))] }
///     ).run()
/// }
/// ```
/// ``run()`` throws ``ConformanceFailure`` listing every failed check.
public struct IdentityProviderConformance: Sendable {
    /// How the app answers one registration.
    public enum Answers: Sendable {
        /// These answers, in order. Called once for every registration, so each may carry a fresh
        /// single-use credential.
        case scripted(@Sendable () -> [ScriptedAnswer])
        /// A responder made for every registration, for answers computed from the challenge (a
        /// browser login that must send back the state it was given).
        case responder(@Sendable () async throws -> any ChallengeResponder)

        func make() async throws -> any ChallengeResponder {
            switch self {
            case .scripted(let script): ScriptedResponder(script())
            case .responder(let make): try await make()
            }
        }
    }

    /// What ``run()`` found: each check passed, failed or skipped.
    public typealias Report = ConformanceReport

    private let load: @Sendable (PluginEnvironment) throws -> LoadedPlugins.LoadedIdentityProvider
    private let services: PluginServices
    private let scopes: [String]
    private let register: Answers
    private let refused: Answers

    /// - Parameters:
    ///   - plugin: the identity provider plugin under test.
    ///   - config: its manifest entry's configuration.
    ///   - services: services the plugin's configuration names (a login, a registration API),
    ///     under their typed keys;
    ///     shared by every server half the suite builds, as a cluster shares its backends.
    ///   - scopes: the scopes the app asks for.
    ///   - register: the app's answers to one good registration.
    ///   - refused: the app's answers that the provider must refuse (an unknown code, a login
    ///     that never happened).
    public init<P: IdentityProviderPlugin>(
        _ plugin: P.Type,
        config: [String: ConfigValue] = [:],
        services: PluginServices = PluginServices(),
        scopes: [String] = ["openid", "profile"],
        register: Answers,
        refused: Answers
    ) {
        self.load = { try PluginHarness.identityProvider(plugin, config: config, environment: $0) }
        self.services = services
        self.scopes = scopes
        self.register = register
        self.refused = refused
    }

    /// A check that does not apply to this provider, and why.
    private typealias NotApplicable = ConformanceReport.NotApplicable

    /// What one good registration showed.
    private struct GoodRun {
        var identity: RegisteredIdentity
        var messages: Int
        var challenges: Int
    }

    /// Runs every check; throws ``ConformanceFailure`` if any failed.
    @discardableResult
    public func run() async throws -> Report {
        var report = Report()
        let clock = ManualClock()
        let environment = PluginEnvironment(logger: RecordingLogger().logger, clock: clock, services: services)
        let load = self.load
        func harness() throws -> IdentityProviderHarness {
            try IdentityProviderHarness(load(environment), clock: clock)
        }
        func registerWell(
            _ subject: IdentityProviderHarness,
            scopes: [String]? = nil
        ) async throws -> GoodRun {
            let app = ChallengeCounter(try await register.make())
            do {
                _ = try await subject.register(responder: app, scopes: scopes ?? self.scopes)
            } catch {
                throw GoodRegistrationFailed(error: error)
            }
            guard let identity = await subject.identity else { throw GoodRegistrationFailed(error: nil) }
            return GoodRun(identity: identity, messages: await subject.lastMessages.count, challenges: await app.asked)
        }

        await report.check("registers, and names the same user again whatever scopes the app asks for") {
            let subject = try harness()
            let first = try await registerWell(subject)
            guard !first.identity.subject.isEmpty else { return "the server half named an empty subject" }
            let again = try await registerWell(subject, scopes: [])
            guard again.identity.subject == first.identity.subject else {
                return "it named \"\(first.identity.subject)\", then \"\(again.identity.subject)\": a user must "
                    + "keep one subject, so that registering again finds their profile"
            }
            return nil
        }
        await report.check("each message may reach another instance of the server half") {
            let subject = try IdentityProviderHarness(load(environment), clock: clock) {
                guard let host = try load(environment).host else {
                    throw GenericError(.configurationInvalid, message: "The plugin built no server half.")
                }
                return host
            }
            do {
                _ = try await registerWell(subject)
            } catch let failed as GoodRegistrationFailed {
                return "\(failed) when each message reached a server half built afresh; keep what the next "
                    + "message needs in the challenge's session, never in the server half"
            }
            return nil
        }
        let refusal = "a refused answer ends with the server half's RegistrationError, rethrown by the client half"
        await report.check(refusal) {
            let subject = try harness()
            let app = try await refused.make()
            do {
                _ = try await subject.register(responder: app, scopes: scopes)
                return "the refused answer registered \"\(await subject.identity?.subject ?? "")\""
            } catch {
                let refusal = await subject.refusals.last
                if await subject.clientReturned {
                    guard let refusal else { return "the client half returned before its server half named anyone" }
                    return "the client half returned although the server half refused with \(Self.describe(refusal))"
                }
                if let identity = await subject.identity {
                    return "the server half registered \"\(identity.subject)\" although the client half failed"
                }
                if let refusal, refusal.domainName != RegistrationDomain.name {
                    return "the server half refused with \(Self.describe(refusal)), not a RegistrationError"
                }
                guard let thrown = error as? RegistrationError else {
                    return "the client half ended with \(Self.describe(error)), not "
                        + (refusal.map { "the server half's \(Self.describe($0))" } ?? "a RegistrationError")
                }
                if let refusal, refusal.codeNumber != thrown.codeNumber {
                    return
                        "the client half threw \(Self.describe(thrown)), not the server half's \(Self.describe(refusal))"
                }
                return nil
            }
        }
        await report.check("cancelling any challenge ends with actionCancelled; nobody is registered") {
            let asked = try await registerWell(try harness()).challenges
            guard asked > 0 else { throw NotApplicable(reason: "the provider asks the app nothing") }
            for index in 0..<asked {
                let subject = try harness()
                let position = "cancelling challenge \(index + 1) of \(asked)"
                do {
                    let app = ChallengeCounter(try await register.make(), cancelling: index)
                    _ = try await subject.register(responder: app, scopes: scopes)
                } catch let error as GenericError where error.code == .actionCancelled {
                } catch {
                    return "\(position) ended with \(Self.describe(error)), not actionCancelled"
                }
                if let identity = await subject.identity { return "\(position) registered \"\(identity.subject)\"" }
            }
            return nil
        }
        await report.check("malformed messages, in place of any message, register nobody and revoke nothing") {
            let sent = try await registerWell(try harness()).messages
            for step in 0..<sent {
                for (name, malformed) in Self.malformedMessages {
                    let subject = try harness()
                    let app = try await register.make()
                    _ = try? await subject.register(responder: app, scopes: scopes) { index, message in
                        index == step ? .replace(malformed(message)) : index > step ? .withhold : .deliver
                    }
                    let position = "message \(step + 1) of \(sent) replaced by \(name)"
                    if let identity = await subject.identity { return "\(position) registered \"\(identity.subject)\"" }
                    if let revoked = await subject.revokedSubjects.first {
                        return "\(position) revoked the sessions of \"\(revoked)\""
                    }
                }
            }
            return nil
        }
        await report.check("a registration handed another registration's last message refuses it") {
            let last = try await registerWell(try harness()).messages - 1
            let subject = try harness()
            // Registration A stops before its last message reaches the server: its credential stays unused.
            _ = try? await subject.register(responder: register.make(), scopes: scopes) { index, _ in
                index == last ? .withhold : .deliver
            }
            let theirs = await subject.sessions
            guard let injected = await subject.withheld.last, theirs.count == last + 1 else {
                return "a good registration sent \(last + 1) messages, then another number"
            }
            _ = try? await subject.register(responder: register.make(), scopes: scopes) { index, _ in
                index == last ? .replace(injected) : .deliver
            }
            let ours = await subject.sessions
            guard ours.count > last, ours[last] != theirs[last] else {
                throw NotApplicable(reason: "the server half's session does not tell two registrations apart")
            }
            if let identity = await subject.identity {
                return "it accepted another registration's last message and named \"\(identity.subject)\""
            }
            return nil
        }
        await report.check("replaying a registration's messages in a new registration registers nobody") {
            let subject = try harness()
            let first = try await registerWell(subject)
            let messages = await subject.lastMessages
            guard await subject.replay(messages, scopes: scopes) else { return nil }
            return "replaying the \(messages.count) messages of a registration of \"\(first.identity.subject)\" "
                + "registered \"\(await subject.identity?.subject ?? "")\" again"
        }
        await report.check("a replay it recognises revokes what the first use issued") {
            let subject = try harness()
            let first = try await registerWell(subject).identity
            _ = await subject.replay(await subject.lastMessages, scopes: scopes)
            let subjects = await subject.revokedSubjects
            guard !subjects.isEmpty else {
                throw NotApplicable(reason: "the server half answered the replay with no RegistrationOutcome.replayed")
            }
            if let other = subjects.first(where: { $0 != first.subject }) {
                return "it revoked the sessions of \"\(other)\", not of \"\(first.subject)\", whom the credential named"
            }
            if let other = await subject.revokedGrants.first(where: { $0 != first.grant }) {
                return "it named the grant \"\(other)\", not \"\(first.grant ?? "nil")\" that the first use reported: "
                    + "the sessions that use issued stay live"
            }
            return nil
        }
        if !report.failed.isEmpty { throw ConformanceFailure(report: report) }
        return report
    }

    /// Stand-ins for a message: each takes the real one.
    private static let malformedMessages: [(String, @Sendable (Data) -> Data)] = [
        ("nothing", { _ in Data() }),
        ("random bytes", { _ in Data((0..<64).map { _ in .random(in: 0...255) }) }),
        ("an empty JSON object", { _ in Data("{}".utf8) }),
        ("JSON null", { _ in Data("null".utf8) }),
        ("an empty JSON list", { _ in Data("[]".utf8) }),
        ("its first half", { $0.prefix($0.count / 2) }),
    ]

    /// An error as a report line: a domain error by domain, code and message.
    static func describe(_ error: any Error) -> String { ConformanceReport.describe(error) }
}

/// A registration with the good answers failed: every check that needs one says so.
private struct GoodRegistrationFailed: Error, CustomStringConvertible {
    var error: (any Error)?
    var description: String {
        "a registration with the good answers "
            + (error.map { "failed: \(IdentityProviderConformance.describe($0))" } ?? "named nobody")
    }
}

/// Hands every challenge to `inner`, counting them, and cancels the one at index `cancelling`.
private actor ChallengeCounter: ChallengeResponder {
    let inner: any ChallengeResponder
    let cancelling: Int?
    private(set) var asked = 0

    init(_ inner: any ChallengeResponder, cancelling: Int? = nil) {
        self.inner = inner
        self.cancelling = cancelling
    }

    /// Counts one challenge; whether to cancel it.
    private func cancels() -> Bool {
        defer { asked += 1 }
        return asked == cancelling
    }

    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse {
        cancels() ? .cancel : await inner.createPin(challenge)
    }
    func pin(_ challenge: PinChallenge) async -> PinResponse {
        cancels() ? .cancel : await inner.pin(challenge)
    }
    func biometric(_ challenge: BiometricChallenge) async -> BiometricResponse {
        cancels() ? .cancel : await inner.biometric(challenge)
    }
    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) async -> CustomAuthenticatorResponse {
        cancels() ? .cancel : await inner.customAuthenticator(challenge)
    }
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        cancels() ? .cancel : await inner.browserRegistration(challenge)
    }
    func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse {
        cancels() ? .cancel : await inner.customRegistration(challenge)
    }
    func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) async -> CustomAuthenticatorRegistrationResponse {
        cancels() ? .cancel : await inner.customAuthenticatorRegistration(challenge)
    }
    func customAuthenticatorDeregistration(
        _ challenge: CustomAuthenticatorDeregistrationChallenge
    ) async -> CustomAuthenticatorDeregistrationResponse {
        cancels() ? .cancel : await inner.customAuthenticatorDeregistration(challenge)
    }
}
