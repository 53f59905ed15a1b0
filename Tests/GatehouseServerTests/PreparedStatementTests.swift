import Foundation
import GatehousePostgresTestSupport
import Logging
import Testing

@testable import GatehouseServer

/// Statements on PostgreSQL are prepared once per connection and run as `EXECUTE` with their
/// arguments written as literals: every value must arrive as it was given, a table another
/// instance alters must not break the statements prepared against it, and `prepared=0` must
/// prepare nothing.
@Suite("PostgreSQL's prepared statements")
struct PreparedStatementTests {
    /// An engine on a schema of its own with one connection (so every call shares its prepared
    /// statements), and a table of every type the store binds.
    private func withEngine(
        options: String = "",
        _ body: (PostgresEngine, PostgresTestCluster, String) async throws -> Void
    ) async throws {
        let cluster = try await PostgresTestCluster.shared()
        let schema = try await cluster.makeSchema("prepared")
        defer { try? cluster.dropSchemaBlocking(schema) }
        let engine = try await PostgresEngine.open(
            PostgresLocation(url: cluster.url(schema: schema, pool: 1) + options),
            logger: Logger(label: "prepared-statements")
        )
        do {
            try await engine.write { db in
                try db.execute(
                    sql: "CREATE TABLE samples (id BIGINT, i BIGINT, d DOUBLE PRECISION, t TEXT, b BYTEA, f BOOLEAN)"
                )
            }
            try await body(engine, cluster, schema)
        } catch {
            await engine.shutdown()
            throw error
        }
        await engine.shutdown()
    }

    private static let texts = [
        "", "'", "''", "it's", "\\", "\\'", "\\x41", "E'\\n'", "$1", "?", "$$", "--", "/*",
        "x'); DROP TABLE samples; --",
        "ünïcødé 🔐", "tab\tnew\nline", String(repeating: "'\\", count: 300),
    ]
    private static let integers: [Int64] = [0, 1, -1, 42, .max, .min, Int64(Int32.max) + 1]
    private static let doubles: [Double] = [
        0, -0.0, 0.1, -2.5, .greatestFiniteMagnitude, .leastNonzeroMagnitude, 1e-300, .infinity, -.infinity, .pi,
    ]
    private static let blobs = [Data(), Data([0]), Data([0x27, 0x5C]), Data(0...255)]

    @Test("every value binds as given: quotes, backslashes, extremes, bytes, NULL")
    func literalsArriveIntact() async throws {
        try await withEngine { engine, _, _ in
            var rows: [[SQLValue]] = []
            for (index, text) in Self.texts.enumerated() {
                rows.append([
                    .integer(Int64(index)), .integer(Self.integers[index % Self.integers.count]),
                    .double(Self.doubles[index % Self.doubles.count]), .text(text),
                    .blob(Self.blobs[index % Self.blobs.count]), .bool(index % 2 == 0),
                ])
            }
            rows.append([.integer(Int64(rows.count)), .null, .null, .null, .null, .null])
            try await engine.write { [rows] db in
                for row in rows {
                    try db.execute(
                        sql: "INSERT INTO samples (id, i, d, t, b, f) VALUES (?, ?, ?, ?, ?, ?)",
                        arguments: SQLArguments(row)
                    )
                }
            }
            let (stored, prepared) = try await engine.read { db in
                (
                    try SQLRow.fetchAll(
                        db,
                        sql: "SELECT id, i, d, t, b, f FROM samples WHERE id >= ? ORDER BY id",
                        arguments: [0]
                    ),
                    try Int.fetchOne(
                        db,
                        sql: "SELECT COUNT(*) FROM pg_prepared_statements WHERE cardinality(parameter_types) = 6"
                    )
                )
            }
            #expect(stored.map(\.values) == rows)
            // The inserts ran as prepared statements, not as unnamed ones: one for the row of
            // NULLs (whose types PostgreSQL infers), one for the others.
            #expect(prepared == 2)
        }
    }

    @Test(
        "a table another instance alters: a change, a lookup and a one-statement read prepared against it run again, once"
    )
    func alteredTable() async throws {
        try await withEngine { engine, cluster, schema in
            var id = 0
            func insert() async throws -> Int? {
                id += 1
                return try await engine.write { [id] db in
                    try SQLRow.fetchAll(
                        db,
                        sql: "INSERT INTO samples (id, t) VALUES (?, ?) RETURNING *",
                        arguments: [id, "row"]
                    ).first?.columns.count
                }
            }
            @Sendable func look() async throws -> Int? {
                try await engine.read { db in
                    try SQLRow.fetchAll(db, sql: "SELECT * FROM samples WHERE id = ?", arguments: [1]).first?.columns
                        .count
                }
            }
            @Sendable func readOne() async throws -> Int? {
                try await engine.readStatement { db in
                    try SQLRow.fetchOne(db, sql: "SELECT * FROM samples WHERE id >= ?", arguments: [1])?.columns.count
                }
            }
            #expect(try await insert() == 6)
            #expect(try await look() == 6)
            #expect(try await readOne() == 6)
            // Another instance's migrations add columns: each kept plan's results no longer fit.
            for (column, call) in [("one", 0), ("two", 1), ("three", 2)] {
                try await cluster.sql("ALTER TABLE \(schema).samples ADD COLUMN \(column) INTEGER DEFAULT 7")
                let columns =
                    switch call {
                    case 0: try await insert()
                    case 1: try await look()
                    default: try await readOne()
                    }
                #expect(columns == 7 + call)
            }
            // The change whose statement was stale ran once: two rows, not three.
            #expect(try await engine.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM samples") } == 2)
        }
    }

    @Test("text holding NUL is refused as the database refuses it bound, and the connection stays usable")
    func nulInText() async throws {
        try await withEngine { engine, _, _ in
            // Bound, the text is refused as invalid UTF-8 (22021); written into the statement, it
            // would have cut the statement short (a syntax or protocol error, the connection lost).
            let refusal = await #expect(throws: (any Error).self) {
                try await engine.write { db in
                    try db.execute(
                        sql: "INSERT INTO samples (id, t) VALUES (?, ?)",
                        arguments: [1, "before\u{0}after"]
                    )
                }
            }
            #expect(refusal.map { "\($0)" }?.contains("SQLSTATE 22021") == true, "\(String(describing: refusal))")
            try await engine.write { db in
                try db.execute(sql: "INSERT INTO samples (id, t) VALUES (?, ?)", arguments: [2, "fine"])
            }
            let stored = try await engine.read { db in try String.fetchAll(db, sql: "SELECT t FROM samples") }
            #expect(stored == ["fine"])
        }
    }

    @Test("prepared=0 prepares nothing, and the statements still run")
    func preparedOff() async throws {
        try await withEngine(options: "&prepared=0") { engine, _, _ in
            let count = try await engine.write { db in
                try db.execute(sql: "INSERT INTO samples (id, t) VALUES (?, ?)", arguments: [1, "it's"])
                return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pg_prepared_statements")
            }
            #expect(count == 0)
            #expect(try await engine.read { db in try String.fetchOne(db, sql: "SELECT t FROM samples") } == "it's")
        }
    }

    @Test("prepared= takes 0 to 4096")
    func preparedOption() throws {
        let base = "postgres://gatehouse@127.0.0.1/db?sslmode=disable"
        #expect(try PostgresLocation(url: base).preparedStatements == 256)
        #expect(try PostgresLocation(url: base + "&prepared=0").preparedStatements == 0)
        #expect(try PostgresLocation(url: base + "&prepared=4096").preparedStatements == 4096)
        for bad in ["-1", "4097", "many", ""] {
            #expect(throws: ServerDatabaseError.self) { try PostgresLocation(url: base + "&prepared=\(bad)") }
        }
    }
}
