import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

/// Registration's outcomes beyond the default path: scopes other than the application's
/// defaults, a scope the application may not have, and the identity provider a failure names.
@Suite("Registration outcomes", .serialized)
struct RegistrationOutcomeTests {
    private static func answers(email: String = "jane@example.com", code: String = "4821") -> [ScriptedAnswer] {
        [.customRegistration(.data(email)), .customRegistration(.data(code)), .createPin("258147")]
    }

    @Test("scopes other than the default are granted as asked", arguments: Mode.allCases)
    func requestedScopes(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            // test-app: allowed read and write, default read.
            let writer = try fixture.client("writer")
            let script = ScriptedResponder(Self.answers())
            _ = try await writer.registerUser(scopes: ["write"], delegate: script)
            #expect(await script.isFinished)
            #expect(try await writer.fetchProfileResource().scope == "write")

            let both = try fixture.client("both")
            _ = try await both.registerUser(scopes: ["write", "read"], delegate: ScriptedResponder(Self.answers()))
            #expect(try await both.fetchProfileResource().scope == "read write")

            let plain = try fixture.client("plain")
            _ = try await plain.registerUser(delegate: ScriptedResponder(Self.answers()))
            #expect(try await plain.fetchProfileResource().scope == "read")
        }
    }

    @Test(
        "a scope the application may not have is refused before anything is asked, naming the provider",
        arguments: Mode.allCases
    )
    func refusedScope(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let script = ScriptedResponder(Self.answers())
            let error = await #expect(throws: (any Error).self) {
                try await client.registerUser(scopes: ["read", "admin"], delegate: script)
            }
            #expect((error as? any DomainError)?.message.contains("\"admin\"") == true, "\(String(describing: error))")
            #expect(await script.received.isEmpty)
            #expect(await script.registrationFailures.map(\.id) == ["codes"])
            #expect(try await client.userProfiles().isEmpty)
            #expect(await client.authenticatedUserProfile == nil)
        }
    }

    @Test("a registration the identity provider refuses tells the delegate which provider failed")
    func failingProviderNamed() async throws {
        try await withFixture(.http) { fixture in
            let client = try fixture.client()
            // The code API refuses a wrong code, and the user gives up when asked again: the
            // registration fails inside the provider.
            let script = ScriptedResponder(Array(Self.answers(code: "0000").prefix(2)))
            await #expect(throws: (any Error).self) { try await client.registerUser(delegate: script) }
            #expect(await script.remaining == 0)
            #expect(await script.receivedKinds.prefix(2) == ["customRegistration", "customRegistration"])
            let failed = await script.registrationFailures
            #expect(failed.map(\.id) == ["codes"])
            #expect(failed.first?.name == "Code registration")
            // A registration that succeeds reports no failure.
            let good = ScriptedResponder(Self.answers())
            _ = try await client.registerUser(delegate: good)
            #expect(await good.registrationFailures.isEmpty)
        }
    }

    @Test("the SDK checks a PIN against the policy the server publishes, outside a create-PIN challenge")
    func pinCheckedAgainstPublishedPolicy() async throws {
        try await withFixture(.http) { fixture in
            // The fixture's policy: 6 digits, a digit at most twice.
            let configuration = try await fixture.send("GET", Endpoint.configuration)
            let published = try WireCoding.decode(ServerConfigurationResponse.self, from: configuration.body)
            let pin = try #require(published.authenticators.first { $0.kind == .pin })
            guard case .object(let config)? = pin.config, case .object(let policy)? = config["policy"] else {
                Issue.record("the PIN authenticator publishes no policy: \(String(describing: pin.config))")
                return
            }
            #expect(policy["length"] == 6)
            #expect(policy["maxSimilarDigits"] == 2)

            let client = try fixture.client()
            try await client.validatePinWithPolicy(PIN("258147"))
            for (candidate, code) in [
                ("25814", "tooShort"), ("2581473", "tooLong"), ("25814a", "notNumeric"), ("123456", "blacklisted"),
                ("890123", "sequence"), ("258225", "similarDigits"),
            ] {
                let error = await #expect(throws: PinValidationError.self, "\(candidate)") {
                    try await client.validatePinWithPolicy(PIN(candidate))
                }
                #expect(error?.codeName == code, "\(candidate)")
            }
            // Nothing was registered or sent for it: the check needs no profile and no session.
            #expect(try await client.userProfiles().isEmpty)
        }
    }
}
