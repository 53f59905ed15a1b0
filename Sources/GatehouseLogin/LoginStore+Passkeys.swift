public import Foundation
import GatehouseKernel
import GatehouseProtocol
public import GatehouseServer

// Passkeys: each user's WebAuthn user handle (random, so it reveals nothing), their credentials
// with the signature counter and backup flags, and single-use challenges.

extension LoginStore {
    /// A passkey as the store keeps it.
    public struct Passkey: Sendable, Equatable {
        /// The credential id.
        public var credentialID: Data
        /// The user (a directory username).
        public var subject: String
        /// The COSE public key.
        public var publicKey: Data
        /// The COSE algorithm (-7 ES256, -8 EdDSA, -257 RS256).
        public var algorithm: Int
        /// The last signature counter seen (0: the authenticator keeps none).
        public var signCount: Int64
        /// Whether it may be synced to the user's other devices (BE); fixed at registration.
        public var backupEligible: Bool
        /// Whether it is backed up (BS), as last seen.
        public var backedUp: Bool
        /// The transports the browser reported, space-separated.
        public var transports: String
        /// The authenticator model (16 bytes; zeros when hidden).
        public var aaguid: Data
        /// `none` or `packed`.
        public var attestationFormat: String
        /// The user's name for it.
        public var name: String
        /// When it was registered, and last used (seconds since 1970).
        public var createdAt: Double
        /// When it last signed the user in.
        public var lastUsedAt: Double?
    }

    /// The user's WebAuthn user handle, made on first use.
    public func userHandle(for subject: String) async throws -> Data {
        try await storage.write { db in
            if let known = try Data.fetchOne(
                db,
                sql: "SELECT user_handle FROM login_user_handles WHERE subject = ?",
                arguments: [subject]
            ) {
                return known
            }
            let handle = Data.random(count: 32)
            try db.execute(
                sql: "INSERT INTO login_user_handles (subject, user_handle) VALUES (?, ?)",
                arguments: [subject, handle]
            )
            return handle
        }
    }

    /// The user's handle if they have one.
    public func existingUserHandle(for subject: String) async throws -> Data? {
        try await storage.read { db in
            try Data.fetchOne(
                db,
                sql: "SELECT user_handle FROM login_user_handles WHERE subject = ?",
                arguments: [subject]
            )
        }
    }

    /// Keeps a challenge for one ceremony: `signin` for an authorization, `register` for a user.
    public func keepChallenge(
        _ challenge: Data,
        purpose: String,
        subject: String?,
        authorization: String?,
        expiresAt: Double,
        now: Double
    ) async throws {
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_webauthn_challenges WHERE expires_at < ?", arguments: [now])
            try db.execute(
                sql: """
                    INSERT INTO login_webauthn_challenges (challenge, purpose, subject, authorization_id, expires_at)
                    VALUES (?, ?, ?, ?, ?)
                    """,
                // Empty rather than NULL, so the lookup compares with `=` on both databases.
                arguments: [challenge, purpose, subject ?? "", authorization ?? "", expiresAt]
            )
        }
    }

    /// Takes (deletes and returns) the challenges still open for the ceremony: each is checked
    /// once, so a replayed response finds none.
    public func takeChallenges(
        purpose: String,
        subject: String?,
        authorization: String?,
        now: Double
    ) async throws
        -> [Data]
    {
        try await storage.write { db in
            try SQLRow.fetchAll(
                db,
                sql: """
                    DELETE FROM login_webauthn_challenges WHERE purpose = ? AND subject = ? AND authorization_id = ?
                    RETURNING challenge, expires_at
                    """,
                arguments: [purpose, subject ?? "", authorization ?? ""]
            )
            // Expired ones are taken too, and so forgotten, but count for nothing.
            .filter { ($0["expires_at"] as Double) > now }
            .map { $0["challenge"] }
        }
    }

    /// Adds a passkey, in the transaction that also runs `alongside` (its audit event); false
    /// when the credential id is registered already (to anyone).
    public func addPasskey(
        _ passkey: Passkey,
        alongside: @escaping @Sendable (any SQLSession) throws -> Void = { _ in }
    ) async throws -> Bool {
        try await storage.write { db in
            guard
                try Int.fetchOne(
                    db,
                    sql: "SELECT 1 FROM login_passkeys WHERE credential_id = ?",
                    arguments: [passkey.credentialID]
                ) == nil
            else { return false }
            try db.execute(
                sql: """
                    INSERT INTO login_passkeys (credential_id, subject, public_key, algorithm, sign_count,
                        backup_eligible, backed_up, transports, aaguid, attestation_format, name, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    passkey.credentialID, passkey.subject, passkey.publicKey, passkey.algorithm, passkey.signCount,
                    passkey.backupEligible, passkey.backedUp, passkey.transports, passkey.aaguid,
                    passkey.attestationFormat, passkey.name, passkey.createdAt,
                ]
            )
            try alongside(db)
            return true
        }
    }

    /// The passkey with this credential id.
    public func passkey(_ credentialID: Data) async throws -> Passkey? {
        try await storage.read { db in
            try SQLRow.fetchOne(
                db,
                sql: "SELECT * FROM login_passkeys WHERE credential_id = ?",
                arguments: [credentialID]
            ).map(Self.passkey)
        }
    }

    /// The user's passkeys, oldest first.
    public func passkeys(of subject: String) async throws -> [Passkey] {
        try await storage.read { db in
            try SQLRow.fetchAll(
                db,
                sql: "SELECT * FROM login_passkeys WHERE subject = ? ORDER BY created_at",
                arguments: [subject]
            ).map(Self.passkey)
        }
    }

    /// Records a sign-in: the new counter and backup state. Only when the stored counter is still
    /// `previous`, so two sign-ins racing with one assertion's counter cannot both pass; false
    /// when another got there first.
    public func passkeyUsed(
        _ credentialID: Data,
        previous: Int64,
        signCount: Int64,
        backedUp: Bool,
        now: Double
    ) async throws -> Bool {
        try await storage.write { db in
            try db.execute(
                sql: """
                    UPDATE login_passkeys SET sign_count = ?, backed_up = ?, last_used_at = ?
                    WHERE credential_id = ? AND sign_count = ?
                    """,
                arguments: [signCount, backedUp, now, credentialID, previous]
            )
            return db.changesCount == 1
        }
    }

    /// Removes one of the user's passkeys, in the transaction that also runs `alongside` (its
    /// audit event, with the passkey's name); false when they have no such passkey.
    public func removePasskey(
        _ credentialID: Data,
        of subject: String,
        alongside: @escaping @Sendable (_ name: String, any SQLSession) throws -> Void = { _, _ in }
    ) async throws -> Bool {
        try await storage.write { db in
            let name = try String.fetchOne(
                db,
                sql: "SELECT name FROM login_passkeys WHERE credential_id = ? AND subject = ?",
                arguments: [credentialID, subject]
            )
            try db.execute(
                sql: "DELETE FROM login_passkeys WHERE credential_id = ? AND subject = ?",
                arguments: [credentialID, subject]
            )
            guard db.changesCount == 1 else { return false }
            try alongside(name ?? "", db)
            return true
        }
    }

    private static func passkey(_ row: SQLRow) -> Passkey {
        Passkey(
            credentialID: row["credential_id"],
            subject: row["subject"],
            publicKey: row["public_key"],
            algorithm: row["algorithm"],
            signCount: row["sign_count"],
            backupEligible: row["backup_eligible"],
            backedUp: row["backed_up"],
            transports: row["transports"],
            aaguid: row["aaguid"],
            attestationFormat: row["attestation_format"],
            name: row["name"],
            createdAt: row["created_at"],
            lastUsedAt: row["last_used_at"]
        )
    }
}
