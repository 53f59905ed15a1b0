import Foundation
import GatehouseClient
import GatehousePostgresTestSupport
import GatehouseProtocol
import Synchronization
import Testing

@testable import GatehouseServer

/// The hottest writes on PostgreSQL are one call of a server-side function each (migration
/// v11): this keeps them from falling back to the whole change unnoticed, which would still give
/// every right answer, only slower.
@Suite("PostgreSQL's hot path: a refresh and a token's use are one function call each")
struct PostgresHotPathTests {
    @Test("a refresh calls gatehouse_rotate_refresh_token, a resource request gatehouse_use_access_token")
    func hotWritesAreFunctionCalls() async throws {
        // The cluster counts calls of PL/pgSQL functions in sessions opened from now on.
        try await PostgresTestCluster.shared().sql("ALTER DATABASE gatehouse_tests SET track_functions = 'pl'")
        try await withCluster(instances: 1) { fixture, _, servers in
            let client = try fixture.client()
            _ = try await register(client)
            for _ in 0..<2 { try await client.refreshSession() }
            for _ in 0..<3 { _ = try await client.fetchProfileResource() }
            // A backend reports its counts when idle, within about ten seconds.
            @Sendable func calls(_ function: String) async throws -> Int {
                try await fixture.read { db in
                    try Int.fetchOne(
                        db,
                        sql: """
                            SELECT calls FROM pg_stat_user_functions
                            WHERE schemaname = current_schema() AND funcname = ?
                            """,
                        arguments: [function]
                    ) ?? 0
                }
            }
            #expect(await eventually(seconds: 20) { try await calls("gatehouse_rotate_refresh_token") == 2 })
            #expect(await eventually(seconds: 20) { try await calls("gatehouse_use_access_token") == 3 })
            // And each call did the change itself: none fell back to the whole change.
            #expect(servers[0].store.hotPathFallbacks.load(ordering: .relaxed) == 0)
        }
    }

    @Test("a flow step's lookup is one statement outside a transaction; a second statement there is refused")
    func oneStatementLookups() async throws {
        try await withCluster(instances: 1) { fixture, _, servers in
            // A PIN authentication reads its flow through the one-statement lookup at each step.
            _ = try await registeredAndLoggedIn(try fixture.client())
            let engine = servers[0].store.engine
            let answer = try await engine.readStatement { db in try Int.fetchOne(db, sql: "SELECT 41 + 1") }
            #expect(answer == 42)
            await #expect(throws: ServerDatabaseError.self) {
                _ = try await engine.readStatement { db in
                    _ = try Int.fetchOne(db, sql: "SELECT 1")
                    return try Int.fetchOne(db, sql: "SELECT 2")
                }
            }
        }
    }
}
