import Foundation

extension ServerStore {
    /// Callbacks in the outbox waiting to be made: their transactions ended and the portal has not
    /// had them yet (due now or after a failed try). For the metrics: one count on an index.
    func callbacksWaiting() async throws -> Int {
        try await lookup { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM mobile_transactions WHERE callback_state = 'due'") ?? 0
        }
    }
}
