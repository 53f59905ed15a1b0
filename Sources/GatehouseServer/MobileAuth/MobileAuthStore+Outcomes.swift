import Foundation
import GatehouseKernel
import GatehouseProtocol

// Mobile authentication's outcomes: ending transactions (by an answer, a flow, expiry, a newer
// request, a deregistration), the portal's reads, and the callback outbox.

extension ServerStore {
    // MARK: - Ending transactions

    /// Approves the flow's transaction; refused when it ended meanwhile (answered on another
    /// device, superseded, expired).
    func approveTransaction(for flow: FlowRow, now: Double, _ db: any SQLSession) throws {
        guard let id = flow.transactionID else { return }
        let open = try Bool.fetchOne(
            db,
            sql: "SELECT 1 FROM mobile_transactions WHERE id = ? AND status = 'pending' AND expires_at > ?",
            arguments: [id, now]
        )
        guard open == true else { throw StoreRefusal.conflict(MobileAuthRequestError(.alreadyHandled)) }
        let method = flow.state.plan.stages.first.map(\.plugin)
        // Ended by another device's answer (or superseded) since the check: not approved here.
        guard try end(id, status: .approved, reason: nil, now: now, by: flow.profileID, db) else {
            throw StoreRefusal.conflict(MobileAuthRequestError(.alreadyHandled))
        }
        try db.execute(
            sql: "UPDATE mobile_transactions SET authentication_method = ? WHERE id = ?",
            arguments: [method, id]
        )
    }

    /// A flow for a transaction ended without approving it.
    func flowEndedWithoutApproval(_ flow: FlowRow, refused: Bool, now: Double, _ db: any SQLSession) throws {
        guard let id = flow.transactionID else { return }
        try end(
            id,
            status: .denied,
            reason: refused ? "invalid_answer" : "not_accepted",
            now: now,
            by: flow.profileID,
            db
        )
    }

    /// Ends the pending transactions `profileID` was asked about that no other device can still answer.
    func endTransactions(askedOf profileID: String, reason: String, now: Double, _ db: any SQLSession) throws {
        let ids = try String.fetchAll(
            db,
            sql: """
                SELECT t.id FROM mobile_transactions t JOIN mobile_deliveries d ON d.transaction_id = t.id
                WHERE d.profile_id = ? AND t.status = 'pending'
                AND NOT EXISTS (SELECT 1 FROM mobile_deliveries o JOIN mobile_enrolments e ON e.profile_id = o.profile_id
                    WHERE o.transaction_id = t.id AND o.profile_id != ? AND NOT e.disenrolled)
                """,
            arguments: [profileID, profileID]
        )
        for id in ids { try end(id, status: .denied, reason: reason, now: now, db) }
    }

    /// Ends a pending transaction and, when it has a callback, puts the callback in the outbox. The
    /// sealed payloads go: nobody may read them any more, and a key that leaks later opens nothing.
    /// False when it was no longer pending (another change ended it first).
    @discardableResult
    func end(
        _ id: String,
        status: MobileAuthTransactionStatus,
        reason: String?,
        now: Double,
        by profileID: String? = nil,
        _ db: any SQLSession
    ) throws -> Bool {
        try db.execute(
            sql: """
                UPDATE mobile_transactions SET status = ?, reason = ?, answered_at = ?, answered_by = ?,
                    callback_state = CASE WHEN callback_uri IS NULL THEN 'none' ELSE 'due' END, callback_next_at = ?
                WHERE id = ? AND status = 'pending'
                """,
            arguments: [status.rawValue, reason, now, profileID, now, id]
        )
        guard db.changesCount == 1 else { return false }
        try db.execute(
            sql: "UPDATE mobile_deliveries SET sealed = ? WHERE transaction_id = ?",
            arguments: [Data(), id]
        )
        return true
    }

    // MARK: - The portal's side

    func transactionResult(_ id: String, apiClient: String, now: Double) async throws -> PortalTransactionResult? {
        try await lookup { db in
            guard
                let row = try SQLRow.fetchOne(
                    db,
                    sql: "SELECT * FROM mobile_transactions WHERE id = ? AND api_client = ?",
                    arguments: [id, apiClient]
                )
            else { return nil }
            var status = MobileAuthTransactionStatus(rawValue: row["status"]) ?? .pending
            var reason: String? = row["reason"]
            if status == .pending, (row["expires_at"] as Double) <= now { (status, reason) = (.expired, "expired") }
            return PortalTransactionResult(
                transactionID: id,
                userID: row["subject"],
                type: row["type"],
                status: status,
                authenticationMethod: row["authentication_method"],
                reason: reason,
                createdAt: row["created_at"],
                answeredAt: row["answered_at"],
                signature: row["signature"],
                userPublicKey: (row["user_public_key"] as String?).flatMap {
                    try? WireCoding.decode(PublicJWK.self, from: Data($0.utf8))
                },
                signatureVerified: row["signature_verified"]
            )
        }
    }

    /// Seconds an ended transaction stays readable by its portal.
    static let endedTransactionLifetime = 30.0 * 24 * 3600

    /// A callback to make.
    struct DueCallback: Sendable {
        var transactionID: String
        var apiClient: String
        var uri: String
        var status: MobileAuthTransactionStatus
        /// Tries so far, this one included: it was counted when it was claimed.
        var attempts: Int
    }

    /// Seconds a callback stays claimed by the instance sending it (a send gives up after 5).
    static let callbackClaimLifetime = 30.0

    /// Marks lapsed pending transactions expired, then claims and returns the callbacks due by `now`.
    /// A claim counts as a try, so a callback whose sending never reports back (the process died or
    /// hung) is tried at most `maxAttempts` times in all; one that has had them is failed instead.
    func dueCallbacks(now: Double, maxAttempts: Int) async throws -> [DueCallback] {
        try await write { db in
            let lapsed = try String.fetchAll(
                db,
                sql: "SELECT id FROM mobile_transactions WHERE status = 'pending' AND expires_at <= ?",
                arguments: [now]
            )
            for id in lapsed { try self.end(id, status: .expired, reason: "expired", now: now, db) }
            // Ended transactions are kept 30 days for the portal to read, then forgotten.
            try db.execute(
                sql: """
                    DELETE FROM mobile_transactions
                    WHERE status != 'pending' AND answered_at < ? AND callback_state != 'due'
                    """,
                arguments: [now - Self.endedTransactionLifetime]
            )
            // Tries used up by claims that never reported back: given up, not sent again.
            try db.execute(
                sql: """
                    UPDATE mobile_transactions SET callback_state = 'failed', callback_next_at = NULL
                    WHERE callback_state = 'due' AND callback_next_at <= ? AND callback_attempts >= ?
                    """,
                arguments: [now, maxAttempts]
            )
            // Claimed for a while as they are read, and counted: an instance sharing the database
            // that looks now finds them not due (the condition is checked again on the row it would
            // claim, after any claim committed meanwhile), so each callback is sent by one instance.
            // One that dies while sending leaves it due again when the claim lapses, one try spent.
            return try SQLRow.fetchAll(
                db,
                sql: """
                    UPDATE mobile_transactions SET callback_next_at = ?, callback_attempts = callback_attempts + 1
                    WHERE id IN (
                        SELECT id FROM mobile_transactions WHERE callback_state = 'due' AND callback_next_at <= ?
                        ORDER BY callback_next_at LIMIT 64)
                    AND callback_state = 'due' AND callback_next_at <= ?
                    RETURNING id, api_client, callback_uri, status, callback_attempts
                    """,
                arguments: [now + Self.callbackClaimLifetime, now, now]
            )
            .map {
                DueCallback(
                    transactionID: $0["id"],
                    apiClient: $0["api_client"],
                    uri: $0["callback_uri"],
                    status: MobileAuthTransactionStatus(rawValue: $0["status"]) ?? .pending,
                    attempts: $0["callback_attempts"]
                )
            }
        }
    }

    /// Records how a claimed try ended: sent, or due again after `retryAt` (nil: given up). The try
    /// itself was counted by the claim.
    func callbackTried(_ id: String, delivered: Bool, retryAt: Double?) async throws {
        try await write { db in
            let state = delivered ? "sent" : (retryAt == nil ? "failed" : "due")
            try db.execute(
                sql: "UPDATE mobile_transactions SET callback_state = ?, callback_next_at = ? WHERE id = ?",
                arguments: [state, retryAt, id]
            )
        }
    }

    /// The earliest moment a callback is due or a pending transaction lapses, if any.
    func nextCallbackWork() async throws -> Double? {
        try await lookup { db in
            try Double.fetchOne(
                db,
                sql: """
                    SELECT MIN(t) FROM (
                        SELECT MIN(callback_next_at) AS t FROM mobile_transactions WHERE callback_state = 'due'
                        UNION ALL SELECT MIN(expires_at) FROM mobile_transactions
                            WHERE status = 'pending' AND callback_uri IS NOT NULL) AS work
                    """
            )
        }
    }
}
