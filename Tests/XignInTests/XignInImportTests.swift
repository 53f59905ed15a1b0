import Foundation
import GRDB
import GatehouseServer
import Synchronization
import Testing
import XignInClient
import XignInManager
import XignInValidators

/// The tables an earlier version's manager made in `xignin/xignin.sqlite`, its own database.
private let earlierSchema = [
    """
    CREATE TABLE accounts (id TEXT NOT NULL PRIMARY KEY, email TEXT UNIQUE, category TEXT NOT NULL,
        attributes BLOB NOT NULL, oprf_key BLOB NOT NULL, pin_public_key BLOB NOT NULL, service_mapping TEXT,
        created_at DOUBLE NOT NULL)
    """,
    "CREATE TABLE pin_keys (token TEXT NOT NULL PRIMARY KEY, oprf_key BLOB NOT NULL, expires_at DOUBLE NOT NULL)",
    """
    CREATE TABLE activation_codes (code_hash BLOB NOT NULL PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE, alias TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, used BOOLEAN NOT NULL DEFAULT 0, expires_at DOUBLE NOT NULL)
    """,
    """
    CREATE TABLE activation_attempts (token TEXT NOT NULL PRIMARY KEY, code_hash BLOB NOT NULL, nonce BLOB NOT NULL,
        expires_at DOUBLE NOT NULL)
    """,
    """
    CREATE TABLE activations (id TEXT NOT NULL PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE, alias TEXT NOT NULL,
        created_at DOUBLE NOT NULL)
    """,
    """
    CREATE TABLE pending_attributes (account_id TEXT NOT NULL PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
        data BLOB NOT NULL)
    """,
]

/// Writes what `storage` holds of the manager into `folder/xignin.sqlite` as an earlier version
/// kept it: the same rows in its own file, under the tables' earlier names (booleans as 0 and 1).
private func writeEarlierDatabase(from storage: ServerStorage, to folder: URL) async throws {
    let rows = try await storage.read { db in
        try XignInFixture.tables.map { table, _ in
            (table, try SQLRow.fetchAll(db, sql: "SELECT * FROM xignin_\(table)"))
        }
    }
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let pool = try DatabasePool(path: folder.appendingPathComponent("xignin.sqlite").path)
    try await pool.write { db in
        for statement in earlierSchema { try db.execute(sql: statement) }
        for (table, tableRows) in rows {
            for row in tableRows {
                let values: [(any DatabaseValueConvertible)?] = row.values.map { value in
                    switch value {
                    case .null: nil
                    case .integer(let number): number
                    case .double(let number): number
                    case .text(let text): text
                    case .blob(let data): data
                    case .bool(let flag): flag ? 1 : 0
                    }
                }
                let placeholders = Array(repeating: "?", count: values.count).joined(separator: ", ")
                try db.execute(
                    sql: "INSERT INTO \(table) (\(row.columns.joined(separator: ", "))) VALUES (\(placeholders))",
                    arguments: StatementArguments(values)
                )
            }
        }
    }
    try pool.close()
}

@Suite("An earlier version's XignIn database")
struct XignInImportTests {
    @Test("xignin/xignin.sqlite is imported once: its account activates with its mailed code, the file is renamed")
    func importedOnce() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-earlier-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        var code = ""
        // A registration made on an earlier version: an account, its mailed code, attributes
        // waiting for the linked service.
        try await withXignIn { fixture in
            var parameters = try await fixture.registry.initialization(url: fixture.url, serviceMappingId: "keycloak")
            parameters.setArbitraryUserAttributes(["team": "blue"])
            _ = try await fixture.registry.register(data: filled(parameters, email: "early@example.com"))
            code = try fixture.activationCode(for: "early@example.com")
            try await writeEarlierDatabase(from: fixture.storage, to: folder)
        }
        let earlier = folder.appendingPathComponent("xignin.sqlite")
        let imported = folder.appendingPathComponent("xignin.sqlite.imported")
        try await withXignIn(earlierDatabase: folder) { fixture in
            #expect(!FileManager.default.fileExists(atPath: earlier.path))
            #expect(FileManager.default.fileExists(atPath: imported.path))
            #expect(try await fixture.count("accounts") == 1)
            let entity = try await fixture.registry.activate(url: fixture.url, code: code, pin: "24680")
            #expect(entity.alias == "Activation 1")
            #expect(fixture.deliveries.received.withLock { $0.map(\.attributes) } == [["team": "blue"]])
            // The address stays taken.
            let parameters = try await fixture.registry.initialization(url: fixture.url)
            guard
                case .failure = try await fixture.registry.register(
                    data: filled(parameters, email: "early@example.com")
                )
            else {
                Issue.record("an imported account's address was registered again")
                return
            }
        }
        // Renamed, it is not imported again.
        try await withXignIn(earlierDatabase: folder) { fixture in
            let accounts = try await fixture.count("accounts")
            #expect(accounts == 0)
            #expect(FileManager.default.fileExists(atPath: imported.path))
        }
    }

    @Test("an earlier database that cannot be read stops the start with a sentence naming the file")
    func unreadableRefused() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-earlier-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let earlier = folder.appendingPathComponent("xignin.sqlite")
        try Data("not a database, whatever its name says".utf8).write(to: earlier)
        do {
            try await withXignIn(earlierDatabase: folder) { _ in Issue.record("the manager started") }
            Issue.record("an unreadable earlier database was ignored")
        } catch let error as EarlierDatabaseImportFailure {
            #expect(error.path == earlier.path)
            #expect(
                error.description.hasPrefix(
                    "The XignIn manager's earlier database \(earlier.path) could not be imported into the server's database"
                )
            )
        }
        // Left where it was, for someone to look at.
        #expect(FileManager.default.fileExists(atPath: earlier.path))
    }
}
