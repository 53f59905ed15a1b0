import Foundation
import GRDB
import GatehouseLogin
import GatehousePostgresTestSupport
import GatehouseTesting
import Logging
import Testing
import XignInManager

@testable import GatehouseServer

/// One table as either database describes it, in words both share: columns with their kind and
/// nullability, indexes (primary key included) by columns and uniqueness, foreign keys.
private struct TableShape: Equatable, CustomStringConvertible {
    var columns: [String: String] = [:]
    var indexes: Set<String> = []
    var foreignKeys: Set<String> = []

    var description: String {
        let columns = columns.keys.sorted().map { "\($0) \(self.columns[$0] ?? "")" }.joined(separator: ", ")
        return "columns [\(columns)]; indexes \(indexes.sorted()); foreign keys \(foreignKeys.sorted())"
    }
}

/// The storage kind a declared type stands for on either database.
private func kind(_ declared: String) -> String {
    switch declared.lowercased() {
    case "text": "text"
    case "integer", "bigint": "integer"
    case "blob", "bytea": "bytes"
    case "double", "real", "double precision": "real"
    case "boolean": "boolean"
    default: "unknown type \(declared)"
    }
}

@Suite("The two databases' schemas")
struct SchemaParityTests {
    /// Every table, column, index and foreign key the SQLite migrations make.
    private func sqliteSchema(_ groups: [MigrationGroup]) throws -> [String: TableShape] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-schema-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let queue = try DatabaseQueue(path: directory.appendingPathComponent("schema.sqlite").path)
        try SQLiteEngine.migrator(ServerSchema.migrations(with: groups)).migrate(queue)
        return try queue.read { db in
            var tables: [String: TableShape] = [:]
            let names = try String.fetchAll(
                db,
                sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                    + "AND name != 'grdb_migrations'"
            )
            for table in names {
                var shape = TableShape()
                var primaryKey: [(Int, String)] = []
                for column in try Row.fetchAll(db, sql: "PRAGMA table_info(\(table))") {
                    let name: String = column["name"]
                    let position: Int = column["pk"]
                    if position > 0 { primaryKey.append((position, name)) }
                    let notNull = (column["notnull"] as Int) == 1 || position > 0
                    shape.columns[name] = kind(column["type"]) + (notNull ? " not null" : "")
                }
                if !primaryKey.isEmpty {
                    shape.indexes.insert(
                        "unique (\(primaryKey.sorted { $0.0 < $1.0 }.map(\.1).joined(separator: ", ")))"
                    )
                }
                for index in try Row.fetchAll(db, sql: "PRAGMA index_list(\(table))") {
                    let origin: String = index["origin"]
                    guard origin != "pk" else { continue }
                    let name: String = index["name"]
                    let columns = try String.fetchAll(
                        db,
                        sql: "SELECT name FROM pragma_index_info(?) ORDER BY seqno",
                        arguments: [name]
                    )
                    let unique = (index["unique"] as Int) == 1
                    let partial = (index["partial"] as Int) == 1
                    shape.indexes.insert(
                        (unique ? "unique" : "index") + " (\(columns.joined(separator: ", ")))"
                            + (partial ? " partial" : "")
                    )
                }
                for key in try Row.fetchAll(db, sql: "PRAGMA foreign_key_list(\(table))") {
                    let from: String = key["from"]
                    let target: String = key["table"]
                    // No column named: the target's primary key.
                    let to =
                        try (key["to"] as String?)
                        ?? String.fetchOne(
                            db,
                            sql: "SELECT name FROM pragma_table_info(?) WHERE pk = 1",
                            arguments: [target]
                        )
                        ?? "?"
                    let onDelete: String = key["on_delete"]
                    shape.foreignKeys.insert("\(from) → \(target) (\(to)) on delete \(onDelete.lowercased())")
                }
                tables[table] = shape
            }
            return tables
        }
    }

    /// The same, from PostgreSQL's catalogue after the PostgreSQL migrations ran in a schema of
    /// their own.
    private func postgresSchema(_ groups: [MigrationGroup]) async throws -> [String: TableShape] {
        let cluster = try await PostgresTestCluster.shared()
        let schema = try await cluster.makeSchema("parity")
        defer { try? cluster.dropSchemaBlocking(schema) }
        let engine = try await PostgresEngine.open(
            PostgresLocation(url: cluster.url(schema: schema, pool: 1)),
            migrations: ServerSchema.migrations(with: groups),
            logger: Logger(label: "schema-parity")
        )
        await engine.shutdown()
        func rows(_ query: String) async throws -> [[String]] {
            try await cluster.sql(query).split(separator: "\n").map {
                $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            }
        }
        var tables: [String: TableShape] = [:]
        for row in try await rows(
            """
            SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns
            WHERE table_schema = '\(schema)' AND table_name != 'gatehouse_migrations'
            """
        ) {
            tables[row[0], default: TableShape()].columns[row[1]] = kind(row[2]) + (row[3] == "NO" ? " not null" : "")
        }
        // CREATE [UNIQUE] INDEX name ON schema.table USING btree (a, b) [WHERE …]
        for row in try await rows("SELECT tablename, indexdef FROM pg_indexes WHERE schemaname = '\(schema)'") {
            guard tables[row[0]] != nil else { continue }
            let definition = row[1]
            guard let open = definition.range(of: " ("), let close = definition[open.upperBound...].firstIndex(of: ")")
            else { continue }
            let columns = definition[open.upperBound..<close].replacingOccurrences(of: "\"", with: "")  // "grant"
            tables[row[0]]?.indexes.insert(
                (definition.hasPrefix("CREATE UNIQUE") ? "unique" : "index") + " (\(columns))"
                    + (definition.contains(" WHERE ") ? " partial" : "")
            )
        }
        // FOREIGN KEY (a) REFERENCES schema.table(b) ON DELETE CASCADE
        for row in try await rows(
            """
            SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint
            WHERE contype = 'f' AND connamespace = '\(schema)'::regnamespace
            """
        ) {
            let table = row[0].split(separator: ".").last.map(String.init) ?? row[0]
            let definition = row[1]
            let pattern = /FOREIGN KEY \((\w+)\) REFERENCES (?:\w+\.)?(\w+)\((\w+)\)(?: ON DELETE ([A-Z ]+))?/
            guard let match = definition.firstMatch(of: pattern) else {
                Issue.record("unread foreign key: \(definition)")
                continue
            }
            let onDelete = (match.4.map(String.init) ?? "no action").lowercased()
            tables[table]?.foreignKeys.insert("\(match.1) → \(match.2) (\(match.3)) on delete \(onDelete)")
        }
        return tables
    }

    @Test("SQLite and PostgreSQL have the same tables, columns, kinds, nullability, indexes and foreign keys")
    func sameSchema() async throws {
        // With the hosted login's and the XignIn manager's groups: an extension's tables are
        // compared as the server's are.
        let groups = [LoginStore.migrations, XignInManager.migrations]
        let sqlite = try sqliteSchema(groups)
        let postgres = try await postgresSchema(groups)
        #expect(sqlite.keys.sorted() == postgres.keys.sorted())
        // Both readers see what the migrations made (a reader that saw nothing would agree too).
        for shape in [sqlite, postgres] {
            #expect(shape.count >= 15)
            #expect(shape["profiles"]?.columns["failures"] == "integer not null")
            #expect(shape["registrations"]?.indexes.contains("unique (profile_id, authenticator)") == true)
            #expect(shape["profiles"]?.foreignKeys.contains("client_id → clients (id) on delete cascade") == true)
            #expect(shape["login_attempts"]?.columns["locked_until"] == "real")
            #expect(shape["login_codes"]?.indexes.contains("unique (hash)") == true)
            #expect(shape["xignin_activation_codes"]?.columns["attempts"] == "integer not null")
            #expect(shape["xignin_accounts"]?.indexes.contains("unique (email)") == true)
        }
        for table in sqlite.keys.sorted() {
            guard let other = postgres[table], let shape = sqlite[table] else { continue }
            #expect(shape.columns == other.columns, "\(table) columns: SQLite \(shape) — PostgreSQL \(other)")
            #expect(
                shape.indexes == other.indexes,
                "\(table) indexes: SQLite \(shape.indexes.sorted()) — PostgreSQL \(other.indexes.sorted())"
            )
            #expect(
                shape.foreignKeys == other.foreignKeys,
                "\(table) foreign keys: SQLite \(shape.foreignKeys.sorted()) — PostgreSQL \(other.foreignKeys.sorted())"
            )
        }
    }
}
