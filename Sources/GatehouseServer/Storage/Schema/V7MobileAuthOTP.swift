import GRDB

extension SchemaMigration {
    /// OTP mobile authentication: a transaction the device that scans its code answers.
    static let mobileAuthOTP = SchemaMigration(
        "v7-mobile-auth-otp",
        sqlite: { db in
            try db.alter(table: "mobile_transactions") { table in
                // `push` or `otp`; an OTP transaction started without a user has an empty
                // identity provider and subject until a device claims it.
                table.add(column: "delivery", .text).notNull().defaults(to: "push")
                // SHA-256 of the single-use code; the claim is the transaction's one delivery.
                table.add(column: "otp_hash", .blob)
                // The secure message and signing data until a device claims the code, encrypted
                // with a key derived from the code, which the server does not keep.
                table.add(column: "otp_content", .blob)
            }
        },
        postgres: [
            "ALTER TABLE mobile_transactions ADD COLUMN delivery TEXT NOT NULL DEFAULT 'push'",
            "ALTER TABLE mobile_transactions ADD COLUMN otp_hash BYTEA",
            "ALTER TABLE mobile_transactions ADD COLUMN otp_content BYTEA",
        ]
    )
}
