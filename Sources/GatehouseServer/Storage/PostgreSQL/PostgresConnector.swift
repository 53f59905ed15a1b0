import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Opens connections to a location's servers: each new connection tries them in the URL's
/// order and settles on the first that answers within the connect timeout and, when the
/// location asks for it, accepts writes (as libpq's `target_session_attrs=read-write` does, by
/// `SHOW transaction_read_only`). So when the primary is lost and a standby is promoted, the
/// connections that replace the lost ones reach the new primary, and a standby still in
/// recovery is never written to.
struct PostgresConnector: Sendable {
    private let servers: [(host: PostgresLocation.Host, configuration: PostgresConnection.Configuration)]
    private let targetSessions: PostgresLocation.TargetSessions
    private let connectTimeout: TimeAmount

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
    /// otherwise ``PostgresServersRefused`` with every server's.
    func connect(on eventLoop: any EventLoop, id: Int, logger: Logger) async throws -> PostgresConnection {
        var failures: [(PostgresLocation.Host, any Error)] = []
        for server in servers {
            do {
                return try await open(server, on: eventLoop, id: id, logger: logger).get()
            } catch {
                failures.append((server.host, error))
            }
        }
        if failures.count == 1 { throw failures[0].1 }
        throw PostgresServersRefused(failures: failures)
    }

    /// ``connect(on:id:logger:)`` for a caller that waits on a future.
    func futureConnection(on eventLoop: any EventLoop, id: Int, logger: Logger) -> EventLoopFuture<PostgresConnection> {
        eventLoop.makeFutureWithTask { try await connect(on: eventLoop, id: id, logger: logger) }
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
