import GRDB

extension SchemaMigration {
    /// Flows follow the kernel's FlowMachine: its whole state is one column. Flows are
    /// short-lived, so the old table is dropped rather than converted.
    static let flowMachine = SchemaMigration(
        "v2-flow-machine",
        sqlite: { db in
            try db.drop(table: "flows")
            try db.create(table: "flows") { table in
                table.primaryKey("id", .text)
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("profile_id", .text).indexed()
                table.column("identity_provider", .text)
                table.column("subject", .text)
                table.column("scope", .text).notNull()
                table.column("profile_key", .text)
                table.column("key_thumbprint", .text).notNull()
                table.column("state", .blob).notNull()
                // The state's attempt hold, kept apart so held attempts can be counted per profile.
                table.column("attempt", .text).notNull().defaults(to: "none")
                // When a held attempt lapses: a request that dies mid-way blocks nobody for long.
                table.column("held_until", .double)
                table.column("version", .integer).notNull().defaults(to: 0)
                table.column("expires_at", .double).notNull().indexed()
            }
            try db.create(index: "flows_profile_attempt", on: "flows", columns: ["profile_id", "attempt"])
        },
        postgres: [
            "DROP TABLE flows",
            """
            CREATE TABLE flows (id TEXT PRIMARY KEY,
                client_id TEXT NOT NULL REFERENCES clients (id) ON DELETE CASCADE, profile_id TEXT,
                identity_provider TEXT, subject TEXT, scope TEXT NOT NULL, profile_key TEXT,
                key_thumbprint TEXT NOT NULL, state BYTEA NOT NULL, attempt TEXT NOT NULL DEFAULT 'none',
                held_until DOUBLE PRECISION, version BIGINT NOT NULL DEFAULT 0,
                expires_at DOUBLE PRECISION NOT NULL)
            """,
            "CREATE INDEX flows_profile_id ON flows (profile_id)",
            "CREATE INDEX flows_expires_at ON flows (expires_at)",
            "CREATE INDEX flows_profile_attempt ON flows (profile_id, attempt)",
        ]
    )
}
