import Foundation
import Synchronization

/// Where the token server keeps its state: a SQLite file for one instance, or a PostgreSQL
/// database that several instances share.
public enum ServerDatabase: Sendable, Equatable, CustomStringConvertible {
    /// A SQLite database file; its folder must exist.
    case sqlite(path: String)
    /// A PostgreSQL database, shared by every instance that names it.
    case postgres(PostgresLocation)

    /// `postgres://…` or `postgresql://…` names a PostgreSQL database; anything else is a
    /// SQLite file's path.
    public init(_ text: String) throws {
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            self = .postgres(try PostgresLocation(url: text))
        } else {
            self = .sqlite(path: text)
        }
    }

    /// The file's path, or the URL without its password.
    public var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let location): location.description
        }
    }
}

/// A PostgreSQL database and how to reach it, from a URL:
/// `postgres://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]…]/DATABASE[?sslmode=disable|require&pool=N&schema=NAME&prepared=N&target_session_attrs=read-write|any&connect_timeout=S]`.
///
/// Several hosts (a primary and its standbys) are tried in order for every new connection, as
/// libpq does; with `target_session_attrs=read-write` (the default: every instance writes) a
/// host that accepts no writes, a standby still in recovery, is passed over. So after a standby
/// is promoted, the instances' new connections reach it (docs/CLUSTER.md, "A lost primary").
public struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    /// One of the database's servers.
    public struct Host: Sendable, Equatable, CustomStringConvertible {
        /// The server's host name or address.
        public var name: String
        /// The server's TCP port (default 5432).
        public var port: Int

        /// A server at `name` (a host name or an address) and `port`.
        public init(name: String, port: Int = 5432) {
            self.name = name
            self.port = port
        }

        /// `name:port`, an IPv6 address in brackets.
        public var description: String { (name.contains(":") ? "[\(name)]" : name) + ":\(port)" }
    }

    /// Which server a connection may settle on (libpq's `target_session_attrs`).
    public enum TargetSessions: String, Sendable, Equatable {
        /// One that accepts writes (`SHOW transaction_read_only` is off): a primary.
        case readWrite = "read-write"
        /// The first that accepts the connection, asked nothing.
        case any
    }

    /// The servers, tried in this order for every new connection; never empty.
    public var hosts: [Host]
    /// The first server's host name or address.
    public var host: String {
        get { hosts[0].name }
        set { hosts[0].name = newValue }
    }
    /// The first server's TCP port.
    public var port: Int {
        get { hosts[0].port }
        set { hosts[0].port = newValue }
    }
    /// Which server a connection may settle on; default ``TargetSessions/readWrite``.
    public var targetSessions: TargetSessions
    /// How long connecting to one server may take before the next is tried (default 10 s;
    /// `connect_timeout`, 1–60 s).
    public var connectTimeout: Duration
    /// The user the instances connect as, percent-decoded.
    public var username: String
    /// The user's password, percent-decoded; nil when the URL has none (the server then must
    /// accept the user without one).
    public var password: String?
    /// The database's name.
    public var database: String
    /// Whether the connection is encrypted (TLS, certificate verified). Off only when asked
    /// (`sslmode=disable`), for a database on the same host or network namespace.
    public var requireTLS: Bool
    /// Connections each instance keeps: one per change or lookup running at once.
    public var poolSize: Int
    /// The schema the tables live in (it must exist); nil for the user's default search path.
    public var schema: String?
    /// Named statements each connection keeps prepared (parsed and planned once, run again and
    /// again), default 256; 0 for none, behind a pooler that hands a session's transactions to
    /// different server connections (PgBouncer's transaction mode, which keeps only
    /// protocol-level prepared statements).
    public var preparedStatements: Int

    /// Reads a `postgres://` URL. TLS is on (`sslmode=require`, `verify-full` alike) unless
    /// `sslmode=disable`; `pool` is 1–512 (default 16). Throws a ``ServerDatabaseError`` when the
    /// URL names no host, user or database, or has any other option; the message never shows the
    /// password. `prepared` is 0–4096 (``preparedStatements``).
    public init(url text: String) throws {
        // URLComponents reads one host only, and misreads a password holding / ? or #: the user,
        // the password and the hosts are read here, and the rest (a stand-in host, the database,
        // the options) goes to URLComponents.
        let (user, password, hosts, rest) = try Self.splittingAuthority(text)
        guard let components = URLComponents(string: rest), components.host != nil else {
            throw ServerDatabaseError("\(Self.redacted(text)) is not a postgres://user@host/database URL")
        }
        guard !user.isEmpty else {
            throw ServerDatabaseError("\(Self.redacted(text)) names no user (postgres://USER@host/database)")
        }
        let name = String(components.path.drop(while: { $0 == "/" }))
        guard !name.isEmpty, !name.contains("/") else {
            throw ServerDatabaseError("\(Self.redacted(text)) names no database (postgres://user@host/DATABASE)")
        }
        self.hosts = hosts
        username = user.removingPercentEncoding ?? user
        self.password = password.map { $0.removingPercentEncoding ?? $0 }
        database = name
        requireTLS = true
        poolSize = 16
        preparedStatements = 256
        targetSessions = .readWrite
        connectTimeout = .seconds(10)
        for item in components.queryItems ?? [] {
            switch (item.name, item.value) {
            case ("sslmode", "disable"): requireTLS = false
            case ("sslmode", "require"), ("sslmode", "verify-full"): requireTLS = true
            case ("schema", let value?):
                guard !value.isEmpty, value.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                    throw ServerDatabaseError("schema=\(value): a schema name is letters, digits and _")
                }
                schema = value
            case ("pool", let value?):
                guard let size = Int(value), (1...512).contains(size) else {
                    throw ServerDatabaseError("pool=\(value): the pool size is a number from 1 to 512")
                }
                poolSize = size
            case ("prepared", let value?):
                guard let count = Int(value), (0...4096).contains(count) else {
                    throw ServerDatabaseError(
                        "prepared=\(value): the prepared statements a connection keeps are a number from 0 to 4096"
                    )
                }
                preparedStatements = count
            case ("target_session_attrs", let value?):
                guard let target = TargetSessions(rawValue: value) else {
                    throw ServerDatabaseError(
                        "target_session_attrs=\(value): Gatehouse takes read-write (a server that accepts writes, "
                            + "the default) or any"
                    )
                }
                targetSessions = target
            case ("connect_timeout", let value?):
                guard let seconds = Int(value), (1...60).contains(seconds) else {
                    throw ServerDatabaseError("connect_timeout=\(value): seconds, a number from 1 to 60")
                }
                connectTimeout = .seconds(seconds)
            default:
                // Its name only: an unknown option's value may be a secret (libpq takes password=).
                throw ServerDatabaseError(
                    "\(item.name)=…: the URL takes sslmode=disable|require, pool=N, schema=NAME, "
                        + "prepared=N, target_session_attrs=read-write|any and connect_timeout=S only"
                )
            }
        }
    }

    /// The URL without the password or the pool size, for logs and error messages.
    public var description: String {
        var options: [String] = []
        if !requireTLS { options.append("sslmode=disable") }
        if let schema { options.append("schema=\(schema)") }
        if targetSessions != .readWrite { options.append("target_session_attrs=\(targetSessions.rawValue)") }
        return "postgres://\(username)@\(hosts.map(\.description).joined(separator: ","))/\(database)"
            + (options.isEmpty ? "" : "?" + options.joined(separator: "&"))
    }

    /// The URL's user, password (both still percent-encoded) and hosts, and the URL with one
    /// stand-in host and no user in their place. The user's part ends at the URL's last @: a host
    /// never holds one, and a password may hold any character but that unencoded.
    private static func splittingAuthority(
        _ text: String
    ) throws -> (user: String, password: String?, hosts: [Host], rest: String) {
        let invalid = ServerDatabaseError("\(redacted(text)) is not a postgres://user@host/database URL")
        guard let schemeEnd = text.range(of: "://") else { throw invalid }
        let afterScheme = text[schemeEnd.upperBound...]
        guard let at = afterScheme.lastIndex(of: "@") else {
            throw ServerDatabaseError("\(redacted(text)) names no user (postgres://USER@host/database)")
        }
        let userInfo = afterScheme[..<at]
        let user = userInfo.firstIndex(of: ":").map { userInfo[..<$0] } ?? userInfo
        let password = userInfo.firstIndex(of: ":").map { String(userInfo[userInfo.index(after: $0)...]) }
        let hostsStart = afterScheme.index(after: at)
        let hostsEnd =
            afterScheme[hostsStart...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" })
            ?? afterScheme.endIndex
        var hosts: [Host] = []
        for entry in afterScheme[hostsStart..<hostsEnd].split(separator: ",", omittingEmptySubsequences: false) {
            guard let parsed = URLComponents(string: "postgres://\(entry)"), let name = parsed.host, !name.isEmpty,
                parsed.path.isEmpty, parsed.user == nil
            else {
                throw ServerDatabaseError(
                    "\(redacted(text)): \"\(entry)\" is not a host (HOST or HOST:PORT, hosts separated by commas)"
                )
            }
            // An IPv6 address without the brackets that set it apart in the URL.
            let bare = name.hasPrefix("[") && name.hasSuffix("]") ? String(name.dropFirst().dropLast()) : name
            hosts.append(Host(name: bare, port: parsed.port ?? 5432))
        }
        guard !hosts.isEmpty else { throw invalid }
        return (
            String(user), password, hosts,
            String(text[..<schemeEnd.upperBound] + "placeholder" + afterScheme[hostsEnd...])
        )
    }

    /// `text` with the password (between the user's `:` and the URL's last `@`) as `***`.
    private static func redacted(_ text: String) -> String {
        guard let schemeEnd = text.range(of: "://") else { return text }
        let afterScheme = text[schemeEnd.upperBound...]
        guard let at = afterScheme.lastIndex(of: "@"), let colon = afterScheme[..<at].firstIndex(of: ":") else {
            return text
        }
        return String(text[..<afterScheme.index(after: colon)] + "***" + afterScheme[at...])
    }
}

/// A database that cannot be used as given: a bad database URL, a migration group given twice or
/// misnamed, or a change the database did not carry out as the server expected.
public struct ServerDatabaseError: Error, CustomStringConvertible {
    /// What is wrong, in a sentence for the operator.
    public var description: String
    init(_ description: String) { self.description = description }
}

/// What an instance hears of the announcements every instance makes when its changes commit.
enum Announcement: Sendable, Equatable {
    case message(String)
    /// Announcements may have been missed (the listening connection was lost): whatever was
    /// kept on their strength must be dropped, and nothing kept until ``resumed``.
    case interrupted
    /// Listening again; what was missed meanwhile is not known.
    case resumed
}

/// The store's database: runs its changes and lookups, and carries announcements between the
/// instances sharing it.
protocol StorageEngine: Sendable {
    var dialect: SQLDialect { get }
    /// Runs `change` as one atomic, durable transaction and returns its result once durable.
    /// The change may run more than once (after a PostgreSQL deadlock); only its last
    /// run's `afterCommit` actions run.
    func write<T: Sendable>(_ change: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T
    /// Runs `body` in a read-only snapshot.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T
    /// Runs `body`, which reads with exactly one statement: a statement is a snapshot of its own,
    /// so on PostgreSQL it runs outside any explicit transaction (one round trip instead of three).
    /// A second statement is refused, as the bug in the store it would be.
    func readStatement<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T
    /// `handler` hears every announcement committed from now on, by any instance.
    func subscribe(_ handler: @escaping @Sendable (Announcement) -> Void)
    /// Closes the connections; nothing runs after.
    func shutdown() async
}

/// Who hears an engine's announcements.
final class AnnouncementSubscribers: Sendable {
    private let handlers = Mutex<[@Sendable (Announcement) -> Void]>([])

    func add(_ handler: @escaping @Sendable (Announcement) -> Void) { handlers.withLock { $0.append(handler) } }

    func hear(_ announcement: Announcement) {
        for handler in handlers.withLock({ $0 }) { handler(announcement) }
    }
}
