import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The named statements prepared on one connection. The store runs the same few dozen
/// statements again and again; sent as unnamed statements, PostgreSQL parses, analyses and
/// plans each one on every run. Prepared once per connection (`PREPARE`), a run is an `EXECUTE`
/// of a plan PostgreSQL keeps.
///
/// `EXECUTE` is a utility statement, which takes no protocol-level parameters: its arguments
/// are written as literals (``literal(_:)``), each coerced to the type its statement declared.
/// postgres-nio's own prepared statements would need a Swift type for each statement and an
/// asynchronous call for each run, and remember a failed preparation on the connection for
/// good.
///
/// A statement is known by its SQL and its arguments' types (a NULL argument's type is
/// PostgreSQL's to infer, as an unnamed statement's is). Statements that cannot be prepared
/// (`BEGIN`, `COMMIT`) are kept too, with their placeholders numbered once. Past the
/// ``Policy/limit``, statements run unnamed.
///
/// Only the call holding the connection uses it; the lock is never contended.
final class PreparedStatements: Sendable {
    /// What every connection of a pool shares: the limit, and the generation that a statement
    /// found stale advances, so every connection prepares its statements afresh.
    final class Policy: Sendable {
        /// Statements a connection keeps at most; 0 prepares none.
        let limit: Int
        fileprivate let generation = Atomic<Int>(0)

        init(limit: Int) { self.limit = limit }
    }

    /// How a statement is sent.
    enum Form: Sendable {
        /// `EXECUTE name(…)`: prepared on this connection.
        case named(String)
        /// As it is, its `?` numbered, its arguments bound.
        case unnamed(String)
    }

    private struct Key: Hashable {
        var sql: String
        var types: String
    }

    private struct State {
        var forms: [Key: Form] = [:]
        var prepared = 0
        var generation = 0
        /// A statement failed because its results changed under its plan.
        var staleFound = false
    }

    private let policy: Policy
    private let state: Mutex<State>

    init(_ policy: Policy) {
        self.policy = policy
        state = Mutex(State(generation: policy.generation.load(ordering: .relaxed)))
    }

    /// How to send `sql` with `arguments`; prepares it on `connection` the first time.
    func form(
        of sql: String,
        _ arguments: SQLArguments,
        on connection: PooledConnection,
        logger: Logger
    ) throws -> Form {
        let key = Key(sql: sql, types: Self.types(arguments))
        if let known = state.withLock({ $0.forms[key] }) { return known }
        let numbered = PostgresSession.numberedPlaceholders(sql)
        let (full, name) = state.withLock { state -> (Bool, String?) in
            guard state.forms.count < policy.limit + 64 else { return (true, nil) }
            guard state.prepared < policy.limit, Self.isPreparable(sql) else { return (false, nil) }
            return (false, "gatehouse_\(state.prepared + 1)")
        }
        guard !full else { return .unnamed(numbered) }
        guard let name else {
            state.withLock { $0.forms[key] = .unnamed(numbered) }
            return .unnamed(numbered)
        }
        let parameters = key.types.isEmpty ? "" : "(\(key.types))"
        _ = try connection.query(
            PostgresQuery(unsafeSQL: "PREPARE \(name)\(parameters) AS \(numbered)"),
            logger: logger
        )
        let form = Form.named(name)
        state.withLock { state in
            state.forms[key] = form
            state.prepared += 1
        }
        return form
    }

    /// A statement failed with `error`: when its results changed under its plan (another
    /// instance's migration altered a table it reads: SQLSTATE 0A000 from the plan cache's
    /// revalidation, known by its routine since the message is translated), or its prepared
    /// statement is gone (26000: the connection is not the session that prepared it, as behind
    /// a transaction-mode pooler), every connection forgets its statements, and the call runs
    /// again (``takeStaleFinding()``).
    func failed(with error: PSQLError) {
        let state = error.serverInfo?[.sqlState]
        guard (state == "0A000" && error.serverInfo?[.routine] == "RevalidateCachedQuery") || state == "26000"
        else { return }
        self.state.withLock { $0.staleFound = true }
        policy.generation.add(1, ordering: .relaxed)
    }

    /// Whether a statement of the call that just ended was found stale (and resets it).
    func takeStaleFinding() -> Bool {
        state.withLock { state in
            defer { state.staleFound = false }
            return state.staleFound
        }
    }

    /// Before a call: when statements were found stale since this connection prepared its
    /// own, deallocates them all (it is outside any
    /// transaction now). A connection lost meanwhile is ``StaleConnection``: nothing ran.
    func forgetIfStale(on connection: PooledConnection, logger: Logger) throws {
        let current = policy.generation.load(ordering: .relaxed)
        guard state.withLock({ $0.generation != current }) else { return }
        do {
            _ = try connection.query(PostgresQuery(unsafeSQL: "DEALLOCATE ALL"), logger: logger)
        } catch {
            connection.close()
            throw StaleConnection()
        }
        state.withLock { state in
            state.forms = [:]
            state.prepared = 0
            state.generation = current
        }
    }

    /// The arguments' types as `PREPARE` declares them, as postgres-nio binds them.
    private static func types(_ arguments: SQLArguments) -> String {
        var types = ""
        for value in arguments.values {
            if !types.isEmpty { types += "," }
            switch value {
            case .null: types += "unknown"
            case .integer: types += "int8"
            case .double: types += "float8"
            case .text: types += "text"
            case .blob: types += "bytea"
            case .bool: types += "bool"
            }
        }
        return types
    }

    /// `EXECUTE name(…)` with `arguments` as literals; nil when a text argument holds NUL,
    /// which would end the query string early (bound instead, the server refuses it as
    /// invalid text).
    static func execute(_ name: String, _ arguments: SQLArguments) -> String? {
        guard !arguments.values.isEmpty else { return "EXECUTE " + name }
        var statement = "EXECUTE " + name + "("
        for (index, value) in arguments.values.enumerated() {
            if case .text(let text) = value, text.utf8.contains(0) { return nil }
            if index > 0 { statement += ", " }
            literal(value, into: &statement)
        }
        return statement + ")"
    }

    /// `value` as an SQL literal: an escape string (`E'…'`), in which the quote and the
    /// backslash are doubled, whatever the server's `standard_conforming_strings`; bytes are
    /// hexadecimal, numbers their shortest exact spelling. Quoted, a literal has no type until
    /// the statement's declared one reads it. Text holding NUL is never written (``execute(_:_:)``).
    static func literal(_ value: SQLValue, into text: inout String) {
        switch value {
        case .null: text += "NULL"
        case .integer(let integer): text += "'\(integer)'"
        case .double(let double): text += double.isNaN ? "'NaN'" : "'\(double)'"
        case .bool(let bool): text += bool ? "TRUE" : "FALSE"
        case .text(let string):
            text += "E'"
            for character in string.unicodeScalars {
                switch character {
                case "'": text += "''"
                case "\\": text += "\\\\"
                default: text.unicodeScalars.append(character)
                }
            }
            text += "'"
        case .blob(let data):
            text += "E'\\\\x"
            for byte in data {
                text.unicodeScalars.append(Self.hexDigits[Int(byte >> 4)])
                text.unicodeScalars.append(Self.hexDigits[Int(byte & 0x0F)])
            }
            text += "'"
        }
    }

    private static let hexDigits = Array("0123456789abcdef".unicodeScalars)

    /// `PREPARE` takes SELECT, INSERT, UPDATE, DELETE, MERGE and VALUES (WITH leads the first four).
    private static func isPreparable(_ sql: String) -> Bool {
        let word = sql.utf8.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\n") }.prefix {
            $0 >= UInt8(ascii: "A")
        }
        switch String(decoding: word, as: UTF8.self).uppercased() {
        case "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "MERGE": return true
        default: return false
        }
    }
}
