import GRDB

extension SchemaMigration {
    /// The first schema: installations, profiles, registrations, flows, token families and tokens, DPoP proofs seen.
    static let initial = SchemaMigration(
        "v1",
        sqlite: { db in
            try db.create(table: "clients") { table in
                table.primaryKey("id", .text)
                table.column("app_id", .text).notNull()
                table.column("key_thumbprint", .text).notNull().unique()
                table.column("created_at", .double).notNull()
            }
            try db.create(table: "profiles") { table in
                table.primaryKey("id", .text)
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("identity_provider", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("key_thumbprint", .text).notNull()
                table.column("failures", .integer).notNull().defaults(to: 0)
                table.column("created_at", .double).notNull()
                table.uniqueKey(["client_id", "identity_provider", "subject"])
            }
            try db.create(table: "registrations") { table in
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade)
                table.column("authenticator", .text).notNull()
                table.column("data", .blob).notNull()
                table.column("created_at", .double).notNull()
                table.primaryKey(["profile_id", "authenticator"])
            }
            try db.create(table: "flows") { table in
                table.primaryKey("id", .text)
                table.column("kind", .text).notNull()
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("profile_id", .text)
                table.column("stage", .text).notNull()
                table.column("plugin", .text).notNull()
                table.column("session", .blob)
                table.column("attempt_reserved", .boolean).notNull().defaults(to: false)
                table.column("identity_provider", .text)
                table.column("scope", .text).notNull()
                table.column("profile_key", .text)
                table.column("subject", .text)
                table.column("key_thumbprint", .text).notNull()
                table.column("version", .integer).notNull().defaults(to: 0)
                table.column("expires_at", .double).notNull().indexed()
            }
            try db.create(table: "families") { table in
                table.primaryKey("id", .text)
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade).indexed()
                table.column("revoked", .boolean).notNull().defaults(to: false)
            }
            try db.create(table: "tokens") { table in
                table.column("hash", .blob).primaryKey()
                table.column("kind", .text).notNull()
                table.column("family", .text).notNull().references("families", onDelete: .cascade).indexed()
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade)
                table.column("key_thumbprint", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("expires_at", .double).notNull()
                table.column("used_at", .double)
                table.column("revoked", .boolean).notNull().defaults(to: false)
            }
            try db.create(table: "dpop_proofs") { table in
                table.primaryKey("jti", .text)
                table.column("expires_at", .double).notNull().indexed()
            }
        },
        postgres: [
            """
            CREATE TABLE clients (id TEXT PRIMARY KEY, app_id TEXT NOT NULL, key_thumbprint TEXT NOT NULL UNIQUE,
                created_at DOUBLE PRECISION NOT NULL)
            """,
            """
            CREATE TABLE profiles (id TEXT PRIMARY KEY,
                client_id TEXT NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
                identity_provider TEXT NOT NULL, subject TEXT NOT NULL, scope TEXT NOT NULL,
                key_thumbprint TEXT NOT NULL, failures BIGINT NOT NULL DEFAULT 0,
                created_at DOUBLE PRECISION NOT NULL, UNIQUE (client_id, identity_provider, subject))
            """,
            """
            CREATE TABLE registrations (profile_id TEXT NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
                authenticator TEXT NOT NULL, data BYTEA NOT NULL, created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (profile_id, authenticator))
            """,
            """
            CREATE TABLE flows (id TEXT PRIMARY KEY, kind TEXT NOT NULL,
                client_id TEXT NOT NULL REFERENCES clients (id) ON DELETE CASCADE, profile_id TEXT,
                stage TEXT NOT NULL, plugin TEXT NOT NULL, session BYTEA,
                attempt_reserved BOOLEAN NOT NULL DEFAULT FALSE, identity_provider TEXT, scope TEXT NOT NULL,
                profile_key TEXT, subject TEXT, key_thumbprint TEXT NOT NULL, version BIGINT NOT NULL DEFAULT 0,
                expires_at DOUBLE PRECISION NOT NULL)
            """,
            "CREATE INDEX flows_expires_at ON flows (expires_at)",
            """
            CREATE TABLE families (id TEXT PRIMARY KEY,
                profile_id TEXT NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
                revoked BOOLEAN NOT NULL DEFAULT FALSE)
            """,
            "CREATE INDEX families_profile_id ON families (profile_id)",
            """
            CREATE TABLE tokens (hash BYTEA PRIMARY KEY, kind TEXT NOT NULL,
                family TEXT NOT NULL REFERENCES families (id) ON DELETE CASCADE,
                profile_id TEXT NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
                key_thumbprint TEXT NOT NULL, scope TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL,
                used_at DOUBLE PRECISION, revoked BOOLEAN NOT NULL DEFAULT FALSE)
            """,
            "CREATE INDEX tokens_family ON tokens (family)",
            "CREATE TABLE dpop_proofs (jti TEXT PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX dpop_proofs_expires_at ON dpop_proofs (expires_at)",
        ]
    )
}
