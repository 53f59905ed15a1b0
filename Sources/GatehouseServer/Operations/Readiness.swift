import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

// `/ready`: whether the database answers in time.

extension TokenServer {
    /// How long `/ready` waits for the database: a probe must get its answer before the
    /// orchestrator's own timeout, whatever the database does.
    static let readinessTimeout: Duration = .seconds(2)

    /// Whether the database answers a lookup within `limit`; a lookup still running then is
    /// cancelled (on PostgreSQL, its connection closed).
    func checkReadiness(within limit: Duration) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.store.checkReadiness() }
            group.addTask {
                try await Task.sleep(for: limit)
                throw ServerDatabaseError("no answer within \(limit)")
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    /// `/ready`: the database answers within the readiness timeout.
    func readiness() async throws -> WireResponse {
        do {
            try await checkReadiness(within: Self.readinessTimeout)
        } catch {
            let reason = (error as? StoreRefusal).map { ServerError($0).body.errorDescription } ?? "\(error)"
            logger.error("Not ready: the database did not answer", metadata: ["error": "\(reason)"])
            throw ServerError(503, "temporarily_unavailable", "The database does not answer.")
        }
        return try json(["status": "ready"])
    }
}
