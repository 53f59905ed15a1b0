import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import Synchronization
import Testing

@testable import GatehouseServer

/// A refresh that failed for a reason that passes (a balancer's 503 while the database fails
/// over, an answer lost with its connection) keeps the session: the next refresh either works,
/// or, when the lost rotation did commit, is reuse, which revokes the family and ends it then.
@Suite("A refresh that may be tried again keeps the session")
struct SessionRetryTests {
    private static func isRefresh(_ request: WireRequest) -> Bool {
        request.path == Endpoint.token && String(decoding: request.body, as: UTF8.self).contains("refresh_token")
    }

    @Test("a refresh answered 503 keeps the session, and the next one works", arguments: Mode.allCases)
    func unavailable(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            let before = try #require(await client.sessionTokens)
            fixture.transport.unavailable.withLock { $0 = { Self.isRefresh($0) } }
            await #expect(throws: (any Error).self) { try await client.refreshSession() }
            #expect(await client.sessionTokens?.refreshToken == before.refreshToken, "the session was dropped")
            fixture.transport.unavailable.withLock { $0 = nil }
            try await client.refreshSession()
            #expect(await client.sessionTokens?.refreshToken != before.refreshToken)
        }
    }

    @Test(
        "a refresh whose answer was lost keeps the session; when its rotation had committed, the next is reuse and ends it",
        arguments: Mode.allCases
    )
    func lostAnswer(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            let before = try #require(await client.sessionTokens)
            fixture.transport.losesAnswer.withLock { $0 = { Self.isRefresh($0) } }
            do {
                try await client.refreshSession()
                Issue.record("the answer was not lost")
            } catch let error as GenericError {
                #expect(error.code == .networkConnectivityFailure)
            }
            fixture.transport.losesAnswer.withLock { $0 = nil }
            #expect(await client.sessionTokens?.refreshToken == before.refreshToken, "the session was dropped")
            // The server did rotate: the old refresh token is reuse now, and the family ends.
            do {
                try await client.refreshSession()
                Issue.record("a rotated refresh token was accepted again")
            } catch let error as AuthenticationError {
                #expect(error.code == .userNotAuthenticated)
            }
            #expect(await client.sessionTokens == nil)
            #expect(try await fixture.count("tokens WHERE revoked = FALSE") == 0)
        }
    }
}
