import Foundation
import GatehouseServer

extension XignInStore {
    /// A column of the earlier file's tables, and what its values are.
    private enum Kind {
        case text, bytes, real, integer, boolean

        /// `value` as this kind, so PostgreSQL gets the type its column has (SQLite keeps
        /// booleans as integers, and a real without a fraction as an integer).
        func converted(_ value: SQLValue) -> SQLValue {
            guard value != .null else { return .null }
            switch self {
            case .text, .bytes: return value
            case .real: return Double(sqlValue: value).map(SQLValue.double) ?? value
            case .integer: return Int64(sqlValue: value).map(SQLValue.integer) ?? value
            case .boolean: return Bool(sqlValue: value).map(SQLValue.bool) ?? value
            }
        }
    }

    /// The earlier file's tables, parents first, and their columns (the same in the storage,
    /// under `xignin_`).
    private static let earlierTables: [(name: String, columns: [(String, Kind)])] = [
        (
            "accounts",
            [
                ("id", .text), ("email", .text), ("category", .text), ("attributes", .bytes), ("oprf_key", .bytes),
                ("pin_public_key", .bytes), ("service_mapping", .text), ("created_at", .real),
            ]
        ),
        ("pin_keys", [("token", .text), ("oprf_key", .bytes), ("expires_at", .real)]),
        (
            "activation_codes",
            [
                ("code_hash", .bytes), ("account_id", .text), ("alias", .text), ("attempts", .integer),
                ("used", .boolean), ("expires_at", .real),
            ]
        ),
        ("activation_attempts", [("token", .text), ("code_hash", .bytes), ("nonce", .bytes), ("expires_at", .real)]),
        ("activations", [("id", .text), ("account_id", .text), ("alias", .text), ("created_at", .real)]),
        ("pending_attributes", [("account_id", .text), ("data", .bytes)]),
    ]

    /// Copies every row of the SQLite file an earlier version's manager kept at `path` into the
    /// storage, in one transaction; rows already there are left as they are, so an import that
    /// is repeated (its file could not be renamed) changes nothing. Returns the rows copied.
    func importEarlierFile(at path: String) async throws -> Int {
        let tables = try ServerStorage.readEarlierSQLiteFile(at: path) { db in
            try Self.earlierTables.map { table in
                let names = table.columns.map(\.0).joined(separator: ", ")
                return try SQLRow.fetchAll(db, sql: "SELECT \(names) FROM \(table.name)").map { row in
                    SQLArguments(zip(table.columns, row.values).map { column, value in column.1.converted(value) })
                }
            }
        }
        return try await storage.write { db in
            var copied = 0
            for (table, rows) in zip(Self.earlierTables, tables) {
                let names = table.columns.map(\.0)
                let placeholders = Array(repeating: "?", count: names.count).joined(separator: ", ")
                for arguments in rows {
                    try db.execute(
                        sql: """
                            INSERT INTO xignin_\(table.name) (\(names.joined(separator: ", "))) VALUES (\(placeholders))
                            ON CONFLICT DO NOTHING
                            """,
                        arguments: arguments
                    )
                    copied += db.changesCount
                }
            }
            return copied
        }
    }
}
