import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Opens connections to a location's servers: each new connection settles on the first that
/// answers within the connect timeout and, when the location asks for it, accepts writes (as
/// libpq's `target_session_attrs=read-write` does, by `SHOW transaction_read_only`). It tries
/// first the server the last connection settled on, then the others in the URL's order: so
/// when the primary is lost and a standby is promoted, the connections that replace the lost
/// ones reach the new primary, a standby still in recovery is never written to, and once one
/// connection found the new primary the others do not wait on a vanished host first.
final class PostgresConnector: Sendable {
    private let servers: [(host: PostgresLocation.Host, configuration: PostgresConnection.Configuration)]
    private let targetSessions: PostgresLocation.TargetSessions
    private let connectTimeout: TimeAmount
    /// The server the last connection settled on.
    private let preferred = Atomic(0)
    /// When no server would do was last logged: once every 5 s at most.
    private let lastWarned = Mutex<ContinuousClock.Instant?>(nil)

    /// `configure` makes the connection settings for one server.
    init(
        _ location: PostgresLocation,
        configure: (PostgresLocation.Host) throws -> PostgresConnection.Configuration
    ) rethrows {
        servers = try location.hosts.map { host in (host, try configure(host)) }
        targetSessions = location.targetSessions
        connectTimeout = .nanoseconds(Int64(location.connectTimeout.components.seconds) * 1_000_000_000)
    }

    /// The first server that will do; with one server, its own failure (explained as ever),
    /// otherwise ``PostgresServersRefused`` with every server's, which is also logged (they are
    /// the operator's to read: a request hears only "unreachable").
    func connect(on eventLoop: any EventLoop, id: Int, logger: Logger) async throws -> PostgresConnection {
        let first = min(preferred.load(ordering: .relaxed), servers.count - 1)
        var failures: [(PostgresLocation.Host, any Error)] = []
        for index in [first] + servers.indices.filter({ $0 != first }) {
            do {
                let connection = try await open(servers[index], on: eventLoop, id: id, logger: logger).get()
                preferred.store(index, ordering: .relaxed)
                return connection
            } catch {
                failures.append((servers[index].host, error))
            }
        }
        if failures.count == 1 { throw failures[0].1 }
        let refused = PostgresServersRefused(failures: failures)
        let now = ContinuousClock.now
        let warn = lastWarned.withLock { last in
            guard last.map({ now - $0 >= .seconds(5) }) ?? true else { return false }
            last = now
            return true
        }
        if warn { logger.warning("\(PostgresSession.describe(refused))") }
        throw refused
    }

    /// ``connect(on:id:logger:)`` for a caller that waits on a future.
    func futureConnection(on eventLoop: any EventLoop, id: Int, logger: Logger) -> EventLoopFuture<PostgresConnection> {
        eventLoop.makeFutureWithTask { try await self.connect(on: eventLoop, id: id, logger: logger) }
    }

    /// One server, within the connect timeout: connected, started up, and (when asked) found
    /// to accept writes. A connection that comes after the timeout, or that will not do, is closed.
    private func open(
        _ server: (host: PostgresLocation.Host, configuration: PostgresConnection.Configuration),
        on eventLoop: any EventLoop,
        id: Int,
        logger: Logger
    ) -> EventLoopFuture<PostgresConnection> {
        let settled = eventLoop.makePromise(of: PostgresConnection.self)
        let limit = connectTimeout
        let timer = eventLoop.scheduleTask(in: limit) { settled.fail(ChannelError.connectTimeout(limit)) }
        let opening = PostgresConnection.connect(
            on: eventLoop,
            configuration: server.configuration,
            id: id,
            logger: logger
        )
        opening.flatMap { [targetSessions] connection -> EventLoopFuture<PostgresConnection> in
            guard targetSessions == .readWrite else { return eventLoop.makeSucceededFuture(connection) }
            return connection.query("SHOW transaction_read_only", logger: logger).flatMapThrowing { result in
                let readOnly = try result.rows.first?.decode(String.self, context: .default)
                guard readOnly == "off" else { throw PostgresServerReadOnly() }
                return connection
            }
        }.cascade(to: settled)
        settled.futureResult.whenComplete { _ in timer.cancel() }
        // Whatever settled first, a connection that did not win is closed.
        opening.and(settled.futureResult).whenFailure { _ in
            opening.whenSuccess { connection in connection.close().whenComplete { _ in _ = connection } }
        }
        return settled.futureResult
    }
}

/// The server accepts no writes (`transaction_read_only` is on): a standby in recovery, or a
/// server made read-only, which a connection asking for `read-write` passes over.
struct PostgresServerReadOnly: Error {}

/// No server of several would do; why not, each.
struct PostgresServersRefused: Error {
    var failures: [(host: PostgresLocation.Host, error: any Error)]
}
