public import GatehouseServer

// The login's tables, in both dialects side by side. A released step is never edited: a change is
// a new step at the end of the group.
extension LoginStore {
    /// The login's tables, to open the server's storage with.
    public static let migrations = MigrationGroup(
        "login",
        steps: [
            MigrationStep(
                "v1",
                sqlite: [
                    """
                    CREATE TABLE login_users (username TEXT NOT NULL PRIMARY KEY, password_hash TEXT NOT NULL,
                        created_at DOUBLE NOT NULL)
                    """,
                    """
                    CREATE TABLE login_authorizations (id TEXT NOT NULL PRIMARY KEY, client_id TEXT NOT NULL,
                        redirect_uri TEXT NOT NULL, state TEXT NOT NULL, code_challenge TEXT NOT NULL,
                        scope TEXT NOT NULL, csrf_hash BLOB NOT NULL, subject TEXT, expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX login_authorizations_expires_at ON login_authorizations (expires_at)",
                    """
                    CREATE TABLE login_codes (hash BLOB NOT NULL PRIMARY KEY, client_id TEXT NOT NULL,
                        redirect_uri TEXT NOT NULL, code_challenge TEXT NOT NULL, subject TEXT NOT NULL,
                        scope TEXT NOT NULL, expires_at DOUBLE NOT NULL, used_at DOUBLE)
                    """,
                    "CREATE INDEX login_codes_expires_at ON login_codes (expires_at)",
                    """
                    CREATE TABLE login_attempts (username TEXT NOT NULL PRIMARY KEY, failed_logins INTEGER NOT NULL,
                        locked_until DOUBLE, updated_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX login_attempts_updated_at ON login_attempts (updated_at)",
                ],
                postgres: [
                    """
                    CREATE TABLE login_users (username TEXT NOT NULL PRIMARY KEY, password_hash TEXT NOT NULL,
                        created_at DOUBLE PRECISION NOT NULL)
                    """,
                    """
                    CREATE TABLE login_authorizations (id TEXT NOT NULL PRIMARY KEY, client_id TEXT NOT NULL,
                        redirect_uri TEXT NOT NULL, state TEXT NOT NULL, code_challenge TEXT NOT NULL,
                        scope TEXT NOT NULL, csrf_hash BYTEA NOT NULL, subject TEXT,
                        expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX login_authorizations_expires_at ON login_authorizations (expires_at)",
                    """
                    CREATE TABLE login_codes (hash BYTEA NOT NULL PRIMARY KEY, client_id TEXT NOT NULL,
                        redirect_uri TEXT NOT NULL, code_challenge TEXT NOT NULL, subject TEXT NOT NULL,
                        scope TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL, used_at DOUBLE PRECISION)
                    """,
                    "CREATE INDEX login_codes_expires_at ON login_codes (expires_at)",
                    """
                    CREATE TABLE login_attempts (username TEXT NOT NULL PRIMARY KEY, failed_logins BIGINT NOT NULL,
                        locked_until DOUBLE PRECISION, updated_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX login_attempts_updated_at ON login_attempts (updated_at)",
                ]
            )
        ]
    )
}
