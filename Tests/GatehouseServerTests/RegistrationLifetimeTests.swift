import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import Testing

@Suite("Registration lifetimes: validity and stateless registrations")
struct RegistrationLifetimeTests {
    @Test(
        "a registration ends after the application's registrationValidity; registering again starts anew",
        arguments: Mode.allCases
    )
    func validity(mode: Mode) async throws {
        let clock = ManualClock(Date())
        try await withFixture(mode, clock: clock) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            clock.advance(by: 3000)
            try await client.refreshSession()  // within the hour the manifest gives test-app
            let tokens = try #require(await client.sessionTokens)
            let active = try await fixture.introspect(tokens.accessToken)
            #expect(active.active)

            clock.advance(by: 601)
            #expect(try await fixture.introspect(tokens.accessToken) == .inactive)
            await #expect(throws: AuthenticationError.self) { try await client.refreshSession() }
            do {
                try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
                Issue.record("an expired registration authenticated")
            } catch let error as GenericError {
                #expect(error.code == .userDeregistered)
            }
            // The device forgot the profile, as the server did.
            #expect(try await client.userProfiles().isEmpty)
            #expect(try await fixture.count("profiles") == 0)

            let again = try await register(client)
            clock.advance(by: 3000)
            try await client.authenticateUser(again, delegate: ScriptedResponder([.pin("258147")]))
        }
    }

    @Test(
        "a stateless registration: a session in memory only, no PIN, no mobile authentication; the stored profile stays",
        arguments: Mode.allCases
    )
    func stateless(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let stored = try await register(client)
            await client.logout()

            let script = ScriptedResponder([
                .customRegistration(.data("jane@example.com")), .customRegistration(.data("4821")),
            ])
            let result = try await client.registerStatelessUser(delegate: script)
            #expect(await script.isFinished)  // no PIN was asked for
            #expect(await client.isStateless)
            #expect(result.profile != stored)
            #expect(try await client.fetchProfileResource().subject == "jane@example.com")
            try await client.refreshSession()
            #expect(try await client.userProfiles() == [stored])
            #expect(try await fixture.count("registrations") == 1)  // the stored profile's PIN only

            do {
                try await client.enrollForMobileAuth()
                Issue.record("a stateless session enrolled")
            } catch let error as MobileAuthEnrollmentError {
                #expect(error.code == .statelessUser)
            }
            // The server refuses it as well, to a client below the SDK.
            let url = fixture.transport.baseURL + Endpoint.mobileAuthEnrolment
            let refused = try await fixture.send(
                "POST",
                Endpoint.mobileAuthEnrolment,
                body: try WireCoding.encode(
                    MobileAuthEnrolmentRequest(
                        publicKey: Curve25519.KeyAgreement.PrivateKey().publicKey.rawRepresentation
                    )
                ),
                headers: try await client.resourceHeaders(.user, method: "POST", url: url)
            )
            #expect(refused.status == 403)
            #expect(try errorBody(refused).gatehouseCode == 9033)
            let tokens = try #require(await client.sessionTokens)
            #expect(try await fixture.introspect(tokens.accessToken).kind == .stateless)

            // The stored profile is untouched: its PIN still works.
            try await client.authenticateUser(stored, delegate: ScriptedResponder([.pin("258147")]))
            #expect(await !client.isStateless)

            // An application without statelessRegistration may not.
            let plain = try fixture.client("plain-device", appID: "plain-app")
            do {
                _ = try await plain.registerStatelessUser(
                    delegate: ScriptedResponder([.customRegistration(.data("jane@example.com"))])
                )
                Issue.record("plain-app registered statelessly")
            } catch let error as RegistrationError {
                #expect(error.code == .stateless)
            }
        }
    }
}

extension Fixture {
    /// What the resource server `gateway` learns of `token` by introspection.
    func introspect(_ token: String) async throws -> IntrospectionResponse {
        let response = try await send(
            "POST",
            Endpoint.introspect,
            body: Data("token=\(token)".utf8),
            headers: [
                "Content-Type": "application/x-www-form-urlencoded",
                "Authorization": "Basic " + Data("gateway:\(Fixture.gatewaySecret)".utf8).base64EncodedString(),
            ]
        )
        return try WireCoding.decode(IntrospectionResponse.self, from: response.body)
    }
}
