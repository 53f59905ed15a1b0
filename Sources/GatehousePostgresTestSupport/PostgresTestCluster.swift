import Foundation
import GatehouseTesting

/// A private PostgreSQL server for tests: its own data directory in a temporary folder, on a
/// loopback port, started on first use and stopped when the process exits.
///
/// It needs the PostgreSQL server binaries (Debian's `postgresql` package;
/// `scripts/install-dependencies` installs it); ``start(durable:)`` says so when they are missing. Run
/// as root, it runs the server as the `postgres` user, since PostgreSQL refuses root. Each test
/// takes a fresh schema (``makeSchema(_:)``), so tests running at once share nothing.
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
    public static func shared() throws -> PostgresTestCluster { try SharedCluster.started.get() }

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
    public func makeSchema(_ prefix: String = "test") throws -> String {
        let name = "\(prefix)_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16))"
        try sql("CREATE SCHEMA \(name)")
        return name
    }

    /// Drops a schema made by ``makeSchema(_:)`` with everything in it.
    public func dropSchema(_ name: String) throws { try sql("DROP SCHEMA \(name) CASCADE") }

    /// Runs `statement` through `psql` in the test database; returns what it printed (unaligned).
    @discardableResult
    public func sql(_ statement: String, database: String? = nil) throws -> String {
        try Self.run(
            binaries.appendingPathComponent("psql"),
            [
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", "\(port)", "-U", user,
                "-d", database ?? self.database, "-c", statement,
            ],
            asServerUser: false
        )
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
    public static func start(durable: Bool = false, settings: [String] = []) throws -> PostgresTestCluster {
        let binaries = try serverBinaries()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-postgres-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let data = directory.appendingPathComponent("data")
        if getuid() == 0 { try run(URL(fileURLWithPath: "/bin/chown"), ["-R", "postgres:", directory.path]) }
        try run(
            binaries.appendingPathComponent("initdb"),
            ["-D", data.path, "-U", "gatehouse", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"],
            asServerUser: true
        )
        var lastError: (any Error)?
        for _ in 0..<5 {
            guard let port = LoopbackPort.free() else { throw PostgresTestClusterError("No free loopback port.") }
            do {
                // Durability is the operating system's business in a throwaway cluster: no fsync.
                let durability =
                    durable ? "" : "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                try run(
                    binaries.appendingPathComponent("pg_ctl"),
                    [
                        "-D", data.path, "-l", directory.appendingPathComponent("server.log").path, "-w", "-t", "60",
                        "-o",
                        "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 " + durability
                            + "-c max_connections=400" + settings.map { " -c " + $0 }.joined(),
                        "start",
                    ],
                    asServerUser: true
                )
                let cluster = PostgresTestCluster(port: port, directory: directory, binaries: binaries)
                try cluster.sql("CREATE DATABASE gatehouse_tests", database: "postgres")
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
    public func restart(_ mode: StopMode) throws {
        try Self.run(
            binaries.appendingPathComponent("pg_ctl"),
            [
                "-D", directory.appendingPathComponent("data").path, "-l",
                directory.appendingPathComponent("server.log").path, "-m", mode.rawValue, "-w", "-t", "60", "restart",
            ],
            asServerUser: true
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

    /// Stops the server at once and removes its files.
    public func stop() {
        _ = try? Self.run(
            binaries.appendingPathComponent("pg_ctl"),
            ["-D", directory.appendingPathComponent("data").path, "-m", "immediate", "-w", "stop"],
            asServerUser: true
        )
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

    /// Runs `executable` to its end; returns its output. Spawned by hand rather than with
    /// `Process`: the child gets only standard input, output and error (no descriptor of this
    /// process leaks into the server pg_ctl leaves running), and it is waited for by its pid.
    @discardableResult
    private static func run(_ executable: URL, _ arguments: [String], asServerUser: Bool = false) throws -> String {
        let command =
            asServerUser && getuid() == 0
            ? ["/usr/sbin/runuser", "-u", "postgres", "--", executable.path] + arguments
            : [executable.path] + arguments
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-pg-\(UUID()).out")
        defer { try? FileManager.default.removeItem(at: outputFile) }
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
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let printed = String(data: (try? Data(contentsOf: outputFile)) ?? Data(), encoding: .utf8) ?? ""
        // Exited normally with status 0 (the wait status holds the exit code in bits 8-15).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw PostgresTestClusterError("\(executable.lastPathComponent) failed (status \(status)): \(printed)")
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

/// The process's cluster: started once, stopped at exit.
private enum SharedCluster {
    static let started: Result<PostgresTestCluster, any Error> = {
        do {
            let cluster = try PostgresTestCluster.start()
            atexit {
                if case .success(let cluster) = SharedCluster.started { cluster.stop() }
            }
            return .success(cluster)
        } catch {
            return .failure(error)
        }
    }()
}
