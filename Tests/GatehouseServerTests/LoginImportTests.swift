import Foundation
import GRDB
import GatehouseKernel
import GatehouseLogin
import GatehouseServer
import Logging
import Testing

@Suite("The hosted login's users from before it moved into the server's database")
struct LoginImportTests {
    /// `folder/login.sqlite` as the login kept it before: its own file, tables `users` and
    /// `attempts`, with `users`.
    private func earlierFile(in folder: URL, users: [(String, String)]) throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let queue = try DatabaseQueue(path: folder.appendingPathComponent("login.sqlite").path)
        try queue.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE users (username TEXT PRIMARY KEY NOT NULL, password_hash TEXT NOT NULL,
                        failed_logins INTEGER NOT NULL DEFAULT 0, locked_until DOUBLE, created_at DOUBLE NOT NULL)
                    """
            )
            try db.execute(
                sql: "CREATE TABLE attempts (username TEXT PRIMARY KEY NOT NULL, failed_logins INTEGER NOT NULL, "
                    + "locked_until DOUBLE, updated_at DOUBLE NOT NULL)"
            )
            for (name, hash) in users {
                try db.execute(
                    sql: "INSERT INTO users (username, password_hash, created_at) VALUES (?, ?, 1000)",
                    arguments: [name, hash]
                )
            }
        }
    }

    @Test("imported once on first start with their password hashes; a user already there is kept; the file is renamed")
    func importedOnce() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-import-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let hasher = PasswordHasher(logN: 10, blockSize: 8, parallelism: 1)
        let folder = directory.appendingPathComponent("login")
        try earlierFile(
            in: folder,
            users: [("ann@example.com", try hasher.hash("ann's password")), ("bob@example.com", "old bob hash")]
        )
        let storage = try await ServerStorage.open(
            .sqlite(path: directory.appendingPathComponent("server.sqlite").path),
            migrations: [LoginStore.migrations],
            logger: Logger(label: "import")
        )
        let store = try LoginStore(storage: storage)
        // Bob was added again (in the server's database) before the import: he keeps that entry.
        try await store.addUser("bob@example.com", passwordHash: "new bob hash", now: 2000)
        let configuration = try ConfigurationDecoder().decode(
            LoginConfiguration.self,
            from: .object([
                "clients": .list([
                    .object([
                        "id": .string("app"), "name": .string("App"), "redirectURIs": .list([.string("https://a/cb")]),
                    ])
                ]),
                "passwordCost": .integer(14),
            ])
        )
        let login = try LoginServer(configuration: configuration, storage: storage, environment: PluginEnvironment())

        #expect(try await login.importEarlierUsers(from: folder) == 1)
        #expect(try await login.usernames() == ["ann@example.com", "bob@example.com"])
        // Ann signs in with the password she had.
        guard
            case .check(let hash) = try await store.beginLogin(
                "ann@example.com",
                maxFailures: 5,
                lockout: 60,
                now: 3000
            )
        else {
            Issue.record("ann was not imported")
            return
        }
        #expect(PasswordHasher.verify("ann's password", against: hash))
        #expect(
            try await store.beginLogin("bob@example.com", maxFailures: 5, lockout: 60, now: 3000)
                == .check(passwordHash: "new bob hash")
        )
        // Once: the file is set aside, and the next start finds nothing to import.
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("login.sqlite").path))
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("login.sqlite.imported").path))
        #expect(try await login.importEarlierUsers(from: folder) == nil)
        await storage.shutdown()
    }
}
