import Foundation
import GatehouseProtocol
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization

/// The store on PostgreSQL through postgres-nio: several server instances share one database.
///
/// The store's changes are synchronous closures (the same ones SQLite runs), so each runs on a
/// thread of the engine's ``PostgresConnectionPool``, which owns one connection while it runs and
/// waits for each statement's answer, never past the call's deadline nor the connection's life;
/// the pool has as many threads as connections. Statements are prepared once per connection
/// (``PreparedStatements``). Changes run `READ
/// COMMITTED`: each statement sees what was committed before it, and a change that decides from
/// what it read locks those rows first (`SQLDialect.lockingRows`, ``ServerStore/lockProfile``),
/// so changes about one profile, family or delivery run one after the other while unrelated
/// ones never wait for each other. (`SERIALIZABLE` kept the store's code free of locks but,
/// its conflicts being tracked by page and by table, rolled back about one refresh in two and
/// most PIN steps of unrelated users under load.) A change caught in a deadlock (40P01) is
/// rolled back and runs again from the start, at most ``maximumAttempts`` times.
///
/// Announcements travel as `NOTIFY gatehouse` (`gatehouse_<schema>`) inside the change's transaction, so PostgreSQL
/// delivers them when, and only if, it commits. Every instance listens on a connection of its
/// own, and announces a heartbeat to itself every ``heartbeatInterval``: when that connection is
/// lost, or nothing at all was heard for ``silenceLimit`` (a connection that stalls without
/// closing), subscribers hear ``Announcement/interrupted``, and ``Announcement/resumed`` once
/// announcements arrive again. So within ``announcementWindow`` of a commit, every instance has
/// heard of it or has stopped trusting what it kept.
final class PostgresEngine: StorageEngine {
    let dialect = SQLDialect.postgres
    static let heartbeatInterval: Duration = .milliseconds(250)
    /// Silence after which an instance stops trusting that it hears every announcement.
    static let silenceLimit: Duration = .seconds(1)
    /// How long a heartbeat that committed may stay unheard before the listening connection is
    /// given up and another opened: a server that vanished (its host lost, a failover) never
    /// closes it, and nothing is sent on it that would find out. (A heartbeat that cannot even
    /// commit, the pool being busy or the database down, says nothing about the listener.)
    static let listenerReplacedAfter: Duration = .seconds(3)
    /// How long after a change commits every instance has heard of it, or has stopped keeping
    /// what the announcement would have ended: the silence limit and one heartbeat to notice it.
    static let announcementWindow: Duration = silenceLimit + heartbeatInterval
    /// Runs of a change before a deadlock is given up on (503, try again).
    static let maximumAttempts = 64
    /// `gatehouse`, or `gatehouse_<schema>`: deployments in different schemas of one database
    /// do not hear each other.
    let channel: String

    private let connector: PostgresConnector
    private let eventLoops: any EventLoopGroup
    private let pool: PostgresConnectionPool
    private let logger: Logger
    /// Tells this instance's own announcements from the others' (it hears them at commit).
    private let instanceID = Data.random(count: 9).base64URLEncodedString
    private let subscribers = AnnouncementSubscribers()
    /// The listener and the heartbeat.
    private let background = Mutex<[Task<Void, Never>]>([])
    /// When anything was last heard on the listening connection, and whether subscribers were
    /// told announcements may be missed.
    /// Also when the oldest heartbeat committed since the last one heard committed.
    private let liveness = Mutex(
        (lastHeard: ContinuousClock.now, silent: false, unheardSince: ContinuousClock.Instant?.none)
    )
    /// The listening connection while it listens, and since when.
    private let listening = Mutex<(connection: PostgresConnection, since: ContinuousClock.Instant)?>(nil)

    private init(location: PostgresLocation, logger: Logger) throws {
        let tls: PostgresConnection.Configuration.TLS =
            location.requireTLS ? .require(try NIOSSLContext(configuration: .makeClientConfiguration())) : .disable
        connector = PostgresConnector(location) { server in
            var configuration = PostgresConnection.Configuration(
                host: server.name,
                port: server.port,
                username: location.username,
                password: location.password,
                database: location.database,
                tls: tls
            )
            configuration.options.connectTimeout = .seconds(Int64(location.connectTimeout.components.seconds))
            // Named, so an operator tells Gatehouse's connections apart in pg_stat_activity. Bounded:
            // a change never waits more than 10 s for a row another holds, no statement runs more
            // than 30 s, and a transaction whose instance vanished mid-way (its connection open but
            // silent) gives its locks back after 60 s.
            configuration.options.additionalStartupParameters = [
                ("application_name", "gatehouse"), ("lock_timeout", "10s"), ("statement_timeout", "30s"),
                ("idle_in_transaction_session_timeout", "60s"),
            ]
            if let schema = location.schema {
                configuration.options.additionalStartupParameters.append(("search_path", schema))
            }
            return configuration
        }
        channel = location.schema.map { "gatehouse_\($0)" } ?? "gatehouse"
        eventLoops = MultiThreadedEventLoopGroup.singleton
        pool = PostgresConnectionPool(
            connector: connector,
            size: location.poolSize,
            preparedStatements: location.preparedStatements,
            logger: logger
        )
        self.logger = logger
    }

    /// Connects, migrates the schema (once, whichever instance comes first) and starts listening.
    static func open(
        _ location: PostgresLocation,
        migrations: [SchemaMigration] = ServerSchema.migrations,
        logger: Logger
    ) async throws -> PostgresEngine {
        let engine = try PostgresEngine(location: location, logger: logger)
        do {
            // No deadline: an instance starting while another migrates waits for it.
            try await engine.onPool(timeout: nil) { connection, _ in
                try PostgresMigrations.apply(on: connection.connection, migrations: migrations, logger: logger)
            }
            try await engine.startListening()
            engine.startHeartbeat()
        } catch {
            await engine.shutdown()
            throw error
        }
        return engine
    }

    func write<T: Sendable>(_ change: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await explainingFailures { try await self.onPool { connection, _ in try self.run(change, on: connection) } }
    }

    /// The connection pool's size and use now, for the metrics.
    var poolStatistics: PostgresConnectionPool.Statistics { pool.statistics }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await explainingFailures { try await self.onPool { connection, _ in try self.look(body, on: connection) } }
    }

    func readStatement<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await explainingFailures {
            try await self.onPool { [logger] connection, _ in
                // A lookup may always run again: a connection found lost is the pool's to replace.
                guard !connection.isClosed else { throw StaleConnection() }
                let session = PostgresSession(
                    connection,
                    logger: logger,
                    announcing: nil,
                    statementLimit: 1
                )
                do {
                    return try body(session)
                } catch let error as PSQLError where PostgresSession.isConnectionFailure(error) {
                    // As at a transaction's BEGIN: a connection the database dropped while it was
                    // idle is found out here, and the lookup runs once more on a new one.
                    connection.close()
                    throw StaleConnection()
                } catch let error as DatabaseUnavailable where error.reason == .connectionLost {
                    throw StaleConnection()
                }
            }
        }
    }

    /// A change in its transaction, run again from the start after a deadlock.
    private func run<T>(
        _ change: (any SQLSession) throws -> T,
        on connection: PooledConnection
    ) throws -> T {
        var attempt = 1
        while true {
            let session = PostgresSession(
                connection,
                logger: logger,
                announcing: (channel, instanceID, { [weak self] message in self?.hear(.message(message)) })
            )
            do {
                try session.begin("BEGIN ISOLATION LEVEL READ COMMITTED")
                let value = try change(session)
                try session.execute(sql: "COMMIT")
                for action in session.committedActions { action() }
                return value
            } catch {
                session.rollBack(after: error)
                guard PostgresSession.isSerializationFailure(error), attempt < Self.maximumAttempts else { throw error }
                // Rivals that collided start again at different moments, further apart each time
                // (100 µs doubling up to 12.8 ms, jittered).
                usleep(UInt32.random(in: 0...(100 << UInt32(min(attempt, 8)))))
                attempt += 1
            }
        }
    }

    /// What a call of a change's function did.
    enum ChangeCall: Sendable {
        /// It changed something; its row.
        case changed(SQLRow)
        /// It changed nothing (a check failed).
        case unchanged
        /// Its connection was lost before the answer came: it may have committed or not. Look
        /// for what it would have written before running the whole change.
        case unknown
    }

    /// Calls a server-side function that is a whole change on its own, as one statement outside
    /// any explicit transaction: one round trip, where ``write(_:)`` spends one on BEGIN and one
    /// on COMMIT besides each statement's. The function gets `arguments`, then, with an
    /// `announcement`, the announcement channel and the announcement as this instance sends it.
    /// It must answer a row whose first value is not NULL exactly when it changed something
    /// (announcing, if it announces), and change nothing otherwise.
    ///
    /// This instance hears `announcement` before the call returns when it changed something,
    /// and when it is not known whether it did (an eviction heard for nothing costs nothing).
    func callChange(
        _ function: String,
        _ arguments: SQLArguments,
        announcing announcement: String?
    ) async throws -> ChangeCall {
        var arguments = arguments
        if let announcement { arguments = arguments + [channel, instanceID + " " + announcement] }
        let statement =
            "SELECT * FROM \(function)(\(Array(repeating: "?", count: arguments.values.count).joined(separator: ", ")))"
        let outcome = try await explainingFailures { [arguments] in
            try await self.onPool { [logger] connection, _ -> ChangeCall in
                // A connection found closed before the call is sent: another one, as BEGIN would.
                guard !connection.isClosed else { throw StaleConnection() }
                let session = PostgresSession(connection, logger: logger, announcing: nil)
                var attempt = 1
                while true {
                    do {
                        guard let row = try session.fetchOne(sql: statement, arguments: arguments),
                            row.values.first.map({ $0 != .null }) == true
                        else { return .unchanged }
                        return .changed(row)
                    } catch let error as PSQLError where PostgresSession.isConnectionFailure(error) {
                        connection.close()
                        return .unknown
                    } catch let error as DatabaseUnavailable where error.reason == .connectionLost {
                        return .unknown
                    } catch {
                        // The statement was its own transaction: a deadlock rolled all of it back.
                        guard PostgresSession.isSerializationFailure(error), attempt < Self.maximumAttempts else {
                            throw error
                        }
                        usleep(UInt32.random(in: 0...(100 << UInt32(min(attempt, 8)))))
                        attempt += 1
                    }
                }
            }
        }
        switch (announcement, outcome) {
        case (let announcement?, .changed), (let announcement?, .unknown): hear(.message(announcement))
        default: break
        }
        return outcome
    }

    /// A lookup in one snapshot, as SQLite's reads have.
    private func look<T>(
        _ body: (any SQLSession) throws -> T,
        on connection: PooledConnection
    ) throws -> T {
        let session = PostgresSession(connection, logger: logger, announcing: nil)
        do {
            try session.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            let value = try body(session)
            try session.execute(sql: "COMMIT")
            return value
        } catch {
            session.rollBack(after: error)
            throw error
        }
    }

    /// Runs `body` on a thread of the pool with a connection of its own, within `timeout`.
    private func onPool<T: Sendable>(
        timeout: Duration? = PostgresConnectionPool.callTimeout,
        _ body: @escaping @Sendable (PooledConnection, NIODeadline) throws -> T
    ) async throws -> T {
        try await pool.run(timeout: timeout, body)
    }

    /// What a request hears of a database failure: 503 when it may try again, else a description
    /// (a connection that could not be opened included).
    private func explainingFailures<T>(_ work: () async throws -> T) async throws -> T {
        do {
            return try await work()
        } catch {
            throw PostgresSession.explained(error)
        }
    }

    /// A subscriber that comes while announcements may be missed hears so at once.
    func subscribe(_ handler: @escaping @Sendable (Announcement) -> Void) {
        liveness.withLock { state in
            subscribers.add(handler)
            if state.silent { handler(.interrupted) }
        }
    }

    func shutdown() async {
        for task in background.withLock({ tasks in
            defer { tasks = [] }
            return tasks
        }) { task.cancel() }
        await pool.shutdown()
    }

    // MARK: - Announcements

    private func hear(_ announcement: Announcement) { subscribers.hear(announcement) }

    /// Listens on a connection of its own, reconnecting when it is lost; returns once the first
    /// LISTEN is in place, so no change committed after start-up goes unheard.
    private func startListening() async throws {
        let (ready, readiness) = AsyncStream<Result<Void, any Error>>.makeStream()
        let task = Task { [weak self, connector, eventLoops, logger, channel] in
            var started = false
            while !Task.isCancelled {
                var connection: PostgresConnection?
                var listened = false
                do {
                    let opened = try await connector.connect(on: eventLoops.next(), id: 0, logger: logger)
                    connection = opened
                    self?.listening.withLock { $0 = (opened, .now) }
                    try await opened.listen(on: channel) { notifications in
                        listened = true
                        if !started { readiness.yield(.success(())) }
                        started = true
                        for try await notification in notifications { self?.heard(notification.payload) }
                    }
                } catch {
                    guard started else {
                        readiness.yield(.failure(error))
                        return
                    }
                    if listened {
                        logger.warning(
                            "Lost the database's announcements; listening again",
                            metadata: ["error": "\(PostgresSession.describe(error))"]
                        )
                    }
                }
                self?.listening.withLock { $0 = nil }
                try? await connection?.close()
                if listened { self?.silenced() }
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        background.withLock { $0.append(task) }
        for await outcome in ready {
            try outcome.get()
            return
        }
    }

    /// `<instance> <message>`: this instance's own were heard at commit already; its own
    /// heartbeats say the announcements still flow.
    private func heard(_ payload: String) {
        guard let space = payload.firstIndex(of: " ") else { return }
        let message = String(payload[payload.index(after: space)...])
        guard payload[..<space] != instanceID else {
            if message.hasPrefix("heartbeat ") { alive(sentAt: message.dropFirst("heartbeat ".count)) }
            return
        }
        hear(.message(message))
    }

    /// Its own heartbeat came back: announcements flow, unless this one waited in a backlog.
    private func alive(sentAt sent: Substring) {
        guard let sentAt = UInt64(sent) else { return }
        let lag = Duration.nanoseconds(Int64(bitPattern: DispatchTime.now().uptimeNanoseconds &- sentAt))
        guard lag < Self.silenceLimit else { return }
        liveness.withLock { state in
            state.lastHeard = .now
            state.unheardSince = nil
            // Told in order, under the lock: an `interrupted` never overtakes this `resumed`.
            if state.silent {
                state.silent = false
                subscribers.hear(.resumed)
            }
        }
    }

    private func silenced() {
        liveness.withLock { state in
            if !state.silent {
                state.silent = true
                subscribers.hear(.interrupted)
            }
        }
    }

    /// Sends a heartbeat every interval (from the pool), and, on a timer of its own that no busy
    /// pool can hold up, declares the announcements interrupted when no heartbeat of this
    /// instance came back for the silence limit.
    private func startHeartbeat() {
        let sender = Task { [weak self, channel, instanceID] in
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.heartbeatInterval)
                guard let self else { return }
                let payload = instanceID + " heartbeat \(DispatchTime.now().uptimeNanoseconds)"
                let sent: Bool =
                    (try? await self.onPool { connection, _ in
                        let session = PostgresSession(connection, logger: self.logger, announcing: nil)
                        try session.execute(sql: "SELECT pg_notify(?, ?)", arguments: [channel, payload])
                        return true
                    }) ?? false
                if sent {
                    let committed = ContinuousClock.now
                    self.liveness.withLock { state in
                        if state.unheardSince == nil { state.unheardSince = committed }
                    }
                }
            }
        }
        let watchdog = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.heartbeatInterval)
                guard let self else { return }
                let now = ContinuousClock.now
                let (lastHeard, unheardSince) = liveness.withLock { ($0.lastHeard, $0.unheardSince) }
                guard now - lastHeard > Self.silenceLimit else { continue }
                silenced()
                // A heartbeat committed long ago and never heard, on a connection not just
                // opened: closing it ends the listener's wait, and it opens another, on
                // whichever server accepts writes now.
                guard let unheardSince, now - unheardSince > Self.listenerReplacedAfter else { continue }
                let stale = listening.withLock { current -> PostgresConnection? in
                    guard let opened = current, now - opened.since > Self.listenerReplacedAfter else { return nil }
                    current = nil
                    return opened.connection
                }
                if let stale {
                    liveness.withLock { $0.unheardSince = nil }
                    logger.warning(
                        "A heartbeat committed \(now - unheardSince) ago was never heard; opening another listening connection"
                    )
                    stale.close().whenComplete { _ in _ = stale }
                }
            }
        }
        background.withLock { $0 += [sender, watchdog] }
    }
}
