import Foundation
import GatehouseKernel
import GatehouseProtocol

// Mobile authentication, what push delivery asks of the store: whether a push is still worth
// another try, and the disenrolment of a device whose push token the push service calls dead.

extension ServerStore {
    /// Whether a push about `transactionID` to `profileID` is still worth sending to `pushToken`:
    /// the transaction is pending and not expired, and the device is enrolled with that token
    /// still (not disenrolled, not moved to a new token).
    func pushStillWanted(
        _ transactionID: String,
        profileID: String,
        pushToken: String,
        now: Double
    ) async throws -> Bool {
        try await lookup { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT 1 FROM mobile_deliveries d
                    JOIN mobile_transactions t ON t.id = d.transaction_id
                    JOIN mobile_enrolments e ON e.profile_id = d.profile_id
                    WHERE d.transaction_id = ? AND d.profile_id = ? AND t.status = 'pending' AND t.expires_at > ?
                    AND NOT e.disenrolled AND e.push_token = ?
                    """,
                arguments: [transactionID, profileID, now, pushToken]
            ) != nil
        }
    }

    /// Disenrols `profileID` because its push service called `pushToken` dead (`answer`: what the
    /// service said), as an `override` enrolment or an admin disenrols a device
    /// (``disenrolDevice(_:now:_:)``), and records it in the audit trail as the server's doing.
    /// Nothing changes when the device has moved to another token meanwhile, or is disenrolled
    /// already. Returns whether it disenrolled the device.
    func disenrolDeadPushToken(
        _ profileID: String,
        pushToken: String,
        platform: PushPlatform,
        answer: String,
        now: Double
    ) async throws -> Bool {
        try await write { db in
            guard
                try Int.fetchOne(
                    db,
                    sql: """
                        SELECT 1 FROM mobile_enrolments WHERE profile_id = ? AND push_token = ? AND NOT disenrolled
                        \(db.dialect.lockingRows)
                        """,
                    arguments: [profileID, pushToken]
                ) != nil, try self.disenrolDevice(profileID, now: now, db)
            else { return false }
            try self.auditProfileEvent(
                .deviceDisenrolled,
                profileID,
                actor: .server,
                detail: ["reason": "push_token_dead", "platform": platform.rawValue, "answer": answer],
                now: now,
                db
            )
            return true
        }
    }
}
