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

    init(path: String) throws {
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
        try Self.migrator.migrate(pool)
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

    /// On the caller's thread: the store's reads are lookups of a few rows by key that take
    /// microseconds, less than a hop to a reader's queue and back. A read never suspends while
    /// it holds a connection, so readers and threads cannot end up waiting on each other.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
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

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "clients") { table in
                table.primaryKey("id", .text)
                table.column("app_id", .text).notNull()
                table.column("key_thumbprint", .text).notNull().unique()
                table.column("created_at", .double).notNull()
            }
            try db.create(table: "profiles") { table in
                table.primaryKey("id", .text)
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("identity_provider", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("key_thumbprint", .text).notNull()
                table.column("failures", .integer).notNull().defaults(to: 0)
                table.column("created_at", .double).notNull()
                table.uniqueKey(["client_id", "identity_provider", "subject"])
            }
            try db.create(table: "registrations") { table in
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade)
                table.column("authenticator", .text).notNull()
                table.column("data", .blob).notNull()
                table.column("created_at", .double).notNull()
                table.primaryKey(["profile_id", "authenticator"])
            }
            try db.create(table: "flows") { table in
                table.primaryKey("id", .text)
                table.column("kind", .text).notNull()
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("profile_id", .text)
                table.column("stage", .text).notNull()
                table.column("plugin", .text).notNull()
                table.column("session", .blob)
                table.column("attempt_reserved", .boolean).notNull().defaults(to: false)
                table.column("identity_provider", .text)
                table.column("scope", .text).notNull()
                table.column("profile_key", .text)
                table.column("subject", .text)
                table.column("key_thumbprint", .text).notNull()
                table.column("version", .integer).notNull().defaults(to: 0)
                table.column("expires_at", .double).notNull().indexed()
            }
            try db.create(table: "families") { table in
                table.primaryKey("id", .text)
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade).indexed()
                table.column("revoked", .boolean).notNull().defaults(to: false)
            }
            try db.create(table: "tokens") { table in
                table.column("hash", .blob).primaryKey()
                table.column("kind", .text).notNull()
                table.column("family", .text).notNull().references("families", onDelete: .cascade).indexed()
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade)
                table.column("key_thumbprint", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("expires_at", .double).notNull()
                table.column("used_at", .double)
                table.column("revoked", .boolean).notNull().defaults(to: false)
            }
            try db.create(table: "dpop_proofs") { table in
                table.primaryKey("jti", .text)
                table.column("expires_at", .double).notNull().indexed()
            }
        }
        // Flows follow the kernel's FlowMachine: its whole state is one column. Flows are
        // short-lived, so the old table is dropped rather than converted.
        migrator.registerMigration("v2-flow-machine") { db in
            try db.drop(table: "flows")
            try db.create(table: "flows") { table in
                table.primaryKey("id", .text)
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("profile_id", .text).indexed()
                table.column("identity_provider", .text)
                table.column("subject", .text)
                table.column("scope", .text).notNull()
                table.column("profile_key", .text)
                table.column("key_thumbprint", .text).notNull()
                table.column("state", .blob).notNull()
                // The state's attempt hold, kept apart so held attempts can be counted per profile.
                table.column("attempt", .text).notNull().defaults(to: "none")
                // When a held attempt lapses: a request that dies mid-way blocks nobody for long.
                table.column("held_until", .double)
                table.column("version", .integer).notNull().defaults(to: 0)
                table.column("expires_at", .double).notNull().indexed()
            }
            try db.create(index: "flows_profile_attempt", on: "flows", columns: ["profile_id", "attempt"])
        }
        migrator.registerMigration("v3-mobile-auth") { db in
            // A profile's mobile-auth enrolment: the device's HPKE key, the server's own for this
            // enrolment, and where its pushes go. A disenrolled row stays so its device learns why.
            try db.create(table: "mobile_enrolments") { table in
                table.primaryKey("profile_id", .text).references("profiles", onDelete: .cascade)
                // The user as the portal names them: a subject is unique per identity provider only.
                table.column("identity_provider", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("device_key", .blob).notNull()
                table.column("server_key", .blob).notNull()
                table.column("push_token", .text).unique()
                table.column("platform", .text)
                table.column("disenrolled", .boolean).notNull().defaults(to: false)
                table.column("created_at", .double).notNull()
            }
            try db.create(
                index: "mobile_enrolments_user",
                on: "mobile_enrolments",
                columns: ["identity_provider", "subject"]
            )
            // What the portal asked and what became of it. The secure message and the signing
            // data are never here: they live only inside each delivery's sealed payload.
            try db.create(table: "mobile_transactions") { table in
                table.primaryKey("id", .text)
                table.column("api_client", .text).notNull()
                table.column("identity_provider", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("type", .text).notNull()
                table.column("method", .text).notNull()
                table.column("message", .text).notNull()
                table.column("number", .integer)
                table.column("signing_data_hash", .blob)
                table.column("callback_uri", .text)
                // An outbox: `due` once the transaction ends with a callback to make, then `sent`
                // or `failed`; a restarted server picks up what is still due.
                table.column("callback_state", .text).notNull().defaults(to: "none").indexed()
                table.column("callback_attempts", .integer).notNull().defaults(to: 0)
                table.column("callback_next_at", .double)
                table.column("status", .text).notNull()
                table.column("reason", .text)
                table.column("answered_by", .text)
                table.column("authentication_method", .text)
                table.column("signature", .blob)
                table.column("user_public_key", .text)
                table.column("signature_verified", .boolean)
                table.column("created_at", .double).notNull()
                table.column("expires_at", .double).notNull()
                table.column("answered_at", .double)
            }
            try db.create(
                index: "mobile_transactions_user",
                on: "mobile_transactions",
                columns: ["identity_provider", "subject", "type"]
            )
            // The outbox's sweeps: lapsed pending transactions, and ended ones past their keeping.
            try db.create(
                index: "mobile_transactions_expiry",
                on: "mobile_transactions",
                columns: ["status", "expires_at"]
            )
            try db.create(index: "mobile_transactions_answered", on: "mobile_transactions", columns: ["answered_at"])
            // One sealed payload per asked device; `seq` orders the event channel.
            try db.create(table: "mobile_deliveries") { table in
                table.autoIncrementedPrimaryKey("seq")
                table.column("transaction_id", .text).notNull().references("mobile_transactions", onDelete: .cascade)
                table.column("profile_id", .text).notNull().indexed()
                table.column("sealed", .blob).notNull()
                table.column("nonce_hash", .blob).notNull()
                table.uniqueKey(["transaction_id", "profile_id"])
            }
            try db.alter(table: "flows") { table in table.add(column: "transaction_id", .text) }
        }
        migrator.registerMigration("v4-oauth") { db in
            // Secrets the server makes once and every instance shares (the DPoP nonce key).
            try db.create(table: "server_secrets") { table in
                table.primaryKey("name", .text)
                table.column("value", .blob).notNull()
            }
            // Device tokens (client credentials): bound to an installation's key, no user.
            try db.create(table: "client_tokens") { table in
                table.column("hash", .blob).primaryKey()
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade).indexed()
                table.column("key_thumbprint", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("issued_at", .double).notNull()
                table.column("expires_at", .double).notNull().indexed()
                table.column("revoked", .boolean).notNull().defaults(to: false)
            }
            try db.alter(table: "tokens") { table in table.add(column: "issued_at", .double) }
            // The single-use credential a session came from (an authorization code's hash): its
            // replay revokes exactly the families that carry it.
            try db.alter(table: "families") { table in
                table.add(column: "grant", .text)
                // Refresh tokens rotate by generation: only the current one is stored.
                table.add(column: "generation", .integer).notNull().defaults(to: 0)
            }
            try db.create(index: "families_grant", on: "families", columns: ["grant"])
            // The sweep looks installations up by what hangs off them.
            try db.create(index: "flows_client_id", on: "flows", columns: ["client_id"])
            try db.alter(table: "flows") { table in
                table.add(column: "stateless", .boolean).notNull().defaults(to: false)
            }
            try db.create(index: "tokens_expires_at", on: "tokens", columns: ["expires_at"])
            try db.create(index: "tokens_profile_id", on: "tokens", columns: ["profile_id"])
            // Profiles gain registration validity and stateless registrations. A stateless profile
            // lives beside the user's stored one on the same installation, so the uniqueness of
            // (installation, provider, subject) holds for stored profiles only: the table is
            // rebuilt to move it into a partial index (foreign keys are off while migrating).
            try db.create(table: "profiles_v4") { table in
                table.primaryKey("id", .text)
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("identity_provider", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("key_thumbprint", .text).notNull()
                table.column("failures", .integer).notNull().defaults(to: 0)
                table.column("created_at", .double).notNull()
                // Registration validity: the profile ends then (NULL: never).
                table.column("expires_at", .double).indexed()
                // A stateless registration: its session lives in the app's memory only.
                table.column("stateless", .boolean).notNull().defaults(to: false)
            }
            try db.execute(
                sql: """
                    INSERT INTO profiles_v4 (id, client_id, identity_provider, subject, scope, key_thumbprint, failures,
                        created_at)
                    SELECT id, client_id, identity_provider, subject, scope, key_thumbprint, failures, created_at
                    FROM profiles
                    """
            )
            try db.drop(table: "profiles")
            try db.rename(table: "profiles_v4", to: "profiles")
            try db.execute(
                sql: """
                    CREATE UNIQUE INDEX profiles_user ON profiles (client_id, identity_provider, subject)
                    WHERE stateless = 0
                    """
            )
            try db.create(index: "profiles_client_id", on: "profiles", columns: ["client_id"])
            // App-to-web single sign-on: one-time login tokens for a target URL, and the browser
            // sessions they open.
            try db.create(table: "web_login_tokens") { table in
                table.column("hash", .blob).primaryKey()
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade).indexed()
                table.column("target", .text).notNull()
                table.column("expires_at", .double).notNull().indexed()
            }
            try db.create(table: "web_sessions") { table in
                table.column("hash", .blob).primaryKey()
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade).indexed()
                table.column("expires_at", .double).notNull().indexed()
            }
        }
        migrator.registerMigration("v5-replayed-grants") { db in
            // Single-use credentials presented twice: a session finished from one afterwards is
            // refused, not issued (RFC 6749 §4.1.2), for as long as a flow may still finish.
            try db.create(table: "replayed_grants") { table in
                table.primaryKey("grant", .text)
                table.column("expires_at", .double).notNull().indexed()
            }
        }
        migrator.registerMigration("v6-web-session-origin") { db in
            // A web session lasts only as long as the app session (token family) it came from,
            // so login tokens and web sessions name it. Those open at the upgrade go: their
            // origin is unknown, and signing in again from the app costs the user one tap.
            try db.drop(table: "web_sessions")
            try db.drop(table: "web_login_tokens")
            for name in ["web_login_tokens", "web_sessions"] {
                try db.create(table: name) { table in
                    table.column("hash", .blob).primaryKey()
                    table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade).indexed()
                    table.column("family", .text).notNull().references("families", onDelete: .cascade).indexed()
                    if name == "web_login_tokens" { table.column("target", .text).notNull() }
                    table.column("expires_at", .double).notNull().indexed()
                }
            }
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
