import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import Testing

@Suite("Expired state is removed")
struct CleanupTests {
    @Test("sweeps remove expired and revoked tokens, ended registrations and idle installations, nothing live")
    func sweeps() async throws {
        let clock = ManualClock(Date())
        try await withFixture(.embedded, clock: clock) { fixture in
            let server = try #require((fixture.transport.inner as? EmbeddedTokenServer)?.server)
            let client = try fixture.client()
            _ = try await register(client)
            for _ in 0..<3 { try await client.refreshSession() }
            // A session holds one access and one refresh token whatever its rotations.
            #expect(try await fixture.count("tokens") == 2)
            let profile = try #require(try await client.userProfiles().first)
            try await client.authenticateUserImplicitly(profile)
            try await client.authenticateDevice()
            #expect(try await fixture.count("tokens") == 3)
            #expect(try await fixture.count("client_tokens") == 1)

            // Past the access tokens' 300 s: they go, and the implicit token's family with it;
            // the refresh token stays, and the session still refreshes.
            clock.advance(by: 301)
            let first = try await server.removeExpiredState()
            #expect(first.tokens == 2 && first.deviceTokens == 1 && first.families == 1)
            try await client.refreshSession()

            // A logout revokes the family: it goes with all its tokens.
            await client.logout()
            let second = try await server.removeExpiredState()
            #expect(second.families == 1)
            #expect(try await fixture.count("tokens") == 0)
            #expect(try await fixture.count("families") == 0)

            // Past test-app's registrationValidity (an hour) the profile ends.
            clock.advance(by: 3600)
            #expect(try await server.removeExpiredState().profiles == 1)
            #expect(try await fixture.count("profiles") == 0)
            #expect(try await fixture.count("clients") == 1)

            // An installation with nothing left goes after 30 days; the SDK registers its key again.
            clock.advance(by: 30 * 86400)
            #expect(try await server.removeExpiredState().installations == 1)
            #expect(try await fixture.count("clients") == 0)
            try await client.authenticateDevice()
            #expect(try await fixture.count("clients") == 1)
            #expect(try await server.removeExpiredState().total == 0)
        }
    }

    @Test("one sweep removes at most a batch of each kind")
    func bounded() async throws {
        let clock = ManualClock(Date())
        try await withFixture(.embedded, clock: clock) { fixture in
            let server = try #require((fixture.transport.inner as? EmbeddedTokenServer)?.server)
            let client = try fixture.client()
            let profile = try await register(client)
            for _ in 0..<14 { try await client.authenticateUserImplicitly(profile) }
            clock.advance(by: 301)
            // The fixture's batch is 10: 15 expired access tokens (14 implicit) take two sweeps.
            #expect(try await server.removeExpiredState().tokens == 10)
            #expect(try await server.removeExpiredState().tokens == 5)
        }
    }
}
