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
/// the pool has as many threads as connections. Changes run `READ
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
    /// How long after a change commits every instance has heard of it, or has stopped keeping
    /// what the announcement would have ended: the silence limit and one heartbeat to notice it.
    static let announcementWindow: Duration = silenceLimit + heartbeatInterval
    /// Runs of a change before a deadlock is given up on (503, try again).
    static let maximumAttempts = 64
    /// `gatehouse`, or `gatehouse_<schema>`: deployments in different schemas of one database
    /// do not hear each other.
    let channel: String

    private let configuration: PostgresConnection.Configuration
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
    private let liveness = Mutex((lastHeard: ContinuousClock.now, silent: false))

    private init(location: PostgresLocation, logger: Logger) throws {
        var configuration = PostgresConnection.Configuration(
            host: location.host,
            port: location.port,
            username: location.username,
            password: location.password,
            database: location.database,
            tls: location.requireTLS ? .require(try NIOSSLContext(configuration: .makeClientConfiguration())) : .disable
        )
        configuration.options.connectTimeout = .seconds(10)
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
        self.configuration = configuration
        channel = location.schema.map { "gatehouse_\($0)" } ?? "gatehouse"
        eventLoops = MultiThreadedEventLoopGroup.singleton
        pool = PostgresConnectionPool(configuration: configuration, size: location.poolSize, logger: logger)
        self.logger = logger
    }

    /// Connects, migrates the schema (once, whichever instance comes first) and starts listening.
    static func open(_ location: PostgresLocation, logger: Logger) async throws -> PostgresEngine {
        let engine = try PostgresEngine(location: location, logger: logger)
        do {
            // No deadline: an instance starting while another migrates waits for it.
            try await engine.onPool(timeout: nil) { connection, _ in
                try PostgresMigrations.apply(on: connection.connection, logger: logger)
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
        try await explainingFailures { try await self.onPool { try self.run(change, on: $0, until: $1) } }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await explainingFailures { try await self.onPool { try self.look(body, on: $0, until: $1) } }
    }

    /// A change in its transaction, run again from the start after a deadlock.
    private func run<T>(
        _ change: (any SQLSession) throws -> T,
        on connection: PooledConnection,
        until deadline: NIODeadline
    ) throws -> T {
        var attempt = 1
        while true {
            let session = PostgresSession(
                connection,
                deadline: deadline,
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

    /// A lookup in one snapshot, as SQLite's reads have.
    private func look<T>(
        _ body: (any SQLSession) throws -> T,
        on connection: PooledConnection,
        until deadline: NIODeadline
    ) throws -> T {
        let session = PostgresSession(connection, deadline: deadline, logger: logger, announcing: nil)
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
        let task = Task { [weak self, configuration, eventLoops, logger, channel] in
            var started = false
            while !Task.isCancelled {
                var connection: PostgresConnection?
                var listened = false
                do {
                    let opened = try await PostgresConnection.connect(
                        on: eventLoops.next(),
                        configuration: configuration,
                        id: 0,
                        logger: logger
                    )
                    connection = opened
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
                _ = try? await self.onPool { connection, deadline in
                    let session = PostgresSession(connection, deadline: deadline, logger: self.logger, announcing: nil)
                    try session.execute(sql: "SELECT pg_notify(?, ?)", arguments: [channel, payload])
                }
            }
        }
        let watchdog = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.heartbeatInterval)
                guard let self else { return }
                if ContinuousClock.now - liveness.withLock({ $0.lastHeard }) > Self.silenceLimit { silenced() }
            }
        }
        background.withLock { $0 += [sender, watchdog] }
    }
}

/// A change or lookup's transaction on one connection, on the engine's pool thread.
final class PostgresSession: SQLSession {
    private let connection: PooledConnection
    /// When the call this transaction belongs to must have its answer.
    private let deadline: NIODeadline
    private let logger: Logger
    /// Where announcements go, the instance's id and its own subscribers, in a change; nil in a lookup.
    private let announcing: (channel: String, instanceID: String, hearOwn: @Sendable (String) -> Void)?
    private(set) var changesCount = 0
    private(set) var committedActions: [@Sendable () -> Void] = []
    var dialect: SQLDialect { .postgres }

    init(
        _ connection: PooledConnection,
        deadline: NIODeadline,
        logger: Logger,
        announcing: (channel: String, instanceID: String, hearOwn: @Sendable (String) -> Void)?
    ) {
        self.connection = connection
        self.deadline = deadline
        self.logger = logger
        self.announcing = announcing
    }

    func execute(sql: String, arguments: SQLArguments) throws {
        _ = try run(sql, arguments)
    }

    func fetchAll(sql: String, arguments: SQLArguments) throws -> [SQLRow] {
        let result = try run(sql, arguments)
        return try result.rows.map { try Self.row($0) }
    }

    func fetchOne(sql: String, arguments: SQLArguments) throws -> SQLRow? {
        let result = try run(sql, arguments)
        return try result.rows.first.map { try Self.row($0) }
    }

    func afterCommit(_ action: @escaping @Sendable () -> Void) { committedActions.append(action) }

    func announce(_ message: String) throws {
        guard let announcing else { throw ServerDatabaseError("A read cannot announce a change.") }
        try execute(
            sql: "SELECT pg_notify(?, ?)",
            arguments: [announcing.channel, announcing.instanceID + " " + message]
        )
        // This instance hears it at commit, before the change is acknowledged.
        afterCommit { announcing.hearOwn(message) }
    }

    /// Starts the transaction; ``StaleConnection`` when the connection turns out to be gone.
    func begin(_ statement: String) throws {
        do {
            try execute(sql: statement)
        } catch let error as PSQLError where Self.connectionLostCodes.contains(error.code) {
            throw StaleConnection()
        } catch let error as DatabaseUnavailable where error.reason == .connectionLost {
            throw StaleConnection()
        }
    }

    /// Ends the transaction after `error`. A connection that cannot be trusted to be outside a
    /// transaction afterwards — lost, timed out, or its ROLLBACK refused — is closed instead, so
    /// it is never handed on; the caller answers for `error` either way.
    func rollBack(after error: any Error) {
        guard !connection.isClosed else { return }
        // The connection itself failed (lost, timed out, closing): nothing can be sent on it. A
        // lock or statement timeout leaves it healthy; those roll back like any refusal.
        if error is DatabaseUnavailable || error is ChannelError || error is IOError
            || (error as? PSQLError).map(Self.isConnectionFailure) == true
        {
            connection.close()
            return
        }
        do {
            _ = try run("ROLLBACK", [])
        } catch {
            logger.warning(
                "A transaction could not be rolled back; its connection is closed",
                metadata: ["error": "\(Self.describe(error))"]
            )
            connection.close()
        }
    }

    private func run(_ sql: String, _ arguments: SQLArguments) throws -> PostgresQueryResult {
        var binds = PostgresBindings(capacity: arguments.values.count)
        for value in arguments.values {
            switch value {
            case .null: binds.appendNull()
            case .integer(let integer): binds.append(integer)
            case .double(let double): binds.append(double)
            case .text(let text): binds.append(text)
            case .blob(let data): binds.append(ByteBuffer(bytes: data))
            case .bool(let bool): binds.append(bool)
            }
        }
        let query = PostgresQuery(unsafeSQL: Self.numberedPlaceholders(sql), binds: binds)
        do {
            let result = try connection.query(query, logger: logger, until: deadline)
            changesCount = result.metadata.rows ?? 0
            return result
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            throw UniqueConstraintViolation(detail: error.serverInfo?[.message] ?? "unique_violation")
        }
    }

    /// `?` becomes `$1`, `$2`, … outside quoted text and identifiers.
    static func numberedPlaceholders(_ sql: String) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16)
        var number = 0
        var quote: Character?
        for character in sql {
            if let open = quote {
                if character == open { quote = nil }
                result.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                result.append(character)
            } else if character == "?" {
                number += 1
                result += "$\(number)"
            } else {
                result.append(character)
            }
        }
        return result
    }

    private static func row(_ row: PostgresRow) throws -> SQLRow {
        var columns: [String] = []
        var values: [SQLValue] = []
        columns.reserveCapacity(row.count)
        values.reserveCapacity(row.count)
        for cell in row {
            columns.append(cell.columnName)
            values.append(try value(cell))
        }
        return SQLRow(columns: columns, values: values)
    }

    private static func value(_ cell: PostgresCell) throws -> SQLValue {
        guard cell.bytes != nil else { return .null }
        switch cell.dataType {
        case .int8: return .integer(try cell.decode(Int64.self))
        case .int4: return .integer(Int64(try cell.decode(Int32.self)))
        case .int2: return .integer(Int64(try cell.decode(Int16.self)))
        case .float8, .float4: return .double(try cell.decode(Double.self))
        case .bool: return .bool(try cell.decode(Bool.self))
        case .bytea:
            let buffer = try cell.decode(ByteBuffer.self)
            return .blob(Data(buffer.readableBytesView))
        case .text, .varchar, .name, .bpchar: return .text(try cell.decode(String.self))
        case .void: return .null
        default:
            throw ServerDatabaseError(
                "Column \(cell.columnName) has a type the store does not read (\(cell.dataType))."
            )
        }
    }

    /// Failures that say nothing about the request: the database is busy, restarting or gone
    /// (a lock or statement timeout, too many connections, an administrator's shutdown, a lost
    /// connection). The request may be tried again.
    static func isUnavailable(_ error: PSQLError) -> Bool {
        if let state = error.serverInfo?[.sqlState] {
            return ["55P03", "57014", "53300", "57P01", "57P02", "57P03", "08000", "08003", "08006"].contains(state)
        }
        return connectionLostCodes.contains(error.code)
    }

    /// postgres-nio's codes for a connection that closed or failed underneath, no server answer.
    static let connectionLostCodes: [PSQLError.Code] = [
        .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown,
    ]

    /// The connection is gone or going: the server ended the session (57P0x), or it failed
    /// underneath (08xxx, closed, reset).
    static func isConnectionFailure(_ error: PSQLError) -> Bool {
        if let state = error.serverInfo?[.sqlState] {
            return state.hasPrefix("08") || state.hasPrefix("57P")
        }
        return connectionLostCodes.contains(error.code)
    }

    static func isSerializationFailure(_ error: any Error) -> Bool {
        guard let state = (error as? PSQLError)?.serverInfo?[.sqlState] else { return false }
        return state == "40001" || state == "40P01"
    }

    /// PSQLError's description says nothing, by design (it may carry data); the store's own
    /// errors pass through, the database's become a 503 (busy, unreachable) or a description an
    /// operator can act on.
    static func explained(_ error: any Error) -> any Error {
        if let unavailable = error as? DatabaseUnavailable {
            let message =
                unavailable.reason == .stopping
                ? "The server is stopping; try again."
                : "The server's database is busy or unreachable; try again."
            return ServerError(503, "temporarily_unavailable", message)
        }
        // The connection's channel failed underneath postgres-nio (reset, closed mid-write).
        if error is ChannelError || error is IOError {
            return ServerError(503, "temporarily_unavailable", "The server's database is unreachable; try again.")
        }
        guard let error = error as? PSQLError else { return error }
        if isSerializationFailure(error) {
            return ServerError(503, "temporarily_unavailable", "The server is busy with this account; try again.")
        }
        if isUnavailable(error) {
            return ServerError(
                503,
                "temporarily_unavailable",
                "The server's database is busy or unreachable; try again."
            )
        }
        return PostgresSessionError(description: describe(error))
    }

    /// What went wrong, for an operator: the server's message and SQLSTATE, or (the server never
    /// reached) what failed underneath: a refused or timed-out connection, a TLS handshake.
    static func describe(_ error: any Error) -> String { "PostgreSQL: \(reason(error))" }

    /// Why the database failed, as the end of a sentence that names it (``DatabaseFailure``): the
    /// server's own message with its SQLSTATE, or what failed underneath before the server
    /// answered (nothing listening, an unknown host, TLS), in words, never a Swift description.
    static func reason(_ error: any Error) -> String {
        switch error {
        case let error as ServerDatabaseError:
            return error.description
        case let error as PSQLError:
            if let message = error.serverInfo?[.message] {
                let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
                return "the server answered: \(message)\(state)"
            }
            switch error.code {
            case .sslUnsupported:
                return "the server does not offer TLS, which the URL requires; add sslmode=disable only if the "
                    + "database is on this host or a private network (docs/CLUSTER.md)"
            case .authMechanismRequiresPassword:
                return "the server asks for a password and the URL gives none (postgres://USER:PASSWORD@HOST/DATABASE)"
            case .unsupportedAuthMechanism:
                return "the server asks for an authentication method Gatehouse cannot use; allow scram-sha-256 "
                    + "or md5 for this user in pg_hba.conf"
            case .saslError:
                return "SCRAM authentication with the server failed"
            case .serverClosedConnection, .uncleanShutdown:
                return "the server closed the connection"
            default:
                return error.underlying.map(underneath) ?? "the PostgreSQL client failed (\(error.code))"
            }
        default:
            return underneath(error)
        }
    }

    /// A failure below PostgreSQL's protocol: connecting, resolving the host, TLS.
    private static func underneath(_ error: any Error) -> String {
        switch error {
        case let error as NIOConnectionError:
            if error.dnsAError != nil || error.dnsAAAAError != nil {
                return "the host \(error.host) is not known (its name does not resolve)"
            }
            let errnos = error.connectionErrors.compactMap { ($0.error as? IOError)?.errnoCode }
            let address = "\(error.host):\(error.port)"
            if errnos.contains(ECONNREFUSED) {
                return "nothing accepts connections at \(address) (is PostgreSQL running and listening there?)"
            }
            if let code = errnos.first {
                return "cannot connect to \(address): \(String(cString: strerror(code)).lowercased())"
            }
            return "cannot connect to \(address)"
        case ChannelError.connectTimeout(let limit):
            return "no answer from the server within \(limit.nanoseconds / 1_000_000_000) s"
        case let error as IOError:
            return "the connection failed: \(String(cString: strerror(error.errnoCode)).lowercased())"
        case let error as NIOSSLError:
            return "the TLS handshake with the server failed (\(tlsReason(error))); check its certificate, or "
                + "that it offers TLS at all"
        default:
            return "an unexpected failure (\(String(reflecting: type(of: error))))"
        }
    }

    /// BoringSSL's reason for a failed handshake, e.g. CERTIFICATE_VERIFY_FAILED.
    private static func tlsReason(_ error: NIOSSLError) -> String {
        guard case .handshakeFailed(let inner) = error else { return "the TLS session failed" }
        let text = "\(inner)"
        let reasons = text.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") })
            .filter { $0.count > 3 && $0.allSatisfy { $0.isUppercase || $0 == "_" || $0.isNumber } }
        return reasons.last.map { String($0) } ?? "handshake failed"
    }
}

/// A pooled connection that was closed before its transaction began.
struct StaleConnection: Error {}

struct PostgresSessionError: Error, CustomStringConvertible {
    var description: String
}
