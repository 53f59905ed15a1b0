import GRDB

extension SchemaMigration {
    /// Login tokens and web sessions name the app session (token family) they came from.
    static let webSessionOrigin = SchemaMigration(
        "v6-web-session-origin",
        sqlite: { db in
            // A web session lasts only as long as the app session (token family) it came from,
            // so login tokens and web sessions name it. Those open at the upgrade go: their
            // origin is unknown, and signing in again from the app costs the user one tap.
            try db.drop(table: "web_sessions")
            try db.drop(table: "web_login_tokens")
            for name in ["web_login_tokens", "web_sessions"] {
                try db.create(table: name) { table in
                    table.column("hash", .blob).primaryKey()
                    table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade).indexed()
                    table.column("family", .text).notNull().references("families", onDelete: .cascade).indexed()
                    if name == "web_login_tokens" { table.column("target", .text).notNull() }
                    table.column("expires_at", .double).notNull().indexed()
                }
            }
        },
        postgres: [
            "DROP TABLE web_sessions",
            "DROP TABLE web_login_tokens",
            """
            CREATE TABLE web_login_tokens (hash BYTEA PRIMARY KEY,
                profile_id TEXT NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
                family TEXT NOT NULL REFERENCES families (id) ON DELETE CASCADE,
                target TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL)
            """,
            "CREATE INDEX web_login_tokens_profile_id ON web_login_tokens (profile_id)",
            "CREATE INDEX web_login_tokens_family ON web_login_tokens (family)",
            "CREATE INDEX web_login_tokens_expires_at ON web_login_tokens (expires_at)",
            """
            CREATE TABLE web_sessions (hash BYTEA PRIMARY KEY,
                profile_id TEXT NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
                family TEXT NOT NULL REFERENCES families (id) ON DELETE CASCADE,
                expires_at DOUBLE PRECISION NOT NULL)
            """,
            "CREATE INDEX web_sessions_profile_id ON web_sessions (profile_id)",
            "CREATE INDEX web_sessions_family ON web_sessions (family)",
            "CREATE INDEX web_sessions_expires_at ON web_sessions (expires_at)",
        ]
    )
}
