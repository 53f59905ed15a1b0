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
        guard var transaction = try self.transaction(id, db) else {
            throw StoreRefusal.conflict(MobileAuthRequestError(.alreadyHandled))
        }
        let method = flow.state.plan.stages.first.map(\.plugin)
        try carryOut(transaction.flowApproved(method: method, by: flow.profileID, at: now), transaction: id, db)
    }

    /// A flow for a transaction ended without approving it.
    func flowEndedWithoutApproval(_ flow: FlowRow, refused: Bool, now: Double, _ db: any SQLSession) throws {
        guard let id = flow.transactionID, var transaction = try self.transaction(id, db) else { return }
        let actions = transaction.flowEndedUnapproved(refused: refused, by: flow.profileID, at: now)
        try carryOut(actions, transaction: id, db)
    }

    /// Ends the pending transactions `profileID` was asked about that no other device can still answer.
    func endTransactions(
        askedOf profileID: String,
        _ loss: MobileAuthTransaction.DeviceLoss,
        now: Double,
        _ db: any SQLSession
    ) throws {
        let rows = try SQLRow.fetchAll(
            db,
            sql: """
                SELECT t.* FROM mobile_transactions t JOIN mobile_deliveries d ON d.transaction_id = t.id
                WHERE d.profile_id = ? AND t.status = 'pending'
                AND NOT EXISTS (SELECT 1 FROM mobile_deliveries o JOIN mobile_enrolments e ON e.profile_id = o.profile_id
                    WHERE o.transaction_id = t.id AND o.profile_id != ? AND NOT e.disenrolled)
                """,
            arguments: [profileID, profileID]
        )
        for row in rows {
            var transaction = try self.transaction(row)
            try carryOut(transaction.devicesGone(loss, at: now), transaction: row["id"], db)
        }
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
            // The machine's view of it now: a lapsed transaction the sweep has not reached reads as expired.
            let reported = try self.transaction(row).reported(at: now)
            let subject: String = row["subject"]
            return PortalTransactionResult(
                transactionID: id,
                // An OTP transaction nobody has claimed has no user yet.
                userID: subject.isEmpty ? nil : subject,
                identityProvider: subject.isEmpty ? nil : row["identity_provider"],
                type: row["type"],
                status: reported.status,
                authenticationMethod: row["authentication_method"],
                reason: reported.reason,
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
    /// Callbacks one claim takes at most.
    static let callbacksClaimedAtOnce = 64

    /// Marks lapsed pending transactions expired, then claims and returns the callbacks due by `now`.
    /// A claim counts as a try, so a callback whose sending never reports back (the process died or
    /// hung) is tried at most `maxAttempts` times in all; one that has had them is failed instead.
    func dueCallbacks(now: Double, maxAttempts: Int) async throws -> [DueCallback] {
        try await write { db in
            let lapsed = try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT id, \(Self.transactionColumns) FROM mobile_transactions
                    WHERE status = 'pending' AND expires_at <= ?
                    """,
                arguments: [now]
            )
            for row in lapsed {
                var transaction = try self.transaction(row)
                try self.carryOut(transaction.expire(at: now), transaction: row["id"], db)
            }
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
            // that looks now passes over the rows this claim holds (`claimingRows`) and finds them
            // not due once it commits (the condition is checked again on the row it would claim),
            // so each callback is sent by one instance, and claims at once never wait on each other.
            // One that dies while sending leaves it due again when the claim lapses, one try spent.
            // A claim never takes a callback whose tries are used up, even one that became due
            // after the statement above looked (on PostgreSQL each statement sees what committed
            // before it): the next look fails it.
            return try SQLRow.fetchAll(
                db,
                sql: """
                    UPDATE mobile_transactions SET callback_next_at = ?, callback_attempts = callback_attempts + 1
                    WHERE id IN (
                        SELECT id FROM mobile_transactions
                        WHERE callback_state = 'due' AND callback_next_at <= ? AND callback_attempts < ?
                        ORDER BY callback_next_at LIMIT \(Self.callbacksClaimedAtOnce) \(db.dialect.claimingRows))
                    AND callback_state = 'due' AND callback_next_at <= ? AND callback_attempts < ?
                    RETURNING id, api_client, callback_uri, status, callback_attempts
                    """,
                arguments: [now + Self.callbackClaimLifetime, now, maxAttempts, now, maxAttempts]
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
