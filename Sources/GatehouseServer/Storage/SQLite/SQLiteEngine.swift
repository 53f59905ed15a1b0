import Foundation
import GRDB
import GatehouseProtocol
import Synchronization

/// The store on SQLite (WAL, `synchronous=FULL`) through GRDB: one server instance per file.
///
/// Changes share durable commits (``GroupCommitWriter``); the write-ahead log is copied back
/// beside them (``WALCheckpointer``); lookups run on the caller's thread.
final class SQLiteEngine: StorageEngine {
    let dialect = SQLDialect.sqlite
    private let pool: DatabasePool
    /// Every change goes through it: changes that arrive together share a durable commit.
    private let writer: GroupCommitWriter
    private let checkpointer: WALCheckpointer
    private let subscribers = AnnouncementSubscribers()

    /// The database at `path`, brought to `migrations` (the server's schema, then its
    /// extensions' groups).
    init(path: String, migrations: [SchemaMigration] = ServerSchema.migrations) throws {
        var configuration = Configuration()
        configuration.label = "gatehouse.server"
        configuration.busyMode = .timeout(10)
        configuration.foreignKeysEnabled = true
        // More readers than the threads that read (`read` holds one only while it runs).
        configuration.maximumReaderCount = max(8, 2 * ProcessInfo.processInfo.activeProcessorCount)
        configuration.prepareDatabase { db in
            // Token lookups land on random pages of large indexes: a page cache of 16 MiB per
            // connection (SQLite's default is 2 MiB) and reads through mmap keep them off the
            // disk and out of read() copies once the table holds millions of rows.
            try db.execute(sql: "PRAGMA cache_size = -16384")
            try db.execute(sql: "PRAGMA mmap_size = 268435456")
        }
        // It holds the OPRF keys: readable by the server's user only.
        try PrivateFiles.prepareDatabase(at: path)
        pool = try DatabasePool(path: path, configuration: configuration)
        // Opening in WAL mode sets synchronous=NORMAL on the writer; tokens and counters need FULL.
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Checkpoints run beside the commits (WALCheckpointer), not inside one of them.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            // A log that grew under a burst is cut back when it starts again.
            try db.execute(sql: "PRAGMA journal_size_limit = 33554432")
        }
        let migrator = Self.migrator(migrations)
        let applied = try pool.read { db in try migrator.appliedIdentifiers(db) }
        if let unknown = ServerSchema.unknownStep(applied: applied, known: migrations) {
            throw ServerSchema.newerVersion(unknown)
        }
        try migrator.migrate(pool)
        let writer = GroupCommitWriter(pool: pool) { [subscribers] message in subscribers.hear(.message(message)) }
        self.writer = writer
        checkpointer = try WALCheckpointer(
            path: path,
            commits: { writer.committedGroups },
            requestRestart: { writer.requestCheckpoint() }
        )
    }

    func write<T: Sendable>(_ change: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await writer.write(change)
    }

    /// Changes waiting for the next group commit, and the groups committed so far: for the metrics.
    var groupCommits: (pending: Int, committed: Int) { (writer.pendingChanges, writer.committedGroups) }

    /// On the caller's thread: the store's reads are lookups of a few rows by key that take
    /// microseconds, less than a hop to a reader's queue and back. A read never suspends while
    /// it holds a connection, so readers and threads cannot end up waiting on each other.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try readNow(body)
    }

    /// A lookup costs no round trip here: the same as ``read(_:)``.
    func readStatement<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try readNow(body)
    }

    /// GRDB's blocking read (in an async function, its asynchronous one would be chosen).
    private func readNow<T>(_ body: (any SQLSession) throws -> T) throws -> T {
        try pool.read { db in try body(SQLiteSession(db, announcements: nil)) }
    }

    /// A change on the caller's thread, outside the group commit: for opening only.
    func writeNow<T>(_ change: (any SQLSession) throws -> T) throws -> T {
        try pool.write { db in try change(SQLiteSession(db, announcements: nil)) }
    }

    func subscribe(_ handler: @escaping @Sendable (Announcement) -> Void) { subscribers.add(handler) }

    func shutdown() async {}

    /// The server's schema (``ServerSchema``), and its extensions' groups, as GRDB migrations.
    static func migrator(_ migrations: [SchemaMigration] = ServerSchema.migrations) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in migrations {
            migrator.registerMigration(migration.identifier, migrate: migration.sqlite)
        }
        return migrator
    }

}

/// A GRDB connection inside one of the engine's transactions.
final class SQLiteSession: SQLSession {
    let db: Database
    /// Where this change's announcements go once committed; nil in a read.
    private let announcements: (@Sendable (String) -> Void)?
    /// What runs once the transaction has committed, in order.
    private(set) var committedActions: [@Sendable () -> Void] = []
    var dialect: SQLDialect { .sqlite }

    init(_ db: Database, announcements: (@Sendable (String) -> Void)?) {
        self.db = db
        self.announcements = announcements
    }

    // The store's SQL is fixed text, so each statement is compiled once per connection and reused
    // from GRDB's statement cache: compiling (and authorising) a statement costs more than running
    // one of these lookups.

    func execute(sql: String, arguments: SQLArguments) throws {
        try Self.mappingErrors { try db.cachedStatement(sql: sql).execute(arguments: Self.bind(arguments)) }
    }

    func fetchAll(sql: String, arguments: SQLArguments) throws -> [SQLRow] {
        try Self.mappingErrors {
            let statement = try db.cachedStatement(sql: sql)
            let columns = statement.columnNames
            let cursor = try Row.fetchCursor(statement, arguments: Self.bind(arguments))
            var rows: [SQLRow] = []
            while let row = try cursor.next() { rows.append(Self.row(row, columns: columns)) }
            return rows
        }
    }

    func fetchOne(sql: String, arguments: SQLArguments) throws -> SQLRow? {
        try Self.mappingErrors {
            let statement = try db.cachedStatement(sql: sql)
            let columns = statement.columnNames
            return try Row.fetchOne(statement, arguments: Self.bind(arguments)).map { Self.row($0, columns: columns) }
        }
    }

    var changesCount: Int { db.changesCount }

    func afterCommit(_ action: @escaping @Sendable () -> Void) { committedActions.append(action) }

    func announce(_ message: String) throws {
        guard let announcements else { throw ServerDatabaseError("This transaction cannot announce a change.") }
        afterCommit { announcements(message) }
    }

    private static func bind(_ arguments: SQLArguments) -> StatementArguments {
        StatementArguments(
            arguments.values.map { value -> DatabaseValue in
                switch value {
                case .null: .null
                case .integer(let integer): integer.databaseValue
                case .double(let double): double.databaseValue
                case .text(let text): text.databaseValue
                case .blob(let data): data.databaseValue
                case .bool(let bool): bool.databaseValue
                }
            }
        )
    }

    private static func row(_ row: Row, columns: [String]) -> SQLRow {
        SQLRow(
            columns: columns,
            values: (0..<row.count).map { index in
                switch (row[index] as DatabaseValue).storage {
                case .null: .null
                case .int64(let integer): .integer(integer)
                case .double(let double): .double(double)
                case .string(let text): .text(text)
                case .blob(let data): .blob(data)
                }
            }
        )
    }

    private static func mappingErrors<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DatabaseError
            where error.extendedResultCode == .SQLITE_CONSTRAINT_PRIMARYKEY
            || error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE
        {
            throw UniqueConstraintViolation(detail: error.message ?? "\(error.extendedResultCode)")
        }
    }
}
