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

private func harness(twoStep: Bool, api: CodeAPI, maxAttempts: Int = 3) throws -> IdentityProviderHarness {
    let environment = PluginEnvironment.testing().with(services: ["codes": api])
    return try IdentityProviderHarness(
        PluginHarness.identityProvider(
            CustomAPIIdentityProviderPlugin.self,
            config: ["twoStep": .bool(twoStep), "handler": "codes", "maxAttempts": .integer(maxAttempts)],
            environment: environment
        )
    )
}

extension PluginEnvironment {
    fileprivate func with(services: [String: any Sendable]) -> PluginEnvironment {
        var copy = self
        copy.services = services
        return copy
    }
}

@Suite("Custom-API identity provider")
struct CustomAPIIdentityProviderTests {
    @Test("what the server half's factory refuses is a configuration problem too, reported alone")
    func factoryRefusals() {
        #expect(
            PluginHarness.configurationProblem(CustomAPIIdentityProviderPlugin.self, config: [:])
                == "config.handler: give exactly one of handler (an in-process API) or url (an HTTP API)"
        )
        #expect(
            PluginHarness.configurationProblem(CustomAPIIdentityProviderPlugin.self, config: ["handler": "nobody"])
                == #"config.handler: the host provides no custom registration API named "nobody""#
        )
        #expect(
            PluginHarness.configurationProblem(
                CustomAPIIdentityProviderPlugin.self,
                config: ["url": "https://api.example/register"]
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
            (["handler": "codes", "maxAttempts": 0], "config.maxAttempts: expected a value from 1 to 10, found 0"),
            (["handler": "codes", "twoStep": "yes"], #"config.twoStep: expected true or false, found "yes""#),
        ] as [([String: ConfigValue], String)]
    )
    func configuration(config: [String: ConfigValue], expected: String) {
        #expect(PluginHarness.configurationProblem(CustomAPIIdentityProviderPlugin.self, config: config) == expected)
    }

    @Test("a handler the host does not provide is refused at load, naming the ones it does")
    func unknownHandler() throws {
        let environment = PluginEnvironment.testing().with(services: ["codes": CodeAPI()])
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
