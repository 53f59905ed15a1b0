import Foundation
import GatehouseKernel
import GatehouseProtocol
import GatehouseServer

// The phone approval a sign-in page waits for: its mobile authentication transaction (or a
// decoy, for a username without an enrolled phone), kept with the page's authorization.

extension LoginStore {
    /// What a sign-in page waits for.
    public struct PhoneSignInRecord: Sendable, Equatable {
        /// `push`, `qr`, or `decoy`: a push that was never sent (no such user, or no phone), so
        /// the page looks the same whether or not the user exists.
        public var kind: String
        /// The mobile authentication transaction (random for a decoy).
        public var transactionID: String
        /// The username the push went to (pushes and decoys).
        public var username: String?
        /// The number the page shows (pushes and decoys).
        public var number: Int?
        /// When the phone can no longer answer.
        public var expiresAt: Double
    }

    /// Keeps what authorization `id` waits for; a new one replaces the page's earlier one.
    public func startPhoneSignIn(_ record: PhoneSignInRecord, authorization id: String, now: Double) async throws {
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_phone_signins WHERE expires_at < ?", arguments: [now - 3600])
            try db.execute(sql: "DELETE FROM login_phone_signins WHERE authorization_id = ?", arguments: [id])
            try db.execute(
                sql: """
                    INSERT INTO login_phone_signins (authorization_id, kind, transaction_id, username, number, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [id, record.kind, record.transactionID, record.username, record.number, record.expiresAt]
            )
        }
    }

    /// What authorization `id` waits for, if anything.
    public func phoneSignIn(authorization id: String) async throws -> PhoneSignInRecord? {
        try await storage.read { db in
            try SQLRow.fetchOne(
                db,
                sql: "SELECT * FROM login_phone_signins WHERE authorization_id = ?",
                arguments: [id]
            ).map(Self.record)
        }
    }

    /// Takes (deletes and returns) what authorization `id` waits for: one completion per approval,
    /// however many requests race.
    public func takePhoneSignIn(authorization id: String) async throws -> PhoneSignInRecord? {
        try await storage.write { db in
            try SQLRow.fetchOne(
                db,
                sql: "DELETE FROM login_phone_signins WHERE authorization_id = ? RETURNING *",
                arguments: [id]
            ).map(Self.record)
        }
    }

    /// The push (or decoy) still waiting for `username`, from any page: kept apart from the
    /// pages, so what a page does next (a QR code, another push) cannot make a decoy's wait end
    /// sooner than a real one's.
    public func waitingPush(username: String, now: Double) async throws -> PhoneSignInRecord? {
        try await storage.read { db in
            try SQLRow.fetchOne(
                db,
                sql: "SELECT * FROM login_push_waits WHERE username = ? AND expires_at > ?",
                arguments: [username, now]
            ).map { row in
                PhoneSignInRecord(
                    kind: row["kind"],
                    transactionID: row["transaction_id"],
                    username: username,
                    number: nil,
                    expiresAt: row["expires_at"]
                )
            }
        }
    }

    /// Records the push (or decoy) now waiting for `username`. A push replaces what was there
    /// (the token server let it go, so nothing waits); a decoy is recorded only while no decoy
    /// waits, so of concurrent decoys for one username one wins, as of concurrent pushes one goes
    /// out. False when the decoy was refused.
    @discardableResult
    public func pushWaits(_ record: PhoneSignInRecord, username: String, now: Double) async throws -> Bool {
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_push_waits WHERE expires_at < ?", arguments: [now])
            return try String.fetchOne(
                db,
                sql: """
                    INSERT INTO login_push_waits (username, kind, transaction_id, expires_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (username) DO UPDATE SET kind = excluded.kind,
                        transaction_id = excluded.transaction_id, expires_at = excluded.expires_at
                    WHERE excluded.kind <> 'decoy' OR login_push_waits.kind <> 'decoy'
                        OR login_push_waits.expires_at <= ?
                    RETURNING username
                    """,
                arguments: [username, record.kind, record.transactionID, record.expiresAt, now]
            ) != nil
        }
    }

    private static func record(_ row: SQLRow) -> PhoneSignInRecord {
        PhoneSignInRecord(
            kind: row["kind"],
            transactionID: row["transaction_id"],
            username: row["username"],
            number: row["number"],
            expiresAt: row["expires_at"]
        )
    }
}
