import Foundation

// The store's SQL runs on either engine through these few types: the statements are written once,
// in the dialect SQLite and PostgreSQL share (`?` placeholders, TRUE/FALSE, ON CONFLICT,
// RETURNING, quoted "grant"), and each engine binds and reads values in its own way.

/// A value bound to a statement or read from a row.
enum SQLValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case double(Double)
    case text(String)
    case blob(Data)
    case bool(Bool)
}

/// A Swift type the store binds and reads.
protocol SQLValueConvertible: Sendable {
    var sqlValue: SQLValue { get }
    /// Nil when the stored value is not one of this type.
    init?(sqlValue: SQLValue)
}

extension String: SQLValueConvertible {
    var sqlValue: SQLValue { .text(self) }
    init?(sqlValue: SQLValue) {
        guard case .text(let text) = sqlValue else { return nil }
        self = text
    }
}

extension Int64: SQLValueConvertible {
    var sqlValue: SQLValue { .integer(self) }
    init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .integer(let value): self = value
        case .bool(let value): self = value ? 1 : 0
        default: return nil
        }
    }
}

extension Int: SQLValueConvertible {
    var sqlValue: SQLValue { .integer(Int64(self)) }
    init?(sqlValue: SQLValue) {
        guard let value = Int64(sqlValue: sqlValue) else { return nil }
        self = Int(value)
    }
}

extension Double: SQLValueConvertible {
    var sqlValue: SQLValue { .double(self) }
    init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .double(let value): self = value
        // SQLite keeps a REAL that has no fraction as an integer when it can.
        case .integer(let value): self = Double(value)
        default: return nil
        }
    }
}

extension Bool: SQLValueConvertible {
    var sqlValue: SQLValue { .bool(self) }
    init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .bool(let value): self = value
        // SQLite's booleans are integers; `SELECT 1` answers an integer on both.
        case .integer(let value): self = value != 0
        default: return nil
        }
    }
}

extension Data: SQLValueConvertible {
    var sqlValue: SQLValue { .blob(self) }
    init?(sqlValue: SQLValue) {
        guard case .blob(let data) = sqlValue else { return nil }
        self = data
    }
}

/// A statement's arguments, in the order of its `?` placeholders.
struct SQLArguments: Sendable, ExpressibleByArrayLiteral {
    var values: [SQLValue]

    init(_ values: [SQLValue] = []) { self.values = values }

    init(arrayLiteral elements: (any SQLValueConvertible)?...) {
        values = elements.map { $0?.sqlValue ?? .null }
    }

    static func + (lhs: SQLArguments, rhs: SQLArguments) -> SQLArguments { SQLArguments(lhs.values + rhs.values) }
}

/// One row of a result, its columns by name.
struct SQLRow: Sendable {
    let columns: [String]
    let values: [SQLValue]

    func value(_ column: String) -> SQLValue {
        guard let index = columns.firstIndex(of: column) else { return .null }
        return values[index]
    }

    /// The column's value. The schema is the store's own: a column of another type is a bug in
    /// the store, reported as such.
    subscript<Value: SQLValueConvertible>(_ column: String) -> Value {
        let stored = value(column)
        guard let converted = Value(sqlValue: stored) else {
            preconditionFailure("Column \(column) holds \(stored), not \(Value.self)")
        }
        return converted
    }

    /// The column's value, nil when it is NULL.
    subscript<Value: SQLValueConvertible>(_ column: String) -> Value? {
        let stored = value(column)
        if stored == .null { return nil }
        guard let converted = Value(sqlValue: stored) else {
            preconditionFailure("Column \(column) holds \(stored), not \(Value.self)")
        }
        return converted
    }

    /// The first column's value, nil when it is NULL or not of this type.
    func first<Value: SQLValueConvertible>(as type: Value.Type) -> Value? {
        values.first.flatMap { Value(sqlValue: $0) }
    }
}

/// Which SQL an engine speaks where the two differ.
enum SQLDialect: Sendable {
    case sqlite
    case postgres

    /// Appended to a SELECT in a change: locks the rows it reads until the transaction ends
    /// (against other changes of them; not against foreign-key checks, which only need the
    /// row to stay). SQLite's changes run one at a time anyway.
    var lockingRows: String {
        switch self {
        case .sqlite: ""
        case .postgres: "FOR NO KEY UPDATE"
        }
    }

    /// A column that names one row of any table, for deletes in batches.
    var rowIdentifier: String {
        switch self {
        case .sqlite: "rowid"
        case .postgres: "ctid"
        }
    }
}

/// A change that broke a uniqueness constraint (a primary key or a unique index), on either engine.
struct UniqueConstraintViolation: Error, CustomStringConvertible {
    var detail: String
    var description: String { "Uniqueness constraint violated: \(detail)" }
}

/// One transaction of the store on its engine: a change (read-write) or a lookup (a read-only
/// snapshot). Used only on the thread that was handed it.
protocol SQLSession: AnyObject {
    var dialect: SQLDialect { get }
    func execute(sql: String, arguments: SQLArguments) throws
    func fetchAll(sql: String, arguments: SQLArguments) throws -> [SQLRow]
    func fetchOne(sql: String, arguments: SQLArguments) throws -> SQLRow?
    /// Rows the last statement inserted, changed or deleted.
    var changesCount: Int { get }
    /// Runs `action` once this transaction has committed; never if it is rolled back.
    func afterCommit(_ action: @escaping @Sendable () -> Void)
    /// Tells every server instance on this database `message` once this transaction has
    /// committed (this instance included, through its ``StorageEngine/onAnnouncement``).
    func announce(_ message: String) throws
}

extension SQLSession {
    func execute(sql: String) throws { try execute(sql: sql, arguments: []) }
}

extension SQLRow {
    static func fetchOne(_ db: any SQLSession, sql: String, arguments: SQLArguments = []) throws -> SQLRow? {
        try db.fetchOne(sql: sql, arguments: arguments)
    }

    static func fetchAll(_ db: any SQLSession, sql: String, arguments: SQLArguments = []) throws -> [SQLRow] {
        try db.fetchAll(sql: sql, arguments: arguments)
    }
}

extension SQLValueConvertible {
    /// The first column of the first row; nil when there is no row or the value is NULL.
    static func fetchOne(_ db: any SQLSession, sql: String, arguments: SQLArguments = []) throws -> Self? {
        try db.fetchOne(sql: sql, arguments: arguments)?.first(as: Self.self)
    }

    /// The first column of every row, NULLs left out.
    static func fetchAll(_ db: any SQLSession, sql: String, arguments: SQLArguments = []) throws -> [Self] {
        try db.fetchAll(sql: sql, arguments: arguments).compactMap { $0.first(as: Self.self) }
    }
}
