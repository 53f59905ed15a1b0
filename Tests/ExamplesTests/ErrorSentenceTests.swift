import Foundation
import GRDB
import GatehousePostgresTestSupport
import GatehouseProtocol
import GatehouseTesting
import Testing

/// Every message a person sees is one sentence that names the file or address it is about: no
/// Swift type's description, no usage text for a failure that is not a usage mistake.
@Suite("Messages are sentences naming the file or address", .serialized)
struct ErrorSentenceTests {
    /// Runs `arguments` to the end; returns the status and what went to standard error.
    private func run(
        _ arguments: [String],
        typing lines: [String] = [],
        in directory: URL = packageRoot
    ) async throws -> (Int32, String) {
        let session = try Session(arguments, in: directory)
        for line in lines { session.type(line) }
        let status = try await session.finish()
        return (status, session.errors.withLock { $0 })
    }

    /// A file SQLite refuses: not a database.
    private func corruptFile(_ url: URL) throws {
        try Data(repeating: 0x47, count: 8192).write(to: url)
    }

    @Test("serve on a PostgreSQL address where nothing listens: the address and what to check, status 69")
    func postgresRefused() async throws {
        let directory = try scratchDirectory("gatehouse-pg-refused")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (status, errors) = try await run(
            [
                "serve", "--database", "postgres://nobody@127.0.0.1:1/x", "--manifest",
                "Examples/manifests/cluster.yaml", "--port", "0", "--log-level", "error",
            ]
        )
        #expect(status == 69)
        #expect(
            errors
                == "error: Cannot open the database postgres://nobody@127.0.0.1:1/x: nothing accepts connections at "
                + "127.0.0.1:1 (is PostgreSQL running and listening there?).\n"
        )
    }

    @Test("serve requiring TLS of a PostgreSQL server without it: says so and names the URL, status 69")
    func postgresWithoutTLS() async throws {
        let database = try await PostgresTestCluster.shared()
        // The test cluster has no TLS; a URL without sslmode=disable requires it.
        let url = "postgres://\(database.user)@127.0.0.1:\(database.port)/\(database.database)"
        let (status, errors) = try await run(
            [
                "serve", "--database", url, "--manifest", "Examples/manifests/cluster.yaml", "--port", "0",
                "--log-level", "error",
            ]
        )
        #expect(status == 69)
        #expect(
            errors
                == "error: Cannot open the database \(url): the server does not offer TLS, which the URL requires; add "
                + "sslmode=disable only if the database is on this host or a private network (docs/CLUSTER.md).\n"
        )
    }

    @Test("serve and users on a file that is not a SQLite database name the file, status 69")
    func sqliteNotADatabase() async throws {
        let directory = try scratchDirectory("gatehouse-corrupt")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("server.sqlite")
        try corruptFile(database)
        let (status, errors) = try await run(
            ["serve", "--database", database.path, "--port", "0", "--log-level", "error"]
        )
        #expect(status == 69)
        #expect(
            errors
                == "error: Cannot open the database \(database.path): it is not a SQLite database (another kind of "
                + "file, or a damaged one).\n"
        )

        // The hosted login's own file, beside it.
        let login = directory.appendingPathComponent("login")
        try FileManager.default.createDirectory(at: login, withIntermediateDirectories: true)
        try FileManager.default.removeItem(at: database)
        try corruptFile(login.appendingPathComponent("login.sqlite"))
        let (listed, said) = try await run(["users", "list", "--database", database.path])
        #expect(listed == 69)
        #expect(
            said
                == "error: Cannot open the database \(login.path)/login.sqlite: it is not a SQLite database (another "
                + "kind of file, or a damaged one).\n"
        )
    }

    @Test("a device command on a damaged device store names the file, status 69")
    func deviceStoreNotADatabase() async throws {
        let directory = try scratchDirectory("gatehouse-corrupt-device")
        defer { try? FileManager.default.removeItem(at: directory) }
        try corruptFile(directory.appendingPathComponent("client.sqlite"))
        let (status, errors) = try await run(["profiles", "--data-dir", directory.path])
        #expect(status == 69)
        #expect(
            errors
                == "error: Cannot open the database \(directory.path)/client.sqlite: it is not a SQLite database "
                + "(another kind of file, or a damaged one).\n"
        )
    }

    @Test("SQLite's refusal to write a read-only database becomes a sentence naming the file")
    func sqliteReadOnly() throws {
        let directory = try scratchDirectory("gatehouse-read-only")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("x.sqlite").path
        try DatabaseQueue(path: path).write { try $0.execute(sql: "CREATE TABLE t (x)") }
        var configuration = Configuration()
        configuration.readonly = true
        let readOnly = try DatabaseQueue(path: path, configuration: configuration)
        let thrown = #expect(throws: DatabaseError.self) {
            try readOnly.writeWithoutTransaction { try $0.execute(sql: "INSERT INTO t VALUES (1)") }
        }
        let failure = try #require(thrown.map { DatabaseFailure.sqlite(path, .using, $0) } as? DatabaseFailure)
        #expect(
            failure.description
                == "Cannot use the database \(path): it is read-only (the file, its folder or the file system); it "
                + "must be writable, and so must its folder, where SQLite keeps its -wal and -shm files."
        )
        // Errors that are not the database's pass through unchanged.
        #expect(DatabaseFailure.sqlite(path, .opening, CancellationError()) is CancellationError)
    }

    @Test("users add with two different passwords: one line, no usage text, status 64")
    func passwordsDiffer() async throws {
        let directory = try scratchDirectory("gatehouse-passwords")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (status, errors) = try await run(
            [
                "users", "add", "--username", "ann@example.com", "--database",
                directory.appendingPathComponent("s").path,
            ],
            typing: ["correct horse", "battery staple"]
        )
        #expect(status == 64)
        #expect(errors.hasSuffix("The same password again: error: The passwords differ.\n"), "\(errors)")
        #expect(!errors.contains("Usage:"))
    }

    @Test("device commands against a server that is down name its address in one line, status 69")
    func serverDown() async throws {
        let directory = try scratchDirectory("gatehouse-down")
        defer { try? FileManager.default.removeItem(at: directory) }
        let device = ["--server", "http://127.0.0.1:1", "--data-dir", directory.path]
        for command in [["register"], ["login", "--profile", "ABC123"], ["authenticators", "list", "--profile", "X"]] {
            let (status, errors) = try await run(command + device)
            #expect(status == 69, "\(command)")
            #expect(
                errors
                    == "error: The token server at http://127.0.0.1:1 could not be reached: the connection was refused "
                    + "(is the server running on that port?). [Generic.serverNotReachable 9001]\n",
                "\(command)"
            )
        }
    }

    @Test("register through the custom API shows what the API said, never its protocol status")
    func customRegistrationSaysWhatTheAPISaid() async throws {
        let directory = try scratchDirectory("gatehouse-api-said")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url) = try await startServer(in: directory)
        defer { server.process.terminate() }
        let register = try Session(
            ["register", "--server", url, "--data-dir", directory.appendingPathComponent("device").path]
        )
        _ = try await register.waitFor("E-mail address: ")
        register.type("ann@example.com")
        let prompt = try await register.waitFor("Code: ")
        let sent = try #require(prompt.range(of: "Code sent to ann@example.com: "))
        let code = String(prompt[sent.upperBound...].prefix(6))
        register.type("000000" == code ? "111111" : "000000")
        _ = try await register.waitFor("That code is not right.")
        register.type(code)
        _ = try await register.waitFor("Choose a PIN of 6 digits: ")
        register.type("258147")
        #expect(try await register.finish() == 0, "\(register.errors.withLock { $0 })")
        let screen = register.errors.withLock { $0 }
        #expect(screen.contains("Code sent to ann@example.com: \(code)\nCode: "), "\(screen)")
        #expect(!screen.contains("(status"), "\(screen)")
    }
}
