import Foundation
import GatehouseProtocol
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization

/// A change or lookup's transaction on one connection, on the engine's pool thread.
final class PostgresSession: SQLSession {
    /// Its statements end at the deadline of the call holding it (``PooledConnection/arm(until:)``).
    private let connection: PooledConnection
    private let logger: Logger
    /// Where announcements go, the instance's id and its own subscribers, in a change; nil in a lookup.
    private let announcing: (channel: String, instanceID: String, hearOwn: @Sendable (String) -> Void)?
    /// At most this many statements (a lookup outside a transaction has one), or any number.
    private let statementLimit: Int?
    private var statementsRun = 0
    private(set) var changesCount = 0
    private(set) var committedActions: [@Sendable () -> Void] = []
    var dialect: SQLDialect { .postgres }

    init(
        _ connection: PooledConnection,
        logger: Logger,
        announcing: (channel: String, instanceID: String, hearOwn: @Sendable (String) -> Void)?,
        statementLimit: Int? = nil
    ) {
        self.statementLimit = statementLimit
        self.connection = connection
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
        statementsRun += 1
        if let statementLimit, statementsRun > statementLimit {
            throw ServerDatabaseError("A lookup outside a transaction ran more than \(statementLimit) statement(s).")
        }
        do {
            let query =
                switch try connection.statements.form(of: sql, arguments, on: connection, logger: logger) {
                case .named(let name):
                    PreparedStatements.execute(name, arguments).map { PostgresQuery(unsafeSQL: $0) }
                        ?? PostgresQuery(unsafeSQL: Self.numberedPlaceholders(sql), binds: Self.bindings(arguments))
                case .unnamed(let numbered): PostgresQuery(unsafeSQL: numbered, binds: Self.bindings(arguments))
                }
            let result = try connection.query(query, logger: logger)
            changesCount = result.metadata.rows ?? 0
            return result
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            throw UniqueConstraintViolation(detail: error.serverInfo?[.message] ?? "unique_violation")
        } catch let error as PSQLError {
            connection.statements.failed(with: error)
            throw error
        }
    }

    private static func bindings(_ arguments: SQLArguments) -> PostgresBindings {
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
        return binds
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
}
