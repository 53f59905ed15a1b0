import GatehouseServer

extension XignInStore {
    /// The manager's tables, in the token server's database beside its own: pass to
    /// ``ServerStorage/open(_:migrations:logger:)``. Released steps are never edited; a change is a
    /// new step at the end, in both dialects.
    static let migrations = MigrationGroup(
        "xignin",
        steps: [
            MigrationStep(
                "v1",
                sqlite: [
                    """
                    CREATE TABLE xignin_accounts (id TEXT NOT NULL PRIMARY KEY, email TEXT UNIQUE,
                        category TEXT NOT NULL, attributes BLOB NOT NULL, oprf_key BLOB NOT NULL,
                        pin_public_key BLOB NOT NULL, service_mapping TEXT, created_at DOUBLE NOT NULL)
                    """,
                    """
                    CREATE TABLE xignin_pin_keys (token TEXT NOT NULL PRIMARY KEY, oprf_key BLOB NOT NULL,
                        expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX xignin_pin_keys_expires_at ON xignin_pin_keys (expires_at)",
                    """
                    CREATE TABLE xignin_activation_codes (code_hash BLOB NOT NULL PRIMARY KEY,
                        account_id TEXT NOT NULL REFERENCES xignin_accounts (id) ON DELETE CASCADE,
                        alias TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
                        used BOOLEAN NOT NULL DEFAULT FALSE, expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX xignin_activation_codes_account_id ON xignin_activation_codes (account_id)",
                    """
                    CREATE TABLE xignin_activation_attempts (token TEXT NOT NULL PRIMARY KEY,
                        code_hash BLOB NOT NULL, nonce BLOB NOT NULL, expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX xignin_activation_attempts_expires_at ON xignin_activation_attempts (expires_at)",
                    """
                    CREATE TABLE xignin_activations (id TEXT NOT NULL PRIMARY KEY,
                        account_id TEXT NOT NULL REFERENCES xignin_accounts (id) ON DELETE CASCADE,
                        alias TEXT NOT NULL, created_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX xignin_activations_account_id ON xignin_activations (account_id)",
                    """
                    CREATE TABLE xignin_pending_attributes (account_id TEXT NOT NULL PRIMARY KEY
                        REFERENCES xignin_accounts (id) ON DELETE CASCADE, data BLOB NOT NULL)
                    """,
                ],
                postgres: [
                    """
                    CREATE TABLE xignin_accounts (id TEXT PRIMARY KEY, email TEXT UNIQUE,
                        category TEXT NOT NULL, attributes BYTEA NOT NULL, oprf_key BYTEA NOT NULL,
                        pin_public_key BYTEA NOT NULL, service_mapping TEXT, created_at DOUBLE PRECISION NOT NULL)
                    """,
                    """
                    CREATE TABLE xignin_pin_keys (token TEXT PRIMARY KEY, oprf_key BYTEA NOT NULL,
                        expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX xignin_pin_keys_expires_at ON xignin_pin_keys (expires_at)",
                    """
                    CREATE TABLE xignin_activation_codes (code_hash BYTEA PRIMARY KEY,
                        account_id TEXT NOT NULL REFERENCES xignin_accounts (id) ON DELETE CASCADE,
                        alias TEXT NOT NULL, attempts BIGINT NOT NULL DEFAULT 0,
                        used BOOLEAN NOT NULL DEFAULT FALSE, expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX xignin_activation_codes_account_id ON xignin_activation_codes (account_id)",
                    """
                    CREATE TABLE xignin_activation_attempts (token TEXT PRIMARY KEY,
                        code_hash BYTEA NOT NULL, nonce BYTEA NOT NULL, expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX xignin_activation_attempts_expires_at ON xignin_activation_attempts (expires_at)",
                    """
                    CREATE TABLE xignin_activations (id TEXT PRIMARY KEY,
                        account_id TEXT NOT NULL REFERENCES xignin_accounts (id) ON DELETE CASCADE,
                        alias TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX xignin_activations_account_id ON xignin_activations (account_id)",
                    """
                    CREATE TABLE xignin_pending_attributes (account_id TEXT PRIMARY KEY
                        REFERENCES xignin_accounts (id) ON DELETE CASCADE, data BYTEA NOT NULL)
                    """,
                ],
            )
        ]
    )
}
