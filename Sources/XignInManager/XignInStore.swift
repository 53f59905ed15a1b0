import Foundation
import GatehouseServer

/// The XignIn manager's state, in the token server's database (``ServerStorage``): accounts, their
/// activation codes and the PIN evaluations in between. The one owner of these tables and of
/// every change: each change is a named method that runs one transaction, keeps its invariants
/// and returns what happened; the endpoints turn outcomes into HTTP. Dates are seconds since
/// 1970; activation codes are kept only as SHA-256 hashes.
///
/// Several instances may share the database (PostgreSQL at READ COMMITTED): a single-use row is
/// claimed by the statement that deletes or changes it on a condition, never by a read before it,
/// and a decision on a row read earlier is taken with that row locked.
final class XignInStore: Sendable {
    let storage: ServerStorage

    /// Seconds a registration's PIN evaluation stays usable.
    static let pinKeyLifetime = 600.0
    /// Seconds an activation attempt (the evaluation of the PIN for a code) stays usable.
    static let activationAttemptLifetime = 300.0
    /// Lapsed rows one change takes away with it, so no change grows with a backlog.
    static let sweepBatch = 100

    /// The store on `storage`, which must have been opened with ``migrations``.
    init(storage: ServerStorage) throws {
        try storage.requireMigrated(Self.migrations)
        self.storage = storage
    }

    /// Deletes up to ``sweepBatch`` rows of `table` that lapsed before `now`. On PostgreSQL rows
    /// another change is deleting are skipped rather than waited for, so changes running at once
    /// do not queue behind each other over the same lapsed rows.
    static func sweep(_ table: String, now: Double, _ db: any SQLSession) throws {
        let row = db.dialect.rowIdentifier
        try db.execute(
            sql: """
                DELETE FROM \(table) WHERE \(row) IN
                (SELECT \(row) FROM \(table) WHERE expires_at < ? LIMIT ? \(db.dialect.claimingRows))
                """,
            arguments: [now, sweepBatch]
        )
    }

    // MARK: - PIN evaluations

    /// Keeps a registration's fresh OPRF key under `token` until the registration claims it;
    /// lapsed ones go as new ones come.
    func keepPinKey(_ key: Data, token: String, now: Double) async throws {
        try await storage.write { db in
            try Self.sweep("xignin_pin_keys", now: now, db)
            try db.execute(
                sql: "INSERT INTO xignin_pin_keys (token, oprf_key, expires_at) VALUES (?, ?, ?)",
                arguments: [token, key, now + Self.pinKeyLifetime]
            )
        }
    }

    /// What an activation code allows before its PIN is evaluated.
    enum ActivationKeyLookup: Sendable, Equatable {
        /// The account's OPRF key, to evaluate the PIN with.
        case key(Data)
        /// No such code, or it was used or lapsed.
        case invalid
        /// Too many PINs were evaluated for it.
        case locked
    }

    /// The OPRF key of the account `codeHash` activates; counts nothing.
    func activationKey(codeHash: Data, maximumAttempts: Int, now: Double) async throws -> ActivationKeyLookup {
        try await storage.read { db in
            guard
                let row = try SQLRow.fetchOne(
                    db,
                    sql: """
                        SELECT xignin_accounts.oprf_key, xignin_activation_codes.attempts FROM xignin_activation_codes
                        JOIN xignin_accounts ON xignin_accounts.id = xignin_activation_codes.account_id
                        WHERE code_hash = ? AND used = FALSE AND xignin_activation_codes.expires_at > ?
                        """,
                    arguments: [codeHash, now]
                )
            else { return .invalid }
            guard (row["attempts"] as Int) < maximumAttempts else { return .locked }
            return .key(row["oprf_key"])
        }
    }

    /// Counts one evaluation of a PIN for `codeHash` and keeps `nonce` under `token` for the
    /// activation that follows. False, counting nothing, when the code has no attempt left or
    /// was used meanwhile: the count is raised by the statement that checks it (on PostgreSQL a
    /// second such statement waits for the first and checks the count it left), so callers at
    /// once, on any instance, never get more than `maximumAttempts` between them.
    func reserveActivationAttempt(
        codeHash: Data,
        maximumAttempts: Int,
        token: String,
        nonce: Data,
        now: Double
    ) async throws -> Bool {
        try await storage.write { db in
            try db.execute(
                sql: """
                    UPDATE xignin_activation_codes SET attempts = attempts + 1
                    WHERE code_hash = ? AND attempts < ? AND used = FALSE
                    """,
                arguments: [codeHash, maximumAttempts]
            )
            guard db.changesCount == 1 else { return false }
            try Self.sweep("xignin_activation_attempts", now: now, db)
            try db.execute(
                sql: """
                    INSERT INTO xignin_activation_attempts (token, code_hash, nonce, expires_at) VALUES (?, ?, ?, ?)
                    """,
                arguments: [token, codeHash, nonce, now + Self.activationAttemptLifetime]
            )
            return true
        }
    }
}
