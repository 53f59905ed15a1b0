import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// The PostgreSQL engine's threads and connections: runs synchronous work on a thread of its
/// own with a connection of its own, and bounds every wait.
///
/// Every call has a deadline from the moment it is asked for (``callTimeout``: the statement
/// timeout and a margin for the round trips). A call still queued at its deadline is refused
/// without running; a statement still unanswered at it closes its connection (PostgreSQL then
/// rolls the transaction back). A statement on a connection that closes — a database restart,
/// a failover — fails at once instead of waiting for an answer that cannot come. A caller
/// whose task is cancelled (a shutdown) gets its answer at once; the connection its call held
/// is closed so the thread comes free too. So no request waits on the database for ever, and a
/// pool of stuck threads cannot stop an instance.
final class PostgresConnectionPool: Sendable {
    /// The longest a change or lookup takes, from being asked for to its answer.
    static let callTimeout: Duration = .seconds(35)

    private let connector: PostgresConnector
    private let eventLoops: any EventLoopGroup
    private let threads: NIOThreadPool
    private let idle = Mutex<[PooledConnection]>([])
    /// Cancels each call asked for and not yet answered: a shutdown ends them all at once, and
    /// refuses calls asked for after it began.
    private let running = Mutex<(calls: [ObjectIdentifier: @Sendable () -> Void], stopping: Bool)>(([:], false))
    private let logger: Logger
    /// Connections (and threads) at most.
    let size: Int
    /// Calls running on a thread with a connection now.
    private let busy = Atomic<Int>(0)
    /// What the connections' prepared statements answer to.
    private let statementCache: PreparedStatements.Policy

    /// What the pool is doing now, for the metrics.
    struct Statistics: Sendable {
        /// Connections at most.
        var size: Int
        /// Calls holding a connection.
        var inUse: Int
        /// Calls asked for and waiting for a thread and a connection.
        var waiting: Int
        /// Connections open and not in use.
        var idle: Int
    }

    var statistics: Statistics {
        let calls = running.withLock { $0.calls.count }
        let inUse = busy.load(ordering: .relaxed)
        return Statistics(
            size: size,
            inUse: inUse,
            waiting: max(0, calls - inUse),
            idle: idle.withLock { $0.count }
        )
    }

    init(connector: PostgresConnector, size: Int, preparedStatements: Int, logger: Logger) {
        self.connector = connector
        self.size = size
        statementCache = PreparedStatements.Policy(limit: preparedStatements)
        eventLoops = MultiThreadedEventLoopGroup.singleton
        threads = NIOThreadPool(numberOfThreads: size)
        self.logger = logger
        threads.start()
    }

    /// Runs `body` on a pool thread with a connection, within `timeout` (nil: no deadline, for
    /// migrations that wait for another instance's). `body` gets the deadline its statements
    /// must keep.
    func run<T: Sendable>(
        timeout: Duration? = callTimeout,
        _ body: @escaping @Sendable (PooledConnection, NIODeadline) throws -> T
    ) async throws -> T {
        let deadline = timeout.map { NIODeadline.now() + TimeAmount($0) } ?? .distantFuture
        let call = PoolCall<T>()
        let id = ObjectIdentifier(call)
        let admitted = running.withLock { running in
            if !running.stopping { running.calls[id] = { call.cancel() } }
            return !running.stopping
        }
        guard admitted else { throw DatabaseUnavailable(.stopping) }
        defer { running.withLock { _ = $0.calls.removeValue(forKey: id) } }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard call.start(continuation) else { return }
                threads.submit { state in
                    guard case .active = state else { return call.finish(.failure(DatabaseUnavailable(.stopping))) }
                    guard call.isWanted else { return }
                    guard NIODeadline.now() < deadline else { return call.finish(.failure(DatabaseUnavailable(.busy))) }
                    self.busy.add(1, ordering: .relaxed)
                    defer { self.busy.subtract(1, ordering: .relaxed) }
                    call.finish(Result { try self.withConnection(for: call, deadline: deadline, body) })
                }
            }
        } onCancel: {
            call.cancel()
        }
    }

    /// Ends every call still running or waiting (their connections closed, their threads free
    /// at once), then waits for the threads and closes the idle connections.
    func shutdown() async {
        let calls = running.withLock { running in
            running.stopping = true
            return Array(running.calls.values)
        }
        for cancel in calls { cancel() }
        try? await threads.shutdownGracefully()
        for connection in idle.withLock({ connections in
            defer { connections = [] }
            return connections
        }) {
            try? await connection.connection.close()
        }
    }

    /// An idle connection the database dropped meanwhile (a restart, an idle timeout) is found
    /// out by the transaction's first statement, before anything ran: `body` then runs once
    /// more on a new connection. So does a body whose prepared statements another instance's
    /// migration changed the results of (it failed, so nothing of it stays).
    private func withConnection<T>(
        for call: PoolCall<T>,
        deadline: NIODeadline,
        _ body: (PooledConnection, NIODeadline) throws -> T
    ) throws -> T {
        var (staleStatementRetries, staleConnectionRetries) = (1, 1)
        while true {
            do {
                return try withLeasedConnection(for: call, deadline: deadline, body)
            } catch is StalePreparedStatements where staleStatementRetries > 0 {
                staleStatementRetries -= 1
            } catch is StaleConnection {
                // A new connection lost as well: the database is going away (a restart).
                guard staleConnectionRetries > 0 else { throw DatabaseUnavailable(.connectionLost) }
                staleConnectionRetries -= 1
            }
        }
    }

    private func withLeasedConnection<T>(
        for call: PoolCall<T>,
        deadline: NIODeadline,
        _ body: (PooledConnection, NIODeadline) throws -> T
    ) throws -> T {
        var connection = idle.withLock { $0.popLast() }
        if let existing = connection, existing.isClosed { connection = nil }
        let leased = try connection ?? connect(for: call, until: deadline)
        guard call.holds(leased) else {
            idle.withLock { $0.append(leased) }
            throw DatabaseUnavailable(.stopping)
        }
        leased.arm(until: deadline)
        var result = Result { () throws -> T in
            try leased.statements.forgetIfStale(on: leased, logger: logger)
            return try body(leased, deadline)
        }
        leased.disarm()
        // A statement's results changed under it (and the body may have gone on to fail in
        // its aborted transaction): the body runs again, with statements prepared afresh.
        if leased.statements.takeStaleFinding(), case .failure = result { result = .failure(StalePreparedStatements()) }
        // Released before it is handed on: a cancellation that came first may be abandoning it,
        // and one that comes later no longer can (it would end another call's statement).
        let reusable = call.release() && !leased.isClosed
        switch result {
        case .success:
            if reusable { idle.withLock { $0.append(leased) } } else { leased.close() }
        case .failure(let error):
            // A connection whose transaction could not be ended was closed by the session.
            if reusable, !(error is StaleConnection) { idle.withLock { $0.append(leased) } } else { leased.close() }
        }
        return try result.get()
    }

    /// Opens a connection; its failure is explained by the caller (a request's, or start-up's).
    /// A connection stays unanswered for as long as a stalled server keeps it (the TCP connect
    /// succeeds, the start-up message waits): the wait ends at the deadline, or when the call
    /// is cancelled.
    private func connect<T>(for call: PoolCall<T>, until deadline: NIODeadline) throws -> PooledConnection {
        let eventLoop = eventLoops.next()
        let opening = connector.futureConnection(
            on: eventLoop,
            id: Int.random(in: 0...Int(Int32.max)),
            logger: logger
        )
        let opened = eventLoop.makePromise(of: PostgresConnection.self)
        opening.cascade(to: opened)
        let abort: @Sendable () -> Void = { opened.fail(DatabaseUnavailable(.stopping)) }
        if !call.waits(abort: abort) { abort() }
        defer { call.release() }
        do {
            return PooledConnection(
                try PooledConnection.wait(for: opened.futureResult, until: deadline),
                statements: statementCache
            )
        } catch let error as DatabaseUnavailable {
            // Opened after all, too late: nobody will use it.
            opening.whenSuccess { connection in connection.close().whenComplete { _ in _ = connection } }
            throw error
        }
    }
}

/// A connection of the pool. A statement waits for its answer at most until the deadline of the
/// call holding the connection, and no longer than the connection lives: its close fails the
/// wait at once (NIO drops a query written to a closed channel without ever answering it).
final class PooledConnection: Sendable {
    let connection: PostgresConnection
    /// The named statements prepared on it.
    let statements: PreparedStatements
    /// Fails the statement waiting on this connection, if one is.
    private let waiting = Mutex<(@Sendable (any Error) -> Void)?>(nil)
    private let discarded = Atomic(false)
    /// The holding call's deadline passed: every statement from now on has timed out.
    private let expired = Atomic(false)
    /// One timer for the holding call's deadline, not one for each statement (each timer is a
    /// hand-over to the event loop and back), with the number of the call it belongs to: a timer
    /// whose cancellation came too late finds a later number and does nothing.
    private let deadlineTimer = Mutex<(call: Int, timer: Scheduled<Void>?)>((0, nil))

    init(_ connection: PostgresConnection, statements policy: PreparedStatements.Policy) {
        self.connection = connection
        statements = PreparedStatements(policy)
        connection.closeFuture.whenComplete { [weak self] _ in
            self?.waiting.withLock { $0 }?(DatabaseUnavailable(.connectionLost))
        }
    }

    /// Closed, or being closed: its channel may still look active for a moment after ``close()``.
    var isClosed: Bool { connection.isClosed || discarded.load(ordering: .relaxed) }

    /// Closes the connection; it is kept until closed (postgres-nio insists on being closed
    /// before it is released).
    func close() {
        discarded.store(true, ordering: .relaxed)
        connection.close().whenComplete { [connection] _ in _ = connection }
    }

    /// Ends the statement waiting on this connection now, as ``DatabaseUnavailable/Reason/stopping``,
    /// and closes it: nothing more runs on it.
    func abandon() {
        discarded.store(true, ordering: .relaxed)
        waiting.withLock { $0 }?(DatabaseUnavailable(.stopping))
        close()
    }

    /// From now until ``disarm()``, statements end at `deadline`. When it passes first, the
    /// running statement's fate is unknown: the connection is closed, so PostgreSQL ends its
    /// transaction and nobody reuses it mid-statement.
    func arm(until deadline: NIODeadline) {
        guard deadline != .distantFuture else { return }
        deadlineTimer.withLock { armed in
            armed.call += 1
            let call = armed.call
            armed.timer = connection.eventLoop.scheduleTask(deadline: deadline) { [weak self] () -> Void in
                self?.expire(call)
            }
        }
    }

    func disarm() {
        deadlineTimer.withLock { armed in
            defer {
                armed.call += 1
                armed.timer = nil
            }
            return armed.timer
        }?.cancel()
    }

    private func expire(_ call: Int) {
        guard deadlineTimer.withLock({ $0.call == call && $0.timer != nil }) else { return }
        expired.store(true, ordering: .sequentiallyConsistent)
        waiting.withLock { $0 }?(DatabaseUnavailable(.timedOut))
        close()
    }

    /// Runs `query` and waits for its answer, until the holding call's deadline (``arm(until:)``).
    func query(_ query: PostgresQuery, logger: Logger) throws -> PostgresQueryResult {
        guard !isClosed else { throw DatabaseUnavailable(.connectionLost) }
        let answer = connection.eventLoop.makePromise(of: PostgresQueryResult.self)
        waiting.withLock { $0 = { answer.fail($0) } }
        defer { waiting.withLock { $0 = nil } }
        // Expired or closed before the waiter was in place: nobody was there to be told.
        guard !expired.load(ordering: .sequentiallyConsistent) else { throw DatabaseUnavailable(.timedOut) }
        guard !isClosed else { throw DatabaseUnavailable(.connectionLost) }
        connection.query(query, logger: logger).cascade(to: answer)
        return try answer.futureResult.wait()
    }

    /// Waits for `future` on this (non-event-loop) thread, at most until `deadline`.
    static func wait<Value: Sendable>(for future: EventLoopFuture<Value>, until deadline: NIODeadline) throws -> Value {
        guard deadline != .distantFuture else { return try future.wait() }
        let bounded = future.eventLoop.makePromise(of: Value.self)
        future.cascade(to: bounded)
        let timer = future.eventLoop.scheduleTask(deadline: deadline) {
            bounded.fail(DatabaseUnavailable(.timedOut))
        }
        defer { timer.cancel() }
        return try bounded.futureResult.wait()
    }
}

/// Why the database could not serve a call; the request may be tried again (503).
struct DatabaseUnavailable: Error, CustomStringConvertible {
    enum Reason: Sendable, Equatable {
        /// The connection closed under the call (a restart, a failover, a network cut).
        case connectionLost
        /// No answer within the call's deadline.
        case timedOut
        /// The call waited its whole deadline for a thread.
        case busy
        /// The instance is stopping, or the caller went away.
        case stopping
    }

    var reason: Reason

    init(_ reason: Reason) { self.reason = reason }

    var description: String {
        switch reason {
        case .connectionLost: "the connection to the database was lost"
        case .timedOut: "the database did not answer within \(PostgresConnectionPool.callTimeout)"
        case .busy: "every database connection stayed busy for \(PostgresConnectionPool.callTimeout)"
        case .stopping: "the server is stopping"
        }
    }
}

/// One call's hand-over between its awaiting task and the pool thread that runs it, answered
/// once: by the thread, or at once when the task is cancelled (which also ends what the thread
/// waits on — a connection being opened, a statement — so it comes free).
private final class PoolCall<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var cancelled = false
        /// Ends what the thread waits on now: a connection being opened, or a statement.
        var abort: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// Keeps the continuation; false (and answered) when the task was cancelled already.
    func start(_ continuation: CheckedContinuation<Value, any Error>) -> Bool {
        let cancelled = state.withLock { state in
            if !state.cancelled { state.continuation = continuation }
            return state.cancelled
        }
        if cancelled { continuation.resume(throwing: DatabaseUnavailable(.stopping)) }
        return !cancelled
    }

    /// Whether anyone still waits for the call.
    var isWanted: Bool { state.withLock { !$0.cancelled } }

    /// The thread waits on something `abort` ends; false when the call was cancelled already.
    func waits(abort: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            if !state.cancelled { state.abort = abort }
            return !state.cancelled
        }
    }

    /// The thread holds `connection` for the call; false when the call was cancelled meanwhile.
    func holds(_ connection: PooledConnection) -> Bool { waits { connection.abandon() } }

    /// The thread is done with what it waited on; false when the call was cancelled first (its
    /// abort may be running, so the connection must not be handed on).
    @discardableResult
    func release() -> Bool {
        state.withLock { state in
            state.abort = nil
            return !state.cancelled
        }
    }

    func finish(_ result: Result<Value, any Error>) {
        state.withLock { state in
            defer { state.continuation = nil }
            return state.continuation
        }?.resume(with: result)
    }

    func cancel() {
        let (continuation, abort) = state.withLock { state in
            state.cancelled = true
            defer {
                state.continuation = nil
                state.abort = nil
            }
            return (state.continuation, state.abort)
        }
        abort?()
        continuation?.resume(throwing: DatabaseUnavailable(.stopping))
    }
}
