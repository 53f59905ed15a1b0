import GRDB

extension SchemaMigration {
    static let replayedGrants = SchemaMigration(
        "v5-replayed-grants",
        sqlite: { db in
            // Single-use credentials presented twice: a session finished from one afterwards is
            // refused, not issued (RFC 6749 §4.1.2), for as long as a flow may still finish.
            try db.create(table: "replayed_grants") { table in
                table.primaryKey("grant", .text)
                table.column("expires_at", .double).notNull().indexed()
            }
        },
        postgres: [
            #"CREATE TABLE replayed_grants ("grant" TEXT PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL)"#,
            "CREATE INDEX replayed_grants_expires_at ON replayed_grants (expires_at)",
        ]
    )
}
