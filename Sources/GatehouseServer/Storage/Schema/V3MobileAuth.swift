import GRDB

extension SchemaMigration {
    /// Mobile authentication: enrolments, transactions and their deliveries.
    static let mobileAuth = SchemaMigration(
        "v3-mobile-auth",
        sqlite: { db in
            // A profile's mobile-auth enrolment: the device's HPKE key, the server's own for this
            // enrolment, and where its pushes go. A disenrolled row stays so its device learns why.
            try db.create(table: "mobile_enrolments") { table in
                table.primaryKey("profile_id", .text).references("profiles", onDelete: .cascade)
                // The user as the portal names them: a subject is unique per identity provider only.
                table.column("identity_provider", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("device_key", .blob).notNull()
                table.column("server_key", .blob).notNull()
                table.column("push_token", .text).unique()
                table.column("platform", .text)
                table.column("disenrolled", .boolean).notNull().defaults(to: false)
                table.column("created_at", .double).notNull()
            }
            try db.create(
                index: "mobile_enrolments_user",
                on: "mobile_enrolments",
                columns: ["identity_provider", "subject"]
            )
            // What the portal asked and what became of it. The secure message and the signing
            // data are never here: they live only inside each delivery's sealed payload.
            try db.create(table: "mobile_transactions") { table in
                table.primaryKey("id", .text)
                table.column("api_client", .text).notNull()
                table.column("identity_provider", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("type", .text).notNull()
                table.column("method", .text).notNull()
                table.column("message", .text).notNull()
                table.column("number", .integer)
                table.column("signing_data_hash", .blob)
                table.column("callback_uri", .text)
                // An outbox: `due` once the transaction ends with a callback to make, then `sent`
                // or `failed`; a restarted server picks up what is still due.
                table.column("callback_state", .text).notNull().defaults(to: "none").indexed()
                table.column("callback_attempts", .integer).notNull().defaults(to: 0)
                table.column("callback_next_at", .double)
                table.column("status", .text).notNull()
                table.column("reason", .text)
                table.column("answered_by", .text)
                table.column("authentication_method", .text)
                table.column("signature", .blob)
                table.column("user_public_key", .text)
                table.column("signature_verified", .boolean)
                table.column("created_at", .double).notNull()
                table.column("expires_at", .double).notNull()
                table.column("answered_at", .double)
            }
            try db.create(
                index: "mobile_transactions_user",
                on: "mobile_transactions",
                columns: ["identity_provider", "subject", "type"]
            )
            // The outbox's sweeps: lapsed pending transactions, and ended ones past their keeping.
            try db.create(
                index: "mobile_transactions_expiry",
                on: "mobile_transactions",
                columns: ["status", "expires_at"]
            )
            try db.create(index: "mobile_transactions_answered", on: "mobile_transactions", columns: ["answered_at"])
            // One sealed payload per asked device; `seq` orders the event channel.
            try db.create(table: "mobile_deliveries") { table in
                table.autoIncrementedPrimaryKey("seq")
                table.column("transaction_id", .text).notNull().references("mobile_transactions", onDelete: .cascade)
                table.column("profile_id", .text).notNull().indexed()
                table.column("sealed", .blob).notNull()
                table.column("nonce_hash", .blob).notNull()
                table.uniqueKey(["transaction_id", "profile_id"])
            }
            try db.alter(table: "flows") { table in table.add(column: "transaction_id", .text) }
        },
        postgres: [
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
    )
}
