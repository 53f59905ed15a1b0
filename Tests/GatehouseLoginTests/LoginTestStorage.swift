import Foundation
import GatehouseLogin
import GatehousePostgresTestSupport
import GatehouseServer
import Logging

/// The server's storage, with the login's tables, for one test: SQLite in a temporary folder, or
/// a fresh schema of the test cluster when `GATEHOUSE_TEST_DATABASE=postgres` (as the server's
/// tests pick theirs); removed after `body`.
func withLoginStorage(_ body: (ServerStorage) async throws -> Void) async throws {
    let logger = Logger(label: "login-tests")
    let database: ServerDatabase
    var cleanUp: () -> Void
    if ProcessInfo.processInfo.environment["GATEHOUSE_TEST_DATABASE"] == "postgres" {
        let cluster = try await PostgresTestCluster.shared()
        let schema = try await cluster.makeSchema("login")
        database = try ServerDatabase(cluster.url(schema: schema, pool: 4))
        cleanUp = { try? cluster.dropSchemaBlocking(schema) }
    } else {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-login-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        database = .sqlite(path: directory.appendingPathComponent("server.sqlite").path)
        cleanUp = { try? FileManager.default.removeItem(at: directory) }
    }
    defer { cleanUp() }
    let storage = try await ServerStorage.open(database, migrations: [LoginStore.migrations], logger: logger)
    do {
        try await body(storage)
    } catch {
        await storage.shutdown()
        throw error
    }
    await storage.shutdown()
}
