import Foundation
import GatehouseTesting
import Testing

/// `gatehouse register --identity-provider web --headless`: the hosted login signed in from the
/// terminal, for a machine without a desktop browser.
@Suite("register --headless: the browser identity provider from a terminal", .serialized)
struct HeadlessRegisterTests {
    /// A user ann@example.com ("correct horse") and `serve` with the example manifest on a free port.
    private func startLoginServer(in directory: URL) async throws -> (Session, String) {
        let database = directory.appendingPathComponent("server.sqlite").path
        let add = try Session(["users", "add", "--username", "ann@example.com", "--database", database])
        add.type("correct horse")
        add.type("correct horse")
        #expect(try await add.finish() == 0, "\(add.errors.withLock { $0 })")
        return try await startServer(in: directory, database: database)
    }

    @Test("at a terminal: the username, a wrong password refused and asked again, the password never shown")
    func atATerminal() async throws {
        let directory = try scratchDirectory("gatehouse-headless-tty")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url) = try await startLoginServer(in: directory)
        defer { server.process.terminate() }
        let register = [
            "register", "--identity-provider", "web", "--headless", "--server", url, "--data-dir",
            directory.appendingPathComponent("device").path,
        ]
        let terminal = try Session(
            ["-qfec", register.reduce("'\(try binary("gatehouse").path)'") { $0 + " '\($1)'" }, "/dev/null"],
            binary: "/usr/bin/script"
        )
        _ = try await terminal.waitFor("Username (e-mail address): ")
        terminal.type("ann@example.com")
        _ = try await terminal.waitFor("Password for ann@example.com: ")
        terminal.type("wrong horse")
        _ = try await terminal.waitFor("Wrong e-mail address or password.")
        _ = try await terminal.waitFor("Username (e-mail address): ")
        terminal.type("ann@example.com")
        // The second time: wait for the second password prompt, so the answer goes to it.
        for _ in 0..<400 where terminal.output.withLock({ $0 }).components(separatedBy: "Password for").count < 3 {
            try await Task.sleep(for: .milliseconds(50))
        }
        terminal.type("correct horse")
        _ = try await terminal.waitFor("Choose a PIN of 6 digits: ")
        terminal.type("258147")
        _ = try await terminal.waitFor("Type it again: ")
        terminal.type("258147")
        #expect(try await terminal.finish() == 0, "\(terminal.output.withLock { $0 })")
        let screen = terminal.output.withLock { $0 }
        #expect(screen.contains("Signing in with Example login at \(url)/login/."), "\(screen)")
        #expect(screen.contains("Registered profile") && screen.contains("with Example login."), "\(screen)")
        #expect(!screen.contains("horse"), "a password was echoed: \(screen)")
        #expect(!screen.contains("/login/authorize?"), "no browser address is needed: \(screen)")
    }

    @Test("from a script: --username, then the password and the PIN as lines of standard input")
    func fromAScript() async throws {
        let directory = try scratchDirectory("gatehouse-headless-script")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url) = try await startLoginServer(in: directory)
        defer { server.process.terminate() }
        let register = try Session(
            [
                "register", "--identity-provider", "web", "--headless", "--username", "Ann@Example.com", "--server",
                url, "--data-dir", directory.appendingPathComponent("device").path,
            ]
        )
        register.type("correct horse")
        register.type("258147")
        #expect(try await register.finish() == 0, "\(register.errors.withLock { $0 })")
        #expect(register.output.withLock { $0 }.contains("with Example login."))
        let profiles = try Session([
            "profiles", "--server", url, "--data-dir", directory.appendingPathComponent("device").path,
        ])
        #expect(try await profiles.finish() == 0)
        #expect(profiles.output.withLock { $0 }.contains("ann@example.com at identity provider web"))
    }

    @Test("without a desktop, register --identity-provider web prints the address and names --headless")
    func noDesktopNamesHeadless() async throws {
        let directory = try scratchDirectory("gatehouse-headless-hint")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url) = try await startLoginServer(in: directory)
        defer { server.process.terminate() }
        let register = try Session(
            [
                "register", "--identity-provider", "web", "--server", url, "--data-dir",
                directory.appendingPathComponent("device").path,
            ],
            environment: ["GATEHOUSE_NO_BROWSER": "1"]
        )
        defer { register.process.terminate() }
        let said = try await register.waitFor("run register again with --headless to sign in from this terminal.")
        #expect(said.contains("\(url)/login/authorize?"), "\(said)")
    }

    @Test("--username without --headless is a usage mistake")
    func usernameNeedsHeadless() async throws {
        let register = try Session(["register", "--username", "ann@example.com"])
        #expect(try await register.finish() == 64)
        #expect(register.errors.withLock { $0 }.hasPrefix("Error: --username goes with --headless.\nUsage: "))
    }
}
