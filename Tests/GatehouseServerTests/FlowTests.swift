import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@Suite("Token server flows", .serialized)
struct FlowTests {
    @Test(
        "register, authenticate, wrong PIN, change PIN, resource, refresh, logout, deregister",
        arguments: Mode.allCases
    )
    func fullFlow(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            // Registration: two-step custom API, one refused PIN, then a good one.
            let script = ScriptedResponder([
                .customRegistration(.data("jane@example.com")), .customRegistration(.data("4821")),
                .createPin("123456"),
                .createPin("258147"),
            ])
            let registration = try await client.registerUser(delegate: script)
            #expect(await script.isFinished)
            #expect(registration.info == CustomInfo(status: 2000, data: "welcome jane@example.com"))
            #expect(registration.identityProvider.id == "codes")
            #expect(
                await script.received.map(\.kind) == [
                    "customRegistration", "customRegistration", "createPin", "createPin",
                ]
            )
            #expect(await script.received[3].error?.codeName == "blacklisted")
            #expect(try await client.userProfiles() == [registration.profile])
            #expect(await client.authenticatedUserProfile == registration.profile)

            // Authentication with a wrong PIN first: the second challenge carries the remaining count.
            let login = ScriptedResponder([.pin("111222"), .pin("258147")])
            try await client.authenticateUser(registration.profile, delegate: login)
            let challenges = await login.received
            guard case .pin(let first) = challenges[0], case .pin(let second) = challenges[1] else {
                Issue.record("expected two PIN challenges")
                return
            }
            #expect(first.remainingFailureCount == 3)
            #expect(second.previousFailureCount == 1)
            #expect(second.remainingFailureCount == 2)
            #expect(second.error?.codeName == "invalidPin")

            // The protected resource answers with the DPoP-bound token.
            let resource = try await client.fetchProfileResource()
            #expect(resource.profileID == registration.profile.id)
            #expect(resource.subject == "jane@example.com")
            #expect(resource.scope == "read")

            // Change PIN: the old PIN stops working, the new one works.
            let change = ScriptedResponder([.pin("258147"), .createPin("914736")])
            try await client.changePin(delegate: change)
            #expect(await change.isFinished)
            let old = ScriptedResponder([.pin("258147"), .pin("914736")])
            try await client.authenticateUser(registration.profile, delegate: old)
            #expect(await old.received[1].error?.codeName == "invalidPin")

            // Refresh rotates the tokens; the resource still answers.
            let before = await client.sessionTokens
            try await client.refreshSession()
            let after = await client.sessionTokens
            #expect(before?.refreshToken != after?.refreshToken)
            #expect(before?.accessToken != after?.accessToken)
            #expect(try await client.fetchProfileResource().profileID == registration.profile.id)

            // Logout ends the session on the server: a request with the old token and a valid
            // proof from the profile's key, accepted just before, is refused after.
            let revokedAccess = try #require(after?.accessToken)
            let url = fixture.transport.baseURL + Endpoint.profileResource
            func withOldToken(_ proof: String) async throws -> WireResponse {
                try await fixture.send(
                    "GET",
                    Endpoint.profileResource,
                    headers: ["Authorization": "DPoP \(revokedAccess)", "DPoP": proof]
                )
            }
            #expect(try await withOldToken(try await client.dpopProof(method: "GET", url: url)).status == 200)
            let unusedProof = try await client.dpopProof(method: "GET", url: url)
            await client.logout()
            #expect(await client.authenticatedUserProfile == nil)
            let stale = try await withOldToken(unusedProof)
            #expect(stale.status == 401)
            #expect(String(decoding: stale.body, as: UTF8.self).contains("revoked"))

            // Deregistration removes the profile on both sides.
            try await client.deregisterUser(registration.profile)
            #expect(try await client.userProfiles().isEmpty)
            #expect(try await fixture.count("profiles") == 0)
            #expect(try await fixture.count("tokens") == 0)
            #expect(try await fixture.count("registrations") == 0)
        }
    }

    @Test("registering the same user again reuses the profile", arguments: Mode.allCases)
    func reRegistration(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let first = try await register(client)
            let second = try await register(client, pin: "914736")
            #expect(first == second)
            #expect(try await client.userProfiles() == [first])
            #expect(try await fixture.count("profiles") == 1)
            // The new PIN is the one that works.
            try await client.authenticateUser(first, delegate: ScriptedResponder([.pin("914736")]))
            let other = try await register(client, email: "joe@example.com")
            #expect(other != first)
            #expect(try await client.userProfiles().count == 2)
        }
    }

    @Test("the maximum of wrong PINs deregisters the user on the server and on the device", arguments: Mode.allCases)
    func maxFailuresDeregister(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 3) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let script = ScriptedResponder([.pin("111222"), .pin("111333"), .pin("111444")])
            do {
                try await client.authenticateUser(profile, delegate: script)
                Issue.record("authenticated with wrong PINs")
            } catch let error as GenericError {
                #expect(error.code == .userDeregistered)
            }
            let remaining = await script.received.compactMap { challenge -> Int? in
                if case .pin(let pin) = challenge { return pin.remainingFailureCount }
                return nil
            }
            #expect(remaining == [3, 2, 1])
            #expect(try await client.userProfiles().isEmpty)
            #expect(try await fixture.count("profiles") == 0)
            #expect(try await fixture.count("tokens") == 0)
            do {
                try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
                Issue.record("a deregistered profile authenticated")
            } catch let error as GenericError {
                #expect(error.code == .userDeregistered)
            }
        }
    }

    @Test(
        "deregistering while the server is unreachable removes the profile locally and says so",
        arguments: Mode.allCases
    )
    func localDeregistration(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            fixture.transport.offline.withLock { $0 = true }
            do {
                try await client.deregisterUser(profile)
                Issue.record("deregistration claimed to reach the server")
            } catch let error as DeregistrationError {
                #expect(error.code == .localDeregistration)
            }
            #expect(try await client.userProfiles().isEmpty)
            #expect(try await fixture.count("profiles") == 1)
        }
    }

    @Test("a second action while one runs is refused with actionAlreadyInProgress")
    func oneActionAtATime() async throws {
        try await withFixture(.embedded) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let gate = GateResponder()
            async let first: CustomInfo? = client.authenticateUser(profile, delegate: gate)
            await gate.waitUntilAsked()
            do {
                try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
                Issue.record("two actions ran at once")
            } catch let error as GenericError {
                #expect(error.code == .actionAlreadyInProgress)
            }
            await gate.release()
            _ = try await first
        }
    }
}

/// Holds the PIN challenge until released, to keep an action running.
actor GateResponder: AuthenticationDelegate {
    private var asked: CheckedContinuation<Void, Never>?
    private var wasAsked = false
    private var waiting: CheckedContinuation<Void, Never>?

    func pin(_ challenge: PinChallenge) async -> PinResponse {
        wasAsked = true
        waiting?.resume()
        waiting = nil
        await withCheckedContinuation { asked = $0 }
        return .pin(PIN("258147"))
    }

    func waitUntilAsked() async {
        if wasAsked { return }
        await withCheckedContinuation { waiting = $0 }
    }

    func release() {
        asked?.resume()
        asked = nil
    }
}
