import Logging
import PostgresNIO

/// The schema on PostgreSQL: the SQLite migrations (``SQLiteEngine/migrator``), step for step
/// under the same names, in PostgreSQL's types (BIGINT, DOUBLE PRECISION, BYTEA, BOOLEAN).
///
/// Applied in one transaction under an advisory lock: instances starting together migrate once,
/// and one that starts during an upgrade waits for it. An instance whose database has a
/// migration it does not know (a newer version ran) refuses to start rather than guess.
enum PostgresMigrations {
    /// Any fixed number: with the schema's hash, it names the migration lock among the
    /// database's advisory locks.
    static let lockKey: Int32 = 0x6761_7465

    static let steps: [(identifier: String, statements: [String])] = [
        (
            "v1",
            [
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
        ),
        (
            "v2-flow-machine",
            [
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
        ),
        (
            "v3-mobile-auth",
            [
                """
                CREATE TABLE mobile_enrolments (profile_id TEXT PRIMARY KEY REFERENCES profiles (id) ON DELETE CASCADE,
                    identity_provider TEXT NOT NULL, subject TEXT NOT NULL, device_key BYTEA NOT NULL,
                    server_key BYTEA NOT NULL, push_token TEXT UNIQUE, platform TEXT,
                    disenrolled BOOLEAN NOT NULL DEFAULT FALSE, created_at DOUBLE PRECISION NOT NULL)
                """,
                "CREATE INDEX mobile_enrolments_user ON mobile_enrolments (identity_provider, subject)",
                """
                CREATE TABLE mobile_transactions (id TEXT PRIMARY KEY, api_client TEXT NOT NULL,
                    identity_provider TEXT NOT NULL, subject TEXT NOT NULL, type TEXT NOT NULL, method TEXT NOT NULL,
                    message TEXT NOT NULL, number BIGINT, signing_data_hash BYTEA, callback_uri TEXT,
                    callback_state TEXT NOT NULL DEFAULT 'none', callback_attempts BIGINT NOT NULL DEFAULT 0,
                    callback_next_at DOUBLE PRECISION, status TEXT NOT NULL, reason TEXT, answered_by TEXT,
                    authentication_method TEXT, signature BYTEA, user_public_key TEXT, signature_verified BOOLEAN,
                    created_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION NOT NULL,
                    answered_at DOUBLE PRECISION)
                """,
                "CREATE INDEX mobile_transactions_callback_state ON mobile_transactions (callback_state)",
                "CREATE INDEX mobile_transactions_user ON mobile_transactions (identity_provider, subject, type)",
                "CREATE INDEX mobile_transactions_expiry ON mobile_transactions (status, expires_at)",
                "CREATE INDEX mobile_transactions_answered ON mobile_transactions (answered_at)",
                """
                CREATE TABLE mobile_deliveries (seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    transaction_id TEXT NOT NULL REFERENCES mobile_transactions (id) ON DELETE CASCADE,
                    profile_id TEXT NOT NULL, sealed BYTEA NOT NULL, nonce_hash BYTEA NOT NULL,
                    UNIQUE (transaction_id, profile_id))
                """,
                "CREATE INDEX mobile_deliveries_profile_id ON mobile_deliveries (profile_id)",
                "ALTER TABLE flows ADD COLUMN transaction_id TEXT",
            ]
        ),
        (
            "v4-oauth",
            [
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
        ),
        (
            "v5-replayed-grants",
            [
                #"CREATE TABLE replayed_grants ("grant" TEXT PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL)"#,
                "CREATE INDEX replayed_grants_expires_at ON replayed_grants (expires_at)",
            ]
        ),
        (
            // Login tokens and web sessions name the app session (token family) they came from.
            "v6-web-session-origin",
            [
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
        ),
    ]

    /// Brings the database to this version's schema; on a pool thread (it waits for answers).
    static func apply(
        on connection: PostgresConnection,
        logger: Logger = Logger(label: "gatehouse.migrations")
    )
        throws
    {
        func run(_ sql: String) throws -> PostgresQueryResult {
            try connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).wait()
        }
        _ = try run("BEGIN")
        do {
            // An instance starting while another migrates waits as long as that takes.
            _ = try run("SET LOCAL lock_timeout = 0")
            _ = try run("SET LOCAL statement_timeout = 0")
            // One lock per schema: deployments in other schemas of the database migrate freely.
            _ = try run("SELECT pg_advisory_xact_lock(\(lockKey), hashtext(current_schema()))")
            _ = try run(
                """
                CREATE TABLE IF NOT EXISTS gatehouse_migrations (identifier TEXT PRIMARY KEY,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now())
                """
            )
            var applied = Set<String>()
            for row in try run("SELECT identifier FROM gatehouse_migrations").rows {
                applied.insert(try row.decode(String.self))
            }
            let known = Set(steps.map(\.identifier))
            if let unknown = applied.subtracting(known).sorted().first {
                throw ServerDatabaseError(
                    "The database has migration \(unknown), which this version does not know: a newer Gatehouse "
                        + "migrated it. Run that version (or newer) instead."
                )
            }
            for step in steps where !applied.contains(step.identifier) {
                for statement in step.statements { _ = try run(statement) }
                _ = try run("INSERT INTO gatehouse_migrations (identifier) VALUES ('\(step.identifier)')")
                logger.info("Migrated the database", metadata: ["migration": "\(step.identifier)"])
            }
            _ = try run("COMMIT")
        } catch {
            _ = try? run("ROLLBACK")
            throw PostgresSession.explained(error)
        }
    }
}
