import GRDB

extension SchemaMigration {
    /// OAuth: shared secrets, device tokens, grants and rotation generations, registration validity and stateless registrations, app-to-web single sign-on.
    static let oauth = SchemaMigration(
        "v4-oauth",
        sqlite: { db in
            // Secrets the server makes once and every instance shares (the DPoP nonce key).
            try db.create(table: "server_secrets") { table in
                table.primaryKey("name", .text)
                table.column("value", .blob).notNull()
            }
            // Device tokens (client credentials): bound to an installation's key, no user.
            try db.create(table: "client_tokens") { table in
                table.column("hash", .blob).primaryKey()
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade).indexed()
                table.column("key_thumbprint", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("issued_at", .double).notNull()
                table.column("expires_at", .double).notNull().indexed()
                table.column("revoked", .boolean).notNull().defaults(to: false)
            }
            try db.alter(table: "tokens") { table in table.add(column: "issued_at", .double) }
            // The single-use credential a session came from (an authorization code's hash): its
            // replay revokes exactly the families that carry it.
            try db.alter(table: "families") { table in
                table.add(column: "grant", .text)
                // Refresh tokens rotate by generation: only the current one is stored.
                table.add(column: "generation", .integer).notNull().defaults(to: 0)
            }
            try db.create(index: "families_grant", on: "families", columns: ["grant"])
            // The sweep looks installations up by what hangs off them.
            try db.create(index: "flows_client_id", on: "flows", columns: ["client_id"])
            try db.alter(table: "flows") { table in
                table.add(column: "stateless", .boolean).notNull().defaults(to: false)
            }
            try db.create(index: "tokens_expires_at", on: "tokens", columns: ["expires_at"])
            try db.create(index: "tokens_profile_id", on: "tokens", columns: ["profile_id"])
            // Profiles gain registration validity and stateless registrations. A stateless profile
            // lives beside the user's stored one on the same installation, so the uniqueness of
            // (installation, provider, subject) holds for stored profiles only: the table is
            // rebuilt to move it into a partial index (foreign keys are off while migrating).
            try db.create(table: "profiles_v4") { table in
                table.primaryKey("id", .text)
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("identity_provider", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("key_thumbprint", .text).notNull()
                table.column("failures", .integer).notNull().defaults(to: 0)
                table.column("created_at", .double).notNull()
                // Registration validity: the profile ends then (NULL: never).
                table.column("expires_at", .double).indexed()
                // A stateless registration: its session lives in the app's memory only.
                table.column("stateless", .boolean).notNull().defaults(to: false)
            }
            try db.execute(
                sql: """
                    INSERT INTO profiles_v4 (id, client_id, identity_provider, subject, scope, key_thumbprint, failures,
                        created_at)
                    SELECT id, client_id, identity_provider, subject, scope, key_thumbprint, failures, created_at
                    FROM profiles
                    """
            )
            try db.drop(table: "profiles")
            try db.rename(table: "profiles_v4", to: "profiles")
            try db.execute(
                sql: """
                    CREATE UNIQUE INDEX profiles_user ON profiles (client_id, identity_provider, subject)
                    WHERE stateless = 0
                    """
            )
            try db.create(index: "profiles_client_id", on: "profiles", columns: ["client_id"])
            // App-to-web single sign-on: one-time login tokens for a target URL, and the browser
            // sessions they open.
            try db.create(table: "web_login_tokens") { table in
                table.column("hash", .blob).primaryKey()
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade).indexed()
                table.column("target", .text).notNull()
                table.column("expires_at", .double).notNull().indexed()
            }
            try db.create(table: "web_sessions") { table in
                table.column("hash", .blob).primaryKey()
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade).indexed()
                table.column("expires_at", .double).notNull().indexed()
            }
        },
        postgres: [
            "CREATE TABLE server_secrets (name TEXT PRIMARY KEY, value BYTEA NOT NULL)",
            """
            CREATE TABLE client_tokens (hash BYTEA PRIMARY KEY,
                client_id TEXT NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
                key_thumbprint TEXT NOT NULL, scope TEXT NOT NULL, issued_at DOUBLE PRECISION NOT NULL,
                expires_at DOUBLE PRECISION NOT NULL, revoked BOOLEAN NOT NULL DEFAULT FALSE)
            """,
            "CREATE INDEX client_tokens_client_id ON client_tokens (client_id)",
            "CREATE INDEX client_tokens_expires_at ON client_tokens (expires_at)",
            "ALTER TABLE tokens ADD COLUMN issued_at DOUBLE PRECISION",
            #"ALTER TABLE families ADD COLUMN "grant" TEXT"#,
            "ALTER TABLE families ADD COLUMN generation BIGINT NOT NULL DEFAULT 0",
            #"CREATE INDEX families_grant ON families ("grant")"#,
            "CREATE INDEX flows_client_id ON flows (client_id)",
            "ALTER TABLE flows ADD COLUMN stateless BOOLEAN NOT NULL DEFAULT FALSE",
            "CREATE INDEX tokens_expires_at ON tokens (expires_at)",
            "CREATE INDEX tokens_profile_id ON tokens (profile_id)",
            // Stateless registrations live beside the user's stored profile on the same
            // installation: the uniqueness moves into a partial index (PostgreSQL alters
            // the table in place where SQLite rebuilt it).
            "ALTER TABLE profiles ADD COLUMN expires_at DOUBLE PRECISION",
            "ALTER TABLE profiles ADD COLUMN stateless BOOLEAN NOT NULL DEFAULT FALSE",
            "CREATE INDEX profiles_expires_at ON profiles (expires_at)",
            "ALTER TABLE profiles DROP CONSTRAINT profiles_client_id_identity_provider_subject_key",
            """
            CREATE UNIQUE INDEX profiles_user ON profiles (client_id, identity_provider, subject)
            WHERE stateless = FALSE
            """,
            "CREATE INDEX profiles_client_id ON profiles (client_id)",
            """
            CREATE TABLE web_login_tokens (hash BYTEA PRIMARY KEY,
                profile_id TEXT NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
                target TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL)
            """,
            "CREATE INDEX web_login_tokens_profile_id ON web_login_tokens (profile_id)",
            "CREATE INDEX web_login_tokens_expires_at ON web_login_tokens (expires_at)",
            """
            CREATE TABLE web_sessions (hash BYTEA PRIMARY KEY,
                profile_id TEXT NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
                expires_at DOUBLE PRECISION NOT NULL)
            """,
            "CREATE INDEX web_sessions_profile_id ON web_sessions (profile_id)",
            "CREATE INDEX web_sessions_expires_at ON web_sessions (expires_at)",
        ]
    )
}
