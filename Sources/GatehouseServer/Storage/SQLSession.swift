public import Foundation

// The stores' SQL runs on either engine through these few types: the statements are written once,
// in the dialect SQLite and PostgreSQL share (`?` placeholders, TRUE/FALSE, ON CONFLICT,
// RETURNING, quoted "grant"), and each engine binds and reads values in its own way. They are
// public for the server's extensions, whose stores run on the same engine (``ServerStorage``).

/// A value bound to a statement or read from a row.
public enum SQLValue: Sendable, Equatable {
    /// SQL NULL.
    case null
    /// A 64-bit integer (BIGINT on PostgreSQL).
    case integer(Int64)
    /// A double-precision number.
    case double(Double)
    /// Text (TEXT).
    case text(String)
    /// Bytes (BLOB on SQLite, BYTEA on PostgreSQL).
    case blob(Data)
    /// A boolean (an integer 0 or 1 on SQLite).
    case bool(Bool)
}

/// A Swift type a store binds to statements and reads from rows.
public protocol SQLValueConvertible: Sendable {
    /// The value as bound to a statement.
    var sqlValue: SQLValue { get }
    /// Nil when the stored value is not one of this type.
    init?(sqlValue: SQLValue)
}

extension String: SQLValueConvertible {
    /// The value as bound to a statement.
    public var sqlValue: SQLValue { .text(self) }
    /// Nil when the stored value is not of this type.
    public init?(sqlValue: SQLValue) {
        guard case .text(let text) = sqlValue else { return nil }
        self = text
    }
}

extension Int64: SQLValueConvertible {
    /// The value as bound to a statement.
    public var sqlValue: SQLValue { .integer(self) }
    /// Nil when the stored value is not of this type.
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .integer(let value): self = value
        case .bool(let value): self = value ? 1 : 0
        default: return nil
        }
    }
}

extension Int: SQLValueConvertible {
    /// The value as bound to a statement.
    public var sqlValue: SQLValue { .integer(Int64(self)) }
    /// Nil when the stored value is not of this type.
    public init?(sqlValue: SQLValue) {
        guard let value = Int64(sqlValue: sqlValue) else { return nil }
        self = Int(value)
    }
}

extension Double: SQLValueConvertible {
    /// The value as bound to a statement.
    public var sqlValue: SQLValue { .double(self) }
    /// Nil when the stored value is not of this type.
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .double(let value): self = value
        // SQLite keeps a REAL that has no fraction as an integer when it can.
        case .integer(let value): self = Double(value)
        default: return nil
        }
    }
}

extension Bool: SQLValueConvertible {
    /// The value as bound to a statement.
    public var sqlValue: SQLValue { .bool(self) }
    /// Nil when the stored value is not of this type.
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .bool(let value): self = value
        // SQLite's booleans are integers; `SELECT 1` answers an integer on both.
        case .integer(let value): self = value != 0
        default: return nil
        }
    }
}

extension Data: SQLValueConvertible {
    /// The value as bound to a statement.
    public var sqlValue: SQLValue { .blob(self) }
    /// Nil when the stored value is not of this type.
    public init?(sqlValue: SQLValue) {
        guard case .blob(let data) = sqlValue else { return nil }
        self = data
    }
}

/// A statement's arguments, in the order of its `?` placeholders: `[name, 3, nil]`.
public struct SQLArguments: Sendable, ExpressibleByArrayLiteral {
    /// The values, in order.
    public var values: [SQLValue]

    /// Arguments with these values, in order.
    public init(_ values: [SQLValue] = []) { self.values = values }

    /// Arguments from Swift values; nil binds NULL.
    public init(arrayLiteral elements: (any SQLValueConvertible)?...) {
        values = elements.map { $0?.sqlValue ?? .null }
    }

    /// The arguments of `lhs`, then those of `rhs`.
    public static func + (lhs: SQLArguments, rhs: SQLArguments) -> SQLArguments {
        SQLArguments(lhs.values + rhs.values)
    }
}

/// One row of a result, its columns by name.
public struct SQLRow: Sendable {
    /// The columns' names, in the statement's order.
    public let columns: [String]
    /// The columns' values, in the same order.
    public let values: [SQLValue]

    /// A row of these columns and values (engines make them).
    init(columns: [String], values: [SQLValue]) {
        self.columns = columns
        self.values = values
    }

    /// The column's value as stored; NULL for a column the row does not have.
    public func value(_ column: String) -> SQLValue {
        guard let index = columns.firstIndex(of: column) else { return .null }
        return values[index]
    }

    /// The column's value. The schema is the store's own: a column of another type is a bug in
    /// the store, reported as such.
    public subscript<Value: SQLValueConvertible>(_ column: String) -> Value {
        let stored = value(column)
        guard let converted = Value(sqlValue: stored) else {
            preconditionFailure("Column \(column) holds \(stored), not \(Value.self)")
        }
        return converted
    }

    /// The column's value, nil when it is NULL.
    public subscript<Value: SQLValueConvertible>(_ column: String) -> Value? {
        let stored = value(column)
        if stored == .null { return nil }
        guard let converted = Value(sqlValue: stored) else {
            preconditionFailure("Column \(column) holds \(stored), not \(Value.self)")
        }
        return converted
    }

    /// The first column's value, nil when it is NULL or not of this type.
    public func first<Value: SQLValueConvertible>(as type: Value.Type) -> Value? {
        values.first.flatMap { Value(sqlValue: $0) }
    }
}

/// Which SQL an engine speaks where the two differ.
public enum SQLDialect: Sendable {
    /// SQLite: one instance, its changes one at a time.
    case sqlite
    /// PostgreSQL: several instances, changes at once at READ COMMITTED.
    case postgres

    /// Appended to a SELECT in a change: locks the rows it reads until the transaction ends
    /// (against other changes of them; not against foreign-key checks, which only need the
    /// row to stay). SQLite's changes run one at a time anyway.
    public var lockingRows: String {
        switch self {
        case .sqlite: ""
        case .postgres: "FOR NO KEY UPDATE"
        }
    }

    /// Appended to the SELECT that picks rows a change claims (an outbox's due work): locks the
    /// rows it picks and passes over those another change holds, so instances claiming at once
    /// take different rows instead of waiting for each other (and never deadlock on the order
    /// they lock them in). SQLite's changes run one at a time anyway.
    public var claimingRows: String {
        switch self {
        case .sqlite: ""
        case .postgres: "FOR UPDATE SKIP LOCKED"
        }
    }

    /// A column that names one row of any table, for deletes in batches.
    public var rowIdentifier: String {
        switch self {
        case .sqlite: "rowid"
        case .postgres: "ctid"
        }
    }
}

/// A change that broke a uniqueness constraint (a primary key or a unique index), on either engine.
public struct UniqueConstraintViolation: Error, CustomStringConvertible {
    /// What the database said of it.
    public var detail: String
    /// A sentence naming the constraint.
    public var description: String { "Uniqueness constraint violated: \(detail)" }

    init(detail: String) { self.detail = detail }
}

/// One transaction on the storage's engine: a change (read-write) or a lookup (a read-only
/// snapshot). Used only on the thread that was handed it, and only while the closure it was
/// handed to runs.
public protocol SQLSession: AnyObject {
    /// The SQL the engine speaks where the two differ.
    var dialect: SQLDialect { get }
    /// Runs one statement.
    func execute(sql: String, arguments: SQLArguments) throws
    /// Every row the statement answers.
    func fetchAll(sql: String, arguments: SQLArguments) throws -> [SQLRow]
    /// The statement's first row, nil when it answers none.
    func fetchOne(sql: String, arguments: SQLArguments) throws -> SQLRow?
    /// Rows the last statement inserted, changed or deleted.
    var changesCount: Int { get }
    /// Runs `action` once this transaction has committed; never if it is rolled back.
    func afterCommit(_ action: @escaping @Sendable () -> Void)
    /// Tells every server instance on this database `message` once this transaction has
    /// committed (this instance included). Only the token server's own stores listen.
    func announce(_ message: String) throws
}

extension SQLSession {
    /// Runs one statement that takes no arguments.
    public func execute(sql: String) throws { try execute(sql: sql, arguments: []) }
}

extension SQLRow {
    /// The statement's first row, nil when it answers none.
    public static func fetchOne(_ db: any SQLSession, sql: String, arguments: SQLArguments = []) throws -> SQLRow? {
        try db.fetchOne(sql: sql, arguments: arguments)
    }

    /// Every row the statement answers.
    public static func fetchAll(_ db: any SQLSession, sql: String, arguments: SQLArguments = []) throws -> [SQLRow] {
        try db.fetchAll(sql: sql, arguments: arguments)
    }
}

extension SQLValueConvertible {
    /// The first column of the first row; nil when there is no row or the value is NULL.
    public static func fetchOne(_ db: any SQLSession, sql: String, arguments: SQLArguments = []) throws -> Self? {
        try db.fetchOne(sql: sql, arguments: arguments)?.first(as: Self.self)
    }

    /// The first column of every row, NULLs left out.
    public static func fetchAll(_ db: any SQLSession, sql: String, arguments: SQLArguments = []) throws -> [Self] {
        try db.fetchAll(sql: sql, arguments: arguments).compactMap { $0.first(as: Self.self) }
    }
}
