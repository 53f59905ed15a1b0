import Foundation
import GatehouseKernel
import GatehousePlugins
import GatehousePostgresTestSupport
import GatehouseProtocol
import GatehouseYAML
import Logging
import Testing

@testable import GatehouseServer

/// A database for one test, on the engine the suite runs on (`GATEHOUSE_TEST_DATABASE`), removed
/// after `body`.
func withTestDatabase(_ body: (ServerDatabase) async throws -> Void) async throws {
    switch TestDatabase.current {
    case .sqlite:
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-storage-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(.sqlite(path: directory.appendingPathComponent("server.sqlite").path))
    case .postgres:
        let cluster = try await PostgresTestCluster.shared()
        let schema = try await cluster.makeSchema("storage")
        defer { try? cluster.dropSchemaBlocking(schema) }
        try await body(try ServerDatabase(cluster.url(schema: schema, pool: 4)))
    }
}

@Suite("Server storage: extensions' migration groups on the server's database")
struct ServerStorageTests {
    let logger = Logger(label: "storage-tests")

    static let notesV1 = MigrationStep(
        "v1",
        sqlite: ["CREATE TABLE notes_items (id TEXT NOT NULL PRIMARY KEY, body TEXT NOT NULL)"],
        postgres: ["CREATE TABLE notes_items (id TEXT NOT NULL PRIMARY KEY, body TEXT NOT NULL)"]
    )
    static let notesV2 = MigrationStep(
        "v2",
        sqlite: ["ALTER TABLE notes_items ADD COLUMN stars INTEGER NOT NULL DEFAULT 0"],
        postgres: ["ALTER TABLE notes_items ADD COLUMN stars BIGINT NOT NULL DEFAULT 0"]
    )

    @Test("A group's steps run after the server's schema, once, and its rows stay across openings")
    func groupRunsOnce() async throws {
        try await withTestDatabase { database in
            let notes = MigrationGroup("notes", steps: [Self.notesV1])
            let first = try await ServerStorage.open(database, migrations: [notes], logger: logger)
            try first.requireMigrated(notes)
            try await first.write { db in
                try db.execute(sql: "INSERT INTO notes_items (id, body) VALUES (?, ?)", arguments: ["a", "hello"])
            }
            await first.shutdown()
            // Opened again with one more step: v1 does not run again (it would fail: the table exists).
            let grown = MigrationGroup("notes", steps: [Self.notesV1, Self.notesV2])
            let second = try await ServerStorage.open(database, migrations: [grown], logger: logger)
            let row = try await second.read { db in
                try SQLRow.fetchOne(db, sql: "SELECT body, stars FROM notes_items WHERE id = ?", arguments: ["a"])
            }
            #expect(row?["body"] as String? == "hello")
            #expect(row?["stars"] as Int? == 0)
            // The steps are recorded beside the server's own, under group/step.
            let recorded = try await second.read { db in
                switch db.dialect {
                case .sqlite: try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
                case .postgres: try String.fetchAll(db, sql: "SELECT identifier FROM gatehouse_migrations")
                }
            }
            #expect(recorded.contains("notes/v1") && recorded.contains("notes/v2") && recorded.contains("v1"))
            await second.shutdown()
        }
    }

    @Test("A step of a known group this version lacks is refused; another extension's group is left alone")
    func unknownSteps() async throws {
        try await withTestDatabase { database in
            let grown = MigrationGroup("notes", steps: [Self.notesV1, Self.notesV2])
            try await ServerStorage.open(database, migrations: [grown], logger: logger).shutdown()
            // Without the group: a start that does not mount the extension opens the database.
            let without = try await ServerStorage.open(database, logger: logger)
            #expect(throws: ServerDatabaseError.self) { try without.requireMigrated(grown) }
            await without.shutdown()
            // With an older group (no v2): a newer version migrated it.
            let older = MigrationGroup("notes", steps: [Self.notesV1])
            let failure = await #expect(throws: (any Error).self) {
                try await ServerStorage.open(database, migrations: [older], logger: logger)
            }
            #expect(failure.map { "\($0)" }?.contains("a newer Gatehouse migrated it") == true)
            #expect(failure.map { "\($0)" }?.contains("notes/v2") == true)
        }
    }

    @Test("Group and step names are checked before anything runs")
    func names() async throws {
        try await withTestDatabase { database in
            await #expect(throws: ServerDatabaseError.self) {
                try await ServerStorage.open(
                    database,
                    migrations: [MigrationGroup("no/slash", steps: [Self.notesV1])],
                    logger: logger
                )
            }
            await #expect(throws: ServerDatabaseError.self) {
                try await ServerStorage.open(
                    database,
                    migrations: [MigrationGroup("notes", steps: [Self.notesV1, Self.notesV1])],
                    logger: logger
                )
            }
        }
    }

    @Test("A token server built on a storage leaves it open; the storage's writes are atomic")
    func serverOnStorage() async throws {
        try await withTestDatabase { database in
            let notes = MigrationGroup("notes", steps: [Self.notesV1])
            let storage = try await ServerStorage.open(database, migrations: [notes], logger: logger)
            let server = try await TokenServer(
                manifest: try ManifestLoader.jsonAndYAML.parse(
                    Data(
                        """
                        server: {clients: [{id: test-app}]}
                        authenticators: [{id: pin, type: pin}]
                        identityProviders: [{id: partner, type: idp.customAPI, config: {url: "https://partner.example/r"}}]
                        """.utf8
                    ),
                    format: YAMLManifestFormat(),
                    source: "test.yaml",
                    additionalSections: ["server"]
                ),
                registry: try PluginRegistry.builtIn,
                storage: storage,
                environment: PluginEnvironment(logger: logger)
            )
            await server.shutdown()
            // A change that fails half-way leaves nothing.
            await #expect(throws: UniqueConstraintViolation.self) {
                try await storage.write { db in
                    try db.execute(sql: "INSERT INTO notes_items (id, body) VALUES ('b', 'one')")
                    try db.execute(sql: "INSERT INTO notes_items (id, body) VALUES ('b', 'two')")
                }
            }
            let count = try await storage.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM notes_items") }
            #expect(count == 0)
            await storage.shutdown()
        }
    }
}
