import CustomAPIIdentityProvider
import Foundation
import GatehouseKernel
import GatehouseTesting
import Synchronization
import Testing

/// A registration API that sends a code at init and checks it at completion; records calls.
private final class CodeAPI: CustomRegistrationAPI {
    let calls = Mutex<[String]>([])
    let failWith: Int?

    init(failWith: Int? = nil) { self.failWith = failWith }

    func initialize(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        calls.withLock { $0.append("init:\(request.data ?? "nil")") }
        return CustomRegistrationReply(status: 2000, data: "code 4821", state: "4821|\(request.data ?? "")")
    }

    func complete(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        calls.withLock { $0.append("complete:\(request.data ?? "nil"):\(request.state ?? "nil")") }
        if let failWith { return CustomRegistrationReply(status: failWith, data: "blocked") }
        let expected = request.state?.split(separator: "|").first.map(String.init) ?? "one-step"
        guard request.data == expected else { return CustomRegistrationReply(status: 4001, data: "wrong code") }
        return CustomRegistrationReply(status: 2000, data: "welcome", userID: "user-\(expected)")
    }
}

/// A registration API as an integrator runs one, for the conformance suite: two steps send a code
/// to the e-mail address and bind it to the registration (its state); one step takes a code sent
/// out of band. Each code works once.
private final class OneTimeCodes: CustomRegistrationAPI {
    private let codes = Mutex<[String: String]>([:])

    /// Sends `user` a code out of band (a one-step registration's letter).
    func send(to user: String) -> String {
        let code = String(UUID().uuidString.prefix(8))
        codes.withLock { $0[code] = user }
        return code
    }

    func initialize(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        guard let user = request.data, user.hasSuffix("@example.com") else {
            return CustomRegistrationReply(status: 5001, data: "Not invited.")
        }
        let code = send(to: user)
        return CustomRegistrationReply(status: 2000, data: "Code sent to \(user): \(code)", state: code)
    }

    func complete(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        // With two steps, only the code this registration sent.
        guard let code = request.data, request.state.map({ $0 == code }) ?? true,
            let user = codes.withLock({ $0.removeValue(forKey: code) })
        else { return CustomRegistrationReply(status: 4001, data: "That code is not right.") }
        return CustomRegistrationReply(status: 2000, data: "Welcome.", userID: user)
    }
}

/// The app: gives the e-mail address, then the code the API sent (shown in the finish challenge).
private struct Mailbox: ChallengeResponder {
    func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse {
        switch challenge.step {
        case .initialize: .data("ann@example.com")
        case .finish: .data(challenge.info?.data?.components(separatedBy: ": ").last)
        }
    }
    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .cancel }
    func pin(_ challenge: PinChallenge) -> PinResponse { .cancel }
    func biometric(_ challenge: BiometricChallenge) -> BiometricResponse { .cancel }
    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) -> CustomAuthenticatorResponse { .cancel }
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) -> BrowserRegistrationResponse { .cancel }
}

private func harness(twoStep: Bool, api: CodeAPI, maxAttempts: Int = 3) throws -> IdentityProviderHarness {
    let environment = PluginEnvironment.testing().with(codes: api)
    return try IdentityProviderHarness(
        PluginHarness.identityProvider(
            CustomAPIIdentityProviderPlugin.self,
            config: ["twoStep": .bool(twoStep), "handler": "codes", "maxAttempts": .integer(maxAttempts)],
            environment: environment
        )
    )
}

extension PluginEnvironment {
    /// This environment with `api` provided as the registration API named `codes`.
    fileprivate func with(codes api: any CustomRegistrationAPI) -> PluginEnvironment {
        var copy = self
        copy.services[CustomRegistrationAPIKey.self, named: "codes"] = api
        return copy
    }
}

@Suite("Custom-API identity provider")
struct CustomAPIIdentityProviderTests {
    @Test("two steps pass the identity provider conformance suite: an e-mail address, then its code")
    func twoStepConformance() async throws {
        let api = OneTimeCodes()
        let report = try await IdentityProviderConformance(
            CustomAPIIdentityProviderPlugin.self,
            config: ["twoStep": true, "handler": "codes"],
            services: PluginServices().setting(CustomRegistrationAPIKey.self, named: "codes", to: api),
            register: .responder { Mailbox() },
            refused: .scripted { [.customRegistration(.data("mallory@example.org"))] }
        ).run()
        // The API's statuses have no "used before": a replayed code is only a wrong one.
        #expect(report.skipped.count == 1 && report.skipped[0].hasPrefix("a replay it recognises"), "\(report)")
    }

    @Test("one step passes the identity provider conformance suite: a code sent out of band")
    func oneStepConformance() async throws {
        let api = OneTimeCodes()
        let report = try await IdentityProviderConformance(
            CustomAPIIdentityProviderPlugin.self,
            config: ["handler": "codes"],
            services: PluginServices().setting(CustomRegistrationAPIKey.self, named: "codes", to: api),
            register: .scripted { [.customRegistration(.data(api.send(to: "ann@example.com")))] },
            // A wrong code may be tried again, up to maxAttempts (3): the third ends the registration.
            refused: .scripted { Array(repeating: .customRegistration(.data("wrong")), count: 3) }
        ).run()
        // One message carries the code alone, and a replayed code is only a wrong one.
        #expect(report.skipped.count == 2, "\(report)")
    }

    @Test("what the server half's factory refuses is a configuration problem too, reported alone")
    func factoryRefusals() {
        #expect(
            PluginHarness.configurationProblem(
                CustomAPIIdentityProviderPlugin.self,
                config: [:],
                environment: .testing()
            )
                == "config.handler: give exactly one of handler (an in-process API) or url (an HTTP API)"
        )
        #expect(
            PluginHarness.configurationProblem(
                CustomAPIIdentityProviderPlugin.self,
                config: ["handler": "nobody"],
                environment: .testing()
            )
                == #"config.handler: the host provides no custom registration API named "nobody""#
        )
        #expect(
            PluginHarness.configurationProblem(
                CustomAPIIdentityProviderPlugin.self,
                config: ["url": "https://api.example/register"],
                environment: .testing()
            ) == nil
        )
    }

    @Test("one step: the finish data reaches the API and its info reaches the app")
    func oneStep() async throws {
        let api = CodeAPI()
        let idp = try harness(twoStep: false, api: api)
        let script = ScriptedResponder([.customRegistration(.data("one-step"))])
        let result = try await idp.register(responder: script)
        #expect(result.info == CustomInfo(status: 2000, data: "welcome"))
        #expect(await idp.identity?.subject == "user-one-step")
        #expect(api.calls.withLock { $0 } == ["complete:one-step:nil"])
        guard case .customRegistration(let challenge) = await script.received.first else {
            Issue.record("no challenge")
            return
        }
        #expect(challenge.step == .finish)
        #expect(challenge.info == nil)
    }

    @Test("two steps: init data goes out, the init info comes back with the finish challenge")
    func twoSteps() async throws {
        let api = CodeAPI()
        let idp = try harness(twoStep: true, api: api)
        let script = ScriptedResponder([.customRegistration(.data("jane")), .customRegistration(.data("4821"))])
        let result = try await idp.register(responder: script)
        #expect(result.info?.data == "welcome")
        #expect(await idp.identity?.subject == "user-4821")
        #expect(api.calls.withLock { $0 } == ["init:jane", "complete:4821:4821|jane"])
        let received = await script.received
        guard case .customRegistration(let first) = received[0], case .customRegistration(let second) = received[1]
        else {
            Issue.record("wrong challenges")
            return
        }
        #expect(first.step == .initialize)
        #expect(second.step == .finish)
        #expect(second.info == CustomInfo(status: 2000, data: "code 4821"))
    }

    @Test("a retryable refusal asks again with the API's info; the state is kept")
    func retry() async throws {
        let api = CodeAPI()
        let idp = try harness(twoStep: true, api: api)
        let script = ScriptedResponder([
            .customRegistration(.data("jane")), .customRegistration(.data("0000")), .customRegistration(.data("4821")),
        ])
        _ = try await idp.register(responder: script)
        let received = await script.received
        guard case .customRegistration(let retried) = received[2] else {
            Issue.record("no retry challenge")
            return
        }
        #expect(retried.info == CustomInfo(status: 4001, data: "wrong code"))
        #expect(retried.error?.codeName == "customRegistrationFailure")
        #expect(api.calls.withLock { $0 }.last == "complete:4821:4821|jane")
    }

    @Test("too many retries, or a final refusal, end with customRegistrationFailure and the API's info")
    func failures() async throws {
        let idp = try harness(twoStep: false, api: CodeAPI(), maxAttempts: 2)
        do {
            _ = try await idp.register(
                responder: ScriptedResponder([.customRegistration(.data("a")), .customRegistration(.data("b"))])
            )
            Issue.record("registered after too many wrong answers")
        } catch let error as RegistrationError {
            #expect(error.code == .customRegistrationFailure)
            #expect(error.details.customInfo == CustomInfo(status: 4001, data: "wrong code"))
        }
        let blocked = try harness(twoStep: false, api: CodeAPI(failWith: 5003))
        do {
            _ = try await blocked.register(responder: ScriptedResponder([.customRegistration(.data("x"))]))
            Issue.record("registered after a final refusal")
        } catch let error as RegistrationError {
            #expect(error.code == .customRegistrationFailure)
            #expect(error.details.customInfo == CustomInfo(status: 5003, data: "blocked"))
        }
    }

    @Test("cancelling ends the registration with actionCancelled")
    func cancel() async throws {
        let idp = try harness(twoStep: true, api: CodeAPI())
        do {
            _ = try await idp.register(responder: ScriptedResponder([.customRegistration(.cancel)]))
            Issue.record("a cancelled registration went on")
        } catch let error as GenericError {
            #expect(error.code == .actionCancelled)
        }
    }

    @Test(
        "configuration: exactly one of handler and url, a real URL, a known handler",
        arguments: [
            ([:], "config.handler: give exactly one of handler (an in-process API) or url (an HTTP API)"),
            (
                ["handler": "codes", "url": "http://127.0.0.1:9/register"],
                "config.handler: give exactly one of handler (an in-process API) or url (an HTTP API)"
            ),
            (
                ["url": "ftp://example.com/x"],
                #"config.url: expected an http or https URL, found "ftp://example.com/x""#
            ),
            // A URL the server's outbound client would refuse to call is refused at load.
            (["url": "https://api.example:443/register"], "config.url: leave out the default port 443 of https"),
            (["url": "https://api.example/a//b"], "config.url: the path has an empty segment (//)"),
            (["handler": "codes", "maxAttempts": 0], "config.maxAttempts: expected a value from 1 to 10, found 0"),
            (["handler": "codes", "twoStep": "yes"], #"config.twoStep: expected true or false, found "yes""#),
        ] as [([String: ConfigValue], String)]
    )
    func configuration(config: [String: ConfigValue], expected: String) {
        let problem = PluginHarness.configurationProblem(
            CustomAPIIdentityProviderPlugin.self,
            config: config,
            environment: .testing()
        )
        #expect(problem == expected)
    }

    @Test("a handler the host does not provide is refused at load, naming the ones it does")
    func unknownHandler() throws {
        let environment = PluginEnvironment.testing().with(codes: CodeAPI())
        do {
            _ = try PluginHarness.identityProvider(
                CustomAPIIdentityProviderPlugin.self,
                config: ["handler": "otp"],
                environment: environment
            )
            Issue.record("an unknown handler was accepted")
        } catch {
            #expect(
                "\(error)"
                    == #"test: identityProviders[0] (id "subject"): config.handler: the host provides no custom registration API named "otp"; it provides: codes"#
            )
        }
    }
}
