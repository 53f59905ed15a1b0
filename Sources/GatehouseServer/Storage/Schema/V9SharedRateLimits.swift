import GRDB

extension SchemaMigration {
    /// Rate limits every instance on the database shares: one token bucket a row, by limit and key
    /// (a client's address), changed under its row lock, so instances together allow what the
    /// manifest says for one.
    static let sharedRateLimits = SchemaMigration(
        "v9-shared-rate-limits",
        sqlite: { db in
            try db.create(table: "rate_buckets") { table in
                table.column("name", .text).notNull()
                table.column("key", .text).notNull()
                table.column("tokens", .double).notNull()
                table.column("updated_at", .double).notNull()
                // When the bucket is full again: past it the row holds nothing a new one would not.
                table.column("full_at", .double).notNull().indexed()
                table.primaryKey(["name", "key"])
            }
        },
        postgres: [
            """
            CREATE TABLE rate_buckets (name TEXT NOT NULL, key TEXT NOT NULL, tokens DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL, full_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (name, key))
            """,
            "CREATE INDEX rate_buckets_full_at ON rate_buckets (full_at)",
        ]
    )
}
