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
            ),
            MigrationStep(
                "v2-openid",
                sqlite: [
                    "ALTER TABLE login_authorizations ADD COLUMN details TEXT",
                    "ALTER TABLE login_codes ADD COLUMN details TEXT",
                    """
                    CREATE TABLE login_signing_keys (kid TEXT NOT NULL PRIMARY KEY, algorithm TEXT NOT NULL,
                        generation INTEGER NOT NULL, private_pem TEXT NOT NULL, created_at DOUBLE NOT NULL,
                        signs_from DOUBLE, retired_at DOUBLE, published_until DOUBLE, UNIQUE (algorithm, generation))
                    """,
                    """
                    CREATE TABLE login_sessions (id TEXT NOT NULL PRIMARY KEY, cookie_hash BLOB NOT NULL UNIQUE,
                        subject TEXT NOT NULL, auth_time DOUBLE NOT NULL, amr TEXT NOT NULL, acr TEXT NOT NULL,
                        expires_at DOUBLE NOT NULL, ended_at DOUBLE)
                    """,
                    "CREATE INDEX login_sessions_expires_at ON login_sessions (expires_at)",
                    """
                    CREATE TABLE login_session_clients (session_id TEXT NOT NULL, client_id TEXT NOT NULL,
                        PRIMARY KEY (session_id, client_id))
                    """,
                    """
                    CREATE TABLE login_consents (subject TEXT NOT NULL, client_id TEXT NOT NULL, scope TEXT NOT NULL,
                        granted_at DOUBLE NOT NULL, PRIMARY KEY (subject, client_id))
                    """,
                    """
                    CREATE TABLE login_tokens (hash BLOB NOT NULL PRIMARY KEY, kind TEXT NOT NULL, grant_id TEXT NOT NULL,
                        client_id TEXT NOT NULL, subject TEXT NOT NULL, scope TEXT NOT NULL, session_id TEXT,
                        details TEXT NOT NULL, expires_at DOUBLE NOT NULL, used_at DOUBLE, revoked_at DOUBLE)
                    """,
                    "CREATE INDEX login_tokens_grant_id ON login_tokens (grant_id)",
                    "CREATE INDEX login_tokens_session_id ON login_tokens (session_id)",
                    "CREATE INDEX login_tokens_expires_at ON login_tokens (expires_at)",
                    """
                    CREATE TABLE login_logout_deliveries (id TEXT NOT NULL PRIMARY KEY, client_id TEXT NOT NULL,
                        uri TEXT NOT NULL, subject TEXT NOT NULL, session_id TEXT NOT NULL, attempts INTEGER NOT NULL,
                        next_attempt_at DOUBLE NOT NULL, created_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX login_logout_deliveries_next ON login_logout_deliveries (next_attempt_at)",
                    "CREATE TABLE login_secrets (name TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL)",
                ],
                postgres: [
                    "ALTER TABLE login_authorizations ADD COLUMN details TEXT",
                    "ALTER TABLE login_codes ADD COLUMN details TEXT",
                    """
                    CREATE TABLE login_signing_keys (kid TEXT NOT NULL PRIMARY KEY, algorithm TEXT NOT NULL,
                        generation BIGINT NOT NULL, private_pem TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
                        signs_from DOUBLE PRECISION, retired_at DOUBLE PRECISION, published_until DOUBLE PRECISION, UNIQUE (algorithm, generation))
                    """,
                    """
                    CREATE TABLE login_sessions (id TEXT NOT NULL PRIMARY KEY, cookie_hash BYTEA NOT NULL UNIQUE,
                        subject TEXT NOT NULL, auth_time DOUBLE PRECISION NOT NULL, amr TEXT NOT NULL, acr TEXT NOT NULL,
                        expires_at DOUBLE PRECISION NOT NULL, ended_at DOUBLE PRECISION)
                    """,
                    "CREATE INDEX login_sessions_expires_at ON login_sessions (expires_at)",
                    """
                    CREATE TABLE login_session_clients (session_id TEXT NOT NULL, client_id TEXT NOT NULL,
                        PRIMARY KEY (session_id, client_id))
                    """,
                    """
                    CREATE TABLE login_consents (subject TEXT NOT NULL, client_id TEXT NOT NULL, scope TEXT NOT NULL,
                        granted_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (subject, client_id))
                    """,
                    """
                    CREATE TABLE login_tokens (hash BYTEA NOT NULL PRIMARY KEY, kind TEXT NOT NULL, grant_id TEXT NOT NULL,
                        client_id TEXT NOT NULL, subject TEXT NOT NULL, scope TEXT NOT NULL, session_id TEXT,
                        details TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL, used_at DOUBLE PRECISION, revoked_at DOUBLE PRECISION)
                    """,
                    "CREATE INDEX login_tokens_grant_id ON login_tokens (grant_id)",
                    "CREATE INDEX login_tokens_session_id ON login_tokens (session_id)",
                    "CREATE INDEX login_tokens_expires_at ON login_tokens (expires_at)",
                    """
                    CREATE TABLE login_logout_deliveries (id TEXT NOT NULL PRIMARY KEY, client_id TEXT NOT NULL,
                        uri TEXT NOT NULL, subject TEXT NOT NULL, session_id TEXT NOT NULL, attempts BIGINT NOT NULL,
                        next_attempt_at DOUBLE PRECISION NOT NULL, created_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX login_logout_deliveries_next ON login_logout_deliveries (next_attempt_at)",
                    "CREATE TABLE login_secrets (name TEXT NOT NULL PRIMARY KEY, value BYTEA NOT NULL)",
                ]
            ),
            MigrationStep(
                "v3-federation-grants",
                sqlite: [
                    """
                    CREATE TABLE login_federation_requests (state_hash BLOB NOT NULL PRIMARY KEY,
                        browser_hash BLOB NOT NULL, authorization_id TEXT NOT NULL, provider TEXT NOT NULL,
                        request TEXT NOT NULL, expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX login_federation_requests_expires_at ON login_federation_requests (expires_at)",
                    """
                    CREATE TABLE login_federated_accounts (provider TEXT NOT NULL, upstream_subject TEXT NOT NULL,
                        subject TEXT NOT NULL, email TEXT, email_verified BOOLEAN NOT NULL, created_at DOUBLE NOT NULL,
                        last_seen_at DOUBLE NOT NULL,
                        PRIMARY KEY (provider, upstream_subject))
                    """,
                    "CREATE INDEX login_federated_accounts_subject ON login_federated_accounts (subject)",
                    """
                    CREATE TABLE login_grants (grant_id TEXT NOT NULL PRIMARY KEY, revoked_at DOUBLE,
                        expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX login_grants_expires_at ON login_grants (expires_at)",
                ],
                postgres: [
                    """
                    CREATE TABLE login_federation_requests (state_hash BYTEA NOT NULL PRIMARY KEY,
                        browser_hash BYTEA NOT NULL, authorization_id TEXT NOT NULL, provider TEXT NOT NULL,
                        request TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX login_federation_requests_expires_at ON login_federation_requests (expires_at)",
                    """
                    CREATE TABLE login_federated_accounts (provider TEXT NOT NULL, upstream_subject TEXT NOT NULL,
                        subject TEXT NOT NULL, email TEXT, email_verified BOOLEAN NOT NULL, created_at DOUBLE PRECISION NOT NULL,
                        last_seen_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (provider, upstream_subject))
                    """,
                    "CREATE INDEX login_federated_accounts_subject ON login_federated_accounts (subject)",
                    """
                    CREATE TABLE login_grants (grant_id TEXT NOT NULL PRIMARY KEY, revoked_at DOUBLE PRECISION,
                        expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX login_grants_expires_at ON login_grants (expires_at)",
                ]
            ),
            // Passwordless sign-in: the phone approval an authorization waits for, and passkeys
            // (a user's WebAuthn handle, credentials, and single-use challenges).
            MigrationStep(
                "v4-passwordless",
                sqlite: [
                    """
                    CREATE TABLE login_phone_signins (authorization_id TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL,
                        transaction_id TEXT NOT NULL, username TEXT, number INTEGER, expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX login_phone_signins_expires_at ON login_phone_signins (expires_at)",
                    """
                    CREATE TABLE login_push_waits (username TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL,
                        transaction_id TEXT NOT NULL, expires_at DOUBLE NOT NULL)
                    """,
                    """
                    CREATE TABLE login_user_handles (subject TEXT NOT NULL PRIMARY KEY, user_handle BLOB NOT NULL UNIQUE)
                    """,
                    """
                    CREATE TABLE login_passkeys (credential_id BLOB NOT NULL PRIMARY KEY, subject TEXT NOT NULL,
                        public_key BLOB NOT NULL, algorithm INTEGER NOT NULL, sign_count BIGINT NOT NULL,
                        backup_eligible BOOLEAN NOT NULL, backed_up BOOLEAN NOT NULL, transports TEXT NOT NULL,
                        aaguid BLOB NOT NULL, attestation_format TEXT NOT NULL, name TEXT NOT NULL,
                        created_at DOUBLE NOT NULL, last_used_at DOUBLE)
                    """,
                    "CREATE INDEX login_passkeys_subject ON login_passkeys (subject)",
                    """
                    CREATE TABLE login_webauthn_challenges (challenge BLOB NOT NULL PRIMARY KEY,
                        purpose TEXT NOT NULL, subject TEXT, authorization_id TEXT, expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX login_webauthn_challenges_expires_at ON login_webauthn_challenges (expires_at)",
                ],
                postgres: [
                    """
                    CREATE TABLE login_phone_signins (authorization_id TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL,
                        transaction_id TEXT NOT NULL, username TEXT, number BIGINT,
                        expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX login_phone_signins_expires_at ON login_phone_signins (expires_at)",
                    """
                    CREATE TABLE login_push_waits (username TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL,
                        transaction_id TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    """
                    CREATE TABLE login_user_handles (subject TEXT NOT NULL PRIMARY KEY, user_handle BYTEA NOT NULL UNIQUE)
                    """,
                    """
                    CREATE TABLE login_passkeys (credential_id BYTEA NOT NULL PRIMARY KEY, subject TEXT NOT NULL,
                        public_key BYTEA NOT NULL, algorithm BIGINT NOT NULL, sign_count BIGINT NOT NULL,
                        backup_eligible BOOLEAN NOT NULL, backed_up BOOLEAN NOT NULL, transports TEXT NOT NULL,
                        aaguid BYTEA NOT NULL, attestation_format TEXT NOT NULL, name TEXT NOT NULL,
                        created_at DOUBLE PRECISION NOT NULL, last_used_at DOUBLE PRECISION)
                    """,
                    "CREATE INDEX login_passkeys_subject ON login_passkeys (subject)",
                    """
                    CREATE TABLE login_webauthn_challenges (challenge BYTEA NOT NULL PRIMARY KEY,
                        purpose TEXT NOT NULL, subject TEXT, authorization_id TEXT,
                        expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX login_webauthn_challenges_expires_at ON login_webauthn_challenges (expires_at)",
                ]
            ),
        ]
    )
}
