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
            try await client.authenticateDevice()
            #expect(try fixture.count("tokens") == 8)
            #expect(try fixture.count("client_tokens") == 1)

            // Past the access tokens' 300 s: they go; the refresh tokens (rotated ones too, for
            // reuse detection) stay, and the session still refreshes.
            clock.advance(by: 301)
            let first = try await server.removeExpiredState()
            #expect(first.tokens == 4 && first.deviceTokens == 1 && first.families == 0)
            try await client.refreshSession()

            // A logout revokes the family: it goes with all its tokens.
            await client.logout()
            let second = try await server.removeExpiredState()
            #expect(second.families == 1)
            #expect(try fixture.count("tokens") == 0)
            #expect(try fixture.count("families") == 0)

            // Past test-app's registrationValidity (an hour) the profile ends.
            clock.advance(by: 3600)
            #expect(try await server.removeExpiredState().profiles == 1)
            #expect(try fixture.count("profiles") == 0)
            #expect(try fixture.count("clients") == 1)

            // An installation with nothing left goes after 30 days; the SDK registers its key again.
            clock.advance(by: 30 * 86400)
            #expect(try await server.removeExpiredState().installations == 1)
            #expect(try fixture.count("clients") == 0)
            try await client.authenticateDevice()
            #expect(try fixture.count("clients") == 1)
            #expect(try await server.removeExpiredState().total == 0)
        }
    }

    @Test("one sweep removes at most a batch of each kind")
    func bounded() async throws {
        let clock = ManualClock(Date())
        try await withFixture(.embedded, clock: clock) { fixture in
            let server = try #require((fixture.transport.inner as? EmbeddedTokenServer)?.server)
            let client = try fixture.client()
            _ = try await register(client)
            for _ in 0..<14 { try await client.refreshSession() }
            clock.advance(by: 301)
            // The fixture's batch is 10: 15 expired access tokens take two sweeps.
            #expect(try await server.removeExpiredState().tokens == 10)
            #expect(try await server.removeExpiredState().tokens == 5)
        }
    }
}
