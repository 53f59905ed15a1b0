import Foundation
import GRDB
import GatehouseProtocol
public import Logging

/// The token server's database, opened: the engine the server's stores and its extensions'
/// stores share.
///
/// An integrator opens it first, with the ``MigrationGroup`` of every extension it mounts, builds
/// the extensions on it, then the ``TokenServer``
/// (``TokenServer/init(manifest:registry:storage:environment:extensions:pushTransports:metrics:)``),
/// and shuts it down last. So an extension's state is in the server's database (SQLite, or a
/// PostgreSQL database several instances share), each of its changes one transaction with the
/// same guarantees as the server's, and no extension opens a database of its own.
///
/// ```swift
/// let storage = try await ServerStorage.open(database, migrations: [LoginStore.migrations], logger: logger)
/// let login = try LoginServer(manifest: manifest, storage: storage, environment: environment)
/// let server = try await TokenServer(manifest: manifest, registry: registry, storage: storage,
///                                    environment: environment, extensions: [login])
/// …
/// await server.shutdown()
/// await storage.shutdown()
/// ```
public final class ServerStorage: Sendable {
    let engine: any StorageEngine
    /// The database, as it was named when opened.
    public let database: ServerDatabase
    /// The groups migrated at opening, by name.
    private let groups: Set<String>

    private init(engine: any StorageEngine, database: ServerDatabase, groups: [MigrationGroup]) {
        self.engine = engine
        self.database = database
        self.groups = Set(groups.map(\.name))
    }

    /// Opens `database`, brings it to this version's schema, then applies each group of
    /// `migrations` in order (each step once, whichever instance comes first on PostgreSQL).
    /// Throws a `DatabaseFailure` naming the database when it cannot be opened or migrated.
    public static func open(
        _ database: ServerDatabase,
        migrations groups: [MigrationGroup] = [],
        logger: Logger
    ) async throws -> ServerStorage {
        let steps = ServerSchema.migrations(with: try validated(groups))
        switch database {
        case .sqlite(let path):
            do {
                return ServerStorage(
                    engine: try SQLiteEngine(path: path, migrations: steps),
                    database: database,
                    groups: groups
                )
            } catch {
                throw DatabaseFailure.sqlite(path, .opening, error)
            }
        case .postgres(let location):
            do {
                let engine = try await PostgresEngine.open(location, migrations: steps, logger: logger)
                return ServerStorage(engine: engine, database: database, groups: groups)
            } catch {
                throw DatabaseFailure(database: location.description, reason: PostgresSession.reason(error))
            }
        }
    }

    private static func validated(_ groups: [MigrationGroup]) throws -> [MigrationGroup] {
        var names = Set<String>()
        for group in groups where !names.insert(group.name).inserted {
            throw ServerDatabaseError("The migration group \(group.name) is given twice")
        }
        return try groups.map { try $0.validated() }
    }

    /// The SQL the database speaks where SQLite and PostgreSQL differ.
    public var dialect: SQLDialect { engine.dialect }

    /// Throws unless `group` was applied when the storage was opened: a store built on a storage
    /// opened without its tables is a mistake in the integration, said as such.
    public func requireMigrated(_ group: MigrationGroup) throws {
        guard groups.contains(group.name) else {
            throw ServerDatabaseError(
                "The storage was opened without the migration group \(group.name): pass it to ServerStorage.open(…, "
                    + "migrations:)"
            )
        }
    }

    /// Runs `change` as one atomic, durable transaction and returns its result once durable. On
    /// SQLite it shares its commit with the changes that arrive with it; on PostgreSQL it runs at
    /// READ COMMITTED (each statement sees what was committed before it: a decision taken on a
    /// row read earlier needs that row locked, ``SQLDialect/lockingRows``, or a single conditional
    /// statement), and again from the start after a deadlock, so it must not act outside the
    /// database except in ``SQLSession/afterCommit(_:)``. A database that is busy or unreachable
    /// throws ``StorageUnavailable``. In a traced request it is a `db.write` span naming
    /// `function`, the method that asked for it.
    public func write<T: Sendable>(
        function: String = #function,
        _ change: @escaping @Sendable (any SQLSession) throws -> T
    ) async throws -> T {
        try await ServerTracing.database("db.write", engine.dialect, function: function) {
            try await Self.explained { try await engine.write(change) }
        }
    }

    /// Runs `body` in one read-only snapshot; in a traced request a `db.read` span naming `function`.
    public func read<T: Sendable>(
        function: String = #function,
        _ body: @escaping @Sendable (any SQLSession) throws -> T
    ) async throws -> T {
        try await ServerTracing.database("db.read", engine.dialect, function: function) {
            try await Self.explained { try await engine.read(body) }
        }
    }

    /// Closes the connections (PostgreSQL); nothing runs on the storage after. Called once
    /// everything built on it has stopped.
    public func shutdown() async { await engine.shutdown() }

    private static func explained<T>(_ work: () async throws -> T) async throws -> T {
        do {
            return try await work()
        } catch StoreRefusal.busy(let message) {
            throw StorageUnavailable(message: message)
        }
    }

    /// Reads the SQLite file at `path` of an earlier version (an extension's own database from
    /// before it moved onto the storage), to import from it once. What it holds is not changed
    /// (opening it may fold its write-ahead log into it).
    public static func readEarlierSQLiteFile<T>(at path: String, _ body: (any SQLSession) throws -> T) throws -> T {
        var configuration = Configuration()
        configuration.label = "gatehouse.import"
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        return try queue.read { db in try body(SQLiteSession(db, announcements: nil)) }
    }
}

/// The database is busy or unreachable (PostgreSQL): the request may be tried again.
public struct StorageUnavailable: Error, CustomStringConvertible {
    /// A sentence for the person who asked.
    public var message: String
    /// The message.
    public var description: String { message }
}
