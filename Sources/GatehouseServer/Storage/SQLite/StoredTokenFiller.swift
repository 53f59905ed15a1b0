import Foundation
import GatehouseProtocol

/// The benchmark's way into a server's SQLite database (Benchmarks/ is a package of its own, so
/// this is its SPI: `@_spi(Benchmarks) import GatehouseServer`): it fills the token table with
/// filler sessions and counts rows, through the store, beside the server that has the file open
/// (SQLite allows it).
@_spi(Benchmarks)
public struct StoredTokenFiller: Sendable {
    /// The tables whose rows the steady-load benchmark follows.
    public enum Table: String, CaseIterable, Sendable {
        case tokens, families, flows, clients
        case dpopProofs = "dpop_proofs"
    }

    private let store: ServerStore

    /// The store in the SQLite file at `path` (already made by `gatehouse serve`).
    public init(sqlitePath path: String) throws {
        store = try ServerStore(
            sqlitePath: path,
            settings: .init(tokenLifetimes: .init(access: 3600, refresh: 86_400), maxFailures: 0)
        )
    }

    /// How many rows each of `tables` holds, in one snapshot.
    public func rowCounts(_ tables: [Table]) async throws -> [Int] {
        try await store.lookup { db in
            try tables.map { try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \($0.rawValue)") ?? 0 }
        }
    }

    /// Adds filler sessions of a filler user (each an access and a refresh token, as a real
    /// session has) until the token table holds `target` rows; returns how many it holds.
    public func fill(upTo target: Int) async throws -> Int {
        var missing = target - (try await rowCounts([.tokens])[0])
        guard missing > 0 else { return target - missing }
        let now = Date().timeIntervalSince1970
        try await store.write { db in
            try db.execute(
                sql: """
                    INSERT INTO clients (id, app_id, key_thumbprint, created_at)
                    VALUES ('bench-filler', 'gatehouse-example', 'bench-filler', ?) ON CONFLICT DO NOTHING
                    """,
                arguments: [now]
            )
            try db.execute(
                sql: """
                    INSERT INTO profiles (id, client_id, identity_provider, subject, scope, key_thumbprint, created_at)
                    VALUES ('bench-filler', 'bench-filler', 'demo-api', 'filler@example.com', 'read', 'bench-filler', ?)
                    ON CONFLICT DO NOTHING
                    """,
                arguments: [now]
            )
        }
        // 50 sessions (100 tokens) a statement, 100,000 tokens a transaction.
        let rowsPerStatement = 100
        while missing > 0 {
            let batch = min(missing, 100_000)
            let tag = UUID().uuidString.prefix(8)
            try await store.write { db in
                var index = 0
                while index < batch {
                    let count = min(rowsPerStatement, batch - index)
                    var families: [String] = []
                    var familyArguments: SQLArguments = []
                    var tokenArguments: SQLArguments = []
                    for row in index..<index + count {
                        let access = row.isMultiple(of: 2)
                        let family = "filler-\(tag)-\(row / 2)"
                        if access {
                            families.append("(?, 'bench-filler')")
                            familyArguments = familyArguments + [family]
                        }
                        tokenArguments =
                            tokenArguments + [
                                Data.random(count: 32), access ? "access" : "refresh", family, now, now + 86_400,
                            ]
                    }
                    if !families.isEmpty {
                        try db.execute(
                            sql: "INSERT INTO families (id, profile_id) VALUES \(families.joined(separator: ", "))",
                            arguments: familyArguments
                        )
                    }
                    let tokenRows = Array(
                        repeating: "(?, ?, ?, 'bench-filler', 'bench-filler', 'read', ?, ?)",
                        count: count
                    )
                    try db.execute(
                        sql: """
                            INSERT INTO tokens (hash, kind, family, profile_id, key_thumbprint, scope, issued_at, expires_at)
                            VALUES \(tokenRows.joined(separator: ", "))
                            """,
                        arguments: tokenArguments
                    )
                    index += count
                }
            }
            missing -= batch
        }
        // The filling is not part of any measurement: the store's checkpointer copies its log into
        // the database file (every quarter second) before the benchmark measures.
        try await Task.sleep(for: .seconds(1))
        return try await rowCounts([.tokens])[0]
    }
}
