import Foundation
import GatehouseTesting
import Synchronization

/// A private PostgreSQL server for tests: its own data directory in a temporary folder, on a
/// loopback port, started on first use and stopped when the process exits.
///
/// It needs the PostgreSQL server binaries (Debian's `postgresql` package;
/// `scripts/install-dependencies` installs it); ``start(durable:)`` says so when they are missing. Run
/// as root, it runs the server as the `postgres` user, since PostgreSQL refuses root. Each test
/// takes a fresh schema (``makeSchema(_:)``), so tests running at once share nothing.
///
/// Its commands (`initdb`, `pg_ctl`, `psql`) are waited for on threads of their own, never on
/// Swift's cooperative pool: the pool has one thread a core, and every loopback server of the test
/// process answers on it, so a start or a restart that held it would stall them all. Only
/// ``dropSchemaBlocking(_:)`` and ``stop()`` block, for cleanup in `defer`.
public final class PostgresTestCluster: Sendable {
    /// The loopback port it listens on.
    public let port: Int
    /// The database the tests' schemas are made in.
    public let database = "gatehouse_tests"
    /// The role the tests connect as, with no password (the server trusts loopback connections).
    public let user = "gatehouse"
    /// PostgreSQL's major version.
    public var version: String { binaries.deletingLastPathComponent().lastPathComponent }
    private let directory: URL
    private let binaries: URL

    /// The process's cluster, started on first use.
    public static func shared() async throws -> PostgresTestCluster {
        let starting = SharedCluster.starting.withLock { starting in
            if let starting { return starting }
            let started = Task {
                let cluster = try await PostgresTestCluster.start()
                SharedCluster.running.withLock { $0 = cluster }
                atexit { SharedCluster.running.withLock { $0 }?.stop() }
                return cluster
            }
            starting = started
            return started
        }
        return try await starting.value
    }

    /// The server's main process (its backends are its children), while it runs.
    public var postmasterPID: Int32? {
        let file = directory.appendingPathComponent("data/postmaster.pid")
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first.flatMap { Int32($0) }
    }

    /// A URL for `schema` in the test database (no TLS on loopback, `pool` connections).
    public func url(schema: String, pool: Int = 8) -> String {
        "postgres://\(user)@127.0.0.1:\(port)/\(database)?sslmode=disable&pool=\(pool)&schema=\(schema)"
    }

    /// Makes a new, empty schema and returns its name.
    public func makeSchema(_ prefix: String = "test") async throws -> String {
        let name = "\(prefix)_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16))"
        try await sql("CREATE SCHEMA \(name)")
        return name
    }

    /// Drops a schema made by ``makeSchema(_:)`` with everything in it.
    public func dropSchema(_ name: String) async throws { try await sql("DROP SCHEMA \(name) CASCADE") }

    /// ``dropSchema(_:)`` for cleanup in a `defer` or a synchronous closure: it blocks its thread
    /// until `psql` is done.
    public func dropSchemaBlocking(_ name: String) throws {
        let (pid, output) = try Self.spawn(psql("DROP SCHEMA \(name) CASCADE", database: nil))
        _ = try Self.finish("psql", status: Self.waitBlocking(pid), output: output)
    }

    /// Runs `statement` through `psql` in the test database; returns what it printed (unaligned).
    @discardableResult
    public func sql(_ statement: String, database: String? = nil) async throws -> String {
        try await Self.run(psql(statement, database: database))
    }

    private func psql(_ statement: String, database: String?) -> [String] {
        [
            binaries.appendingPathComponent("psql").path, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h",
            "127.0.0.1", "-p", "\(port)", "-U", user, "-d", database ?? self.database, "-c", statement,
        ]
    }

    private init(port: Int, directory: URL, binaries: URL) {
        self.port = port
        self.directory = directory
        self.binaries = binaries
    }

    /// Creates and starts a cluster of its own (see ``shared()`` for the process's one); stop it
    /// with ``stop()``. `durable`: fsync and synchronous commits as a production server has them
    /// (for measurements); otherwise off, as a throwaway test database can afford.
    /// `settings`: more `-c name=value` settings for the server (a profile's extension, say).
    public static func start(durable: Bool = false, settings: [String] = []) async throws -> PostgresTestCluster {
        let binaries = try serverBinaries()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-postgres-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let data = directory.appendingPathComponent("data")
        if getuid() == 0 { try await run(["/bin/chown", "-R", "postgres:", directory.path]) }
        try await run(
            asServerUser(
                binaries.appendingPathComponent("initdb"),
                ["-D", data.path, "-U", "gatehouse", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"]
            )
        )
        var lastError: (any Error)?
        for _ in 0..<5 {
            guard let port = LoopbackPort.free() else { throw PostgresTestClusterError("No free loopback port.") }
            do {
                // Durability is the operating system's business in a throwaway cluster: no fsync.
                let durability =
                    durable ? "" : "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                try await run(
                    asServerUser(
                        binaries.appendingPathComponent("pg_ctl"),
                        [
                            "-D", data.path, "-l", directory.appendingPathComponent("server.log").path, "-w", "-t",
                            "60", "-o",
                            "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 " + durability
                                + "-c max_connections=400" + settings.map { " -c " + $0 }.joined(),
                            "start",
                        ]
                    )
                )
                let cluster = PostgresTestCluster(port: port, directory: directory, binaries: binaries)
                try await cluster.sql("CREATE DATABASE gatehouse_tests", database: "postgres")
                return cluster
            } catch {
                lastError = error
            }
        }
        throw lastError ?? PostgresTestClusterError("The test cluster did not start.")
    }

    /// How ``restart(_:)`` stops the server (`pg_ctl -m`).
    public enum StopMode: String, Sendable, CaseIterable {
        /// Sessions are ended, transactions rolled back, a checkpoint written.
        case fast
        /// Every process is killed; the next start recovers from the write-ahead log, as after a crash.
        case immediate
    }

    /// Stops the server the way `mode` says and starts it again on the same port, waiting until
    /// it accepts connections.
    public func restart(_ mode: StopMode) async throws {
        try await Self.run(
            Self.asServerUser(
                binaries.appendingPathComponent("pg_ctl"),
                [
                    "-D", directory.appendingPathComponent("data").path, "-l",
                    directory.appendingPathComponent("server.log").path, "-m", mode.rawValue, "-w", "-t", "60",
                    "restart",
                ]
            )
        )
    }

    /// The server's processes: the postmaster and its children (backends and helpers).
    public var processIDs: [Int32] {
        guard let postmaster = postmasterPID else { return [] }
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        let children = processes.compactMap(Int32.init).filter { pid in
            // /proc/PID/stat: "pid (name) state ppid …"; the name may hold spaces, not ")".
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let closing = stat.lastIndex(of: ")")
            else { return false }
            let fields = stat[stat.index(after: closing)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == postmaster
        }
        return [postmaster] + children
    }

    /// Stops the server at once and removes its files. It blocks until `pg_ctl` is done, so that
    /// cleanup in a `defer` (or at exit) can call it.
    public func stop() {
        let command = Self.asServerUser(
            binaries.appendingPathComponent("pg_ctl"),
            ["-D", directory.appendingPathComponent("data").path, "-m", "immediate", "-w", "stop"]
        )
        if let (pid, output) = try? Self.spawn(command) {
            _ = try? Self.finish("pg_ctl", status: Self.waitBlocking(pid), output: output)
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// The newest installed PostgreSQL's server binaries (Debian keeps them by major version).
    private static func serverBinaries() throws -> URL {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        for version in versions.compactMap(Int.init).sorted(by: >) {
            let bin = root.appendingPathComponent("\(version)/bin")
            if FileManager.default.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        throw PostgresTestClusterError(
            "PostgreSQL's server is not installed (no /usr/lib/postgresql/*/bin/initdb): "
                + "run scripts/install-dependencies, or apt-get install postgresql"
        )
    }

    /// `executable` with `arguments`, run as the `postgres` user when this process is root
    /// (PostgreSQL refuses to run as root).
    private static func asServerUser(_ executable: URL, _ arguments: [String]) -> [String] {
        getuid() == 0
            ? ["/usr/sbin/runuser", "-u", "postgres", "--", executable.path] + arguments
            : [executable.path] + arguments
    }

    /// Runs `command` to its end, waited for on a thread of its own; returns what it printed.
    @discardableResult
    private static func run(_ command: [String]) async throws -> String {
        let (pid, output) = try spawn(command)
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread { continuation.resume(returning: waitBlocking(pid)) }.start()
        }
        return try finish(URL(fileURLWithPath: command[0]).lastPathComponent, status: status, output: output)
    }

    /// Starts `command` with its output and errors going to a temporary file. Spawned by hand
    /// rather than with `Process`: the child gets only standard input, output and error (no
    /// descriptor of this process leaks into the server pg_ctl leaves running).
    private static func spawn(_ command: [String]) throws -> (pid: pid_t, output: URL) {
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-pg-\(UUID()).out")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputFile.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // glibc 2.34+ has it; Swift's Glibc module does not declare it.
        if let closeFrom = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
            _ = unsafeBitCast(closeFrom, to: CloseFrom.self)(&actions, 3)
        }
        var argv = command.map { strdup($0) }
        argv.append(nil)
        defer { for argument in argv { free(argument) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw PostgresTestClusterError("\(command[0]) could not start (errno \(spawned)).")
        }
        return (pid, outputFile)
    }

    /// Waits for `pid` on the calling thread; returns its wait status.
    private static func waitBlocking(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return status
    }

    /// What the command printed, or its failure with what it printed; the output file goes.
    private static func finish(_ name: String, status: Int32, output: URL) throws -> String {
        defer { try? FileManager.default.removeItem(at: output) }
        let printed = String(data: (try? Data(contentsOf: output)) ?? Data(), encoding: .utf8) ?? ""
        // Exited normally with status 0 (the wait status holds the exit code in bits 8-15).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw PostgresTestClusterError("\(name) failed (status \(status)): \(printed)")
        }
        return printed
    }
}

/// The test cluster could not be set up or used: no free port, PostgreSQL did not start, or one of its commands failed.
public struct PostgresTestClusterError: Error, CustomStringConvertible {
    /// What failed, in words (with a failed command's output), as a test failure prints it.
    public var description: String
    init(_ description: String) { self.description = description }
}

/// The process's cluster: started once, by the first test that asks, and stopped at exit.
private enum SharedCluster {
    static let starting = Mutex<Task<PostgresTestCluster, any Error>?>(nil)
    static let running = Mutex<PostgresTestCluster?>(nil)
}
