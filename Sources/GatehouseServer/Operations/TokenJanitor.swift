import Foundation
import Logging
public import ServiceLifecycle

/// Keeps the token server's tables from growing: every `interval` it removes what no request
/// needs any more (``TokenServer/removeExpiredState()``), a bounded batch of each kind at a
/// time. Run it beside the HTTP server in the same `ServiceGroup`; it stops on graceful shutdown.
public struct TokenJanitor: Service {
    /// The server whose expired state is removed.
    public let server: TokenServer

    /// A janitor for `server`, sweeping every `cleanupInterval` of its configuration.
    public init(server: TokenServer) { self.server = server }

    /// Sweeps until graceful shutdown: a failed sweep is logged and tried again at the next interval.
    public func run() async throws {
        let server = server
        let interval = Duration.seconds(server.configuration.cleanupInterval)
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    // A full batch means more is waiting: sweep again at once.
                    var report = try await server.removeExpiredState()
                    while report.isFull(server.configuration.cleanupBatch), !Task.isCancelled {
                        report = try await server.removeExpiredState()
                    }
                } catch {
                    server.logger.error("Cleanup failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}

extension CleanupReport {
    fileprivate func isFull(_ batch: Int) -> Bool {
        [tokens, families, deviceTokens, flows, proofs, profiles, installations, webLogins].contains { $0 >= batch }
    }
}

extension TokenServer {
    /// Removes one batch of what no request needs any more; the janitor calls it on a timer.
    @discardableResult
    public func removeExpiredState() async throws -> CleanupReport {
        let report = try await store.removeExpiredState(
            now: now,
            limit: configuration.cleanupBatch,
            idleInstallationLifetime: Double(configuration.idleInstallationLifetime),
            auditRetention: Double(configuration.audit.retentionDays) * 86400
        )
        if report.total > 0 { logger.debug("Removed expired state", metadata: ["removed": "\(report)"]) }
        return report
    }

    /// Rows per table of the server's state.
    public func rowCounts() async throws -> [String: Int] { try await store.rowCounts() }
}
