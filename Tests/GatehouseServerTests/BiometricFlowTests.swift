import BiometricAuthenticator
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@Suite("Biometric authentication through the token server", .serialized)
struct BiometricFlowTests {
    @Test(
        "biometric: every answer, a failed scan counted and retried, lockout and OS invalidation fall back to the PIN",
        arguments: Mode.allCases
    )
    func biometric(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 5) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            let enrol = ScriptedResponder([.pin("258147")])
            _ = try await client.registerAuthenticator("face", delegate: enrol)
            #expect(await enrol.receivedKinds == ["pin"])
            #expect(try await client.authenticators(.registered, for: profile).map(\.id) == ["pin", "face"])

            // Default and custom prompts reach the sensor; the server issues tokens.
            let plain = ScriptedResponder([.biometric(.defaultPrompt)])
            try await client.authenticateUser(profile, authenticator: "face", delegate: plain)
            let custom = ScriptedResponder([.biometric(.prompt("Pay €120"))])
            try await client.authenticateUser(profile, authenticator: "face", delegate: custom)
            #expect(await fixture.sensor.prompts.suffix(2) == ["Confirm it's you", "Pay €120"])
            #expect(try await client.fetchProfileResource().profileID == profile.id)

            // The user prefers the PIN, or cancels: nothing counted.
            let choice = ScriptedResponder([.biometric(.fallbackToPin), .pin("258147")])
            try await client.authenticateUser(profile, authenticator: "face", delegate: choice)
            #expect(await choice.receivedKinds == ["biometric", "pin"])
            await #expect(throws: GenericError.self) {
                try await client.authenticateUser(
                    profile,
                    authenticator: "face",
                    delegate: ScriptedResponder([.biometric(.cancel)])
                )
            }
            #expect(try await failures(fixture) == 0)

            // A failed scan counts on the one counter; the challenge comes again with the error.
            await fixture.sensor.enqueue(.noMatch)
            let retry = ScriptedResponder([.biometric(.defaultPrompt), .cancel])
            await #expect(throws: GenericError.self) {
                try await client.authenticateUser(profile, authenticator: "face", delegate: retry)
            }
            #expect(await retry.received.last?.error?.codeName == "biometricAuthenticatorFailure")
            #expect(try await failures(fixture) == 1)
            try await client.authenticateUser(
                profile,
                authenticator: "face",
                delegate: ScriptedResponder([.biometric(.defaultPrompt)])
            )
            #expect(try await failures(fixture) == 0)

            // Lockout: the server forgets it, the PIN takes over with the reason, the device forgets it.
            await fixture.sensor.enqueue(.lockout)
            let lockout = ScriptedResponder([.biometric(.defaultPrompt), .pin("258147")])
            try await client.authenticateUser(profile, authenticator: "face", delegate: lockout)
            guard case .pin(let pin) = await lockout.received.last else {
                Issue.record("no PIN after the lockout")
                return
            }
            #expect(pin.error?.codeName == "authenticatorDeregistered")
            #expect(try await client.authenticators(.registered, for: profile).map(\.id) == ["pin"])
            #expect(try await fixture.count("registrations") == 1)
            await fixture.sensor.resetLockout()

            // A key the OS invalidated (biometrics changed) ends the same way.
            _ = try await client.registerAuthenticator("face", delegate: ScriptedResponder([.pin("258147")]))
            await fixture.sensor.changeEnrolledBiometrics()
            let invalidated = ScriptedResponder([.biometric(.defaultPrompt), .pin("258147")])
            try await client.authenticateUser(profile, authenticator: "face", delegate: invalidated)
            #expect(await invalidated.received.last?.error?.codeName == "authenticatorDeregistered")
            #expect(try await client.authenticators(.registered, for: profile).map(\.id) == ["pin"])
        }
    }
}
