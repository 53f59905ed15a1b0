import Foundation
import Testing

/// `gatehouse serve --host localhost` with Examples/manifests/helpdesk.yaml (the admin console
/// mounted, passkeys on a domain name), the operator alice@example.com and the user
/// ann@example.com in the login's directory, and a phone of ann's registered through the login.
/// With `GATEHOUSE_SCREENSHOTS` naming a folder, the browser's pictures are kept there
/// (docs/images holds the ones the README shows).
@Suite("The admin console in Chromium: the helpdesk story", .serialized)
struct AdminConsoleBrowserTests {
    static let password = "correct horse"
    static let pin = "258147"
    static let script = packageRoot.appendingPathComponent("scripts/browser-admin-console").path

    @Test(
        """
        helpdesk: an operator signs in with a passkey, finds ann by the start of her e-mail address, sees the lost \
        phone's profile and its two failed PIN sign-ins, revokes its sessions and deregisters it; the phone's next \
        request gets userDeregistered (9003), and the audit trail shows every step, the operator's (her sign-in too) \
        in her name
        """
    )
    func helpdeskStory() async throws {
        let directory = try scratchDirectory("gatehouse-helpdesk")
        defer { try? FileManager.default.removeItem(at: directory) }
        let manifest = packageRoot.appendingPathComponent("Examples/manifests/helpdesk.yaml").path
        let database = directory.appendingPathComponent("server.sqlite").path
        for username in ["alice@example.com", "ann@example.com"] {
            let add = try Session(
                ["users", "add", "--username", username, "--database", database, "--manifest", manifest]
            )
            add.type(Self.password)
            add.type(Self.password)
            #expect(try await add.finish() == 0, "\(add.errors.withLock { $0 })")
        }
        let (server, url) = try await startServer(
            in: directory,
            manifest: ["--manifest", manifest, "--host", "localhost"],
            database: database
        )
        defer { if server.process.isRunning { server.process.terminate() } }
        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("phone").path]

        // Ann's phone: registered through the hosted login, enrolled, then two wrong PINs.
        let register = try Session(
            ["register", "--identity-provider", "web", "--headless", "--username", "ann@example.com"] + device
        )
        register.type(Self.password)
        register.type(Self.pin)
        #expect(try await register.finish(within: 60) == 0, "\(register.errors.withLock { $0 })")
        let registered = register.output.withLock { $0 }
        let profile = try #require(
            registered.firstMatch(of: #/Registered profile ([A-Z0-9]+) /#).map { String($0.output.1) },
            "\(registered)"
        )
        let enrol = try Session(["device", "enrol", "--profile", profile] + device)
        enrol.type(Self.pin)
        #expect(try await enrol.finish() == 0, "\(enrol.errors.withLock { $0 })")
        let wrong = try Session(["login", "--profile", profile] + device)
        wrong.type("000111")
        wrong.type("000222")
        #expect(try await wrong.finish() != 0)
        #expect(wrong.errors.withLock { $0 }.contains("The PIN is not correct."))

        let screenshots =
            ProcessInfo.processInfo.environment["GATEHOUSE_SCREENSHOTS"]
            ?? directory.appendingPathComponent("screenshots").path
        let browser = try Session(
            [url, "alice@example.com", Self.password, "ann@", "--screenshots", screenshots],
            binary: Self.script
        )
        defer { if browser.process.isRunning { browser.process.terminate() } }
        #expect(try await browser.printed(after: "SIGNED-IN ", within: 90) == "alice@example.com · read and write")
        #expect(try await browser.printed(after: "PROFILE ", within: 30) == "\(profile) FAILURES 2")
        let events = try await browser.printed(after: "EVENTS ", within: 10).split(separator: ",")
        #expect(events.prefix(2) == ["login_failure", "login_failure"], "\(events)")
        #expect(events.contains("registration"), "\(events)")
        #expect(try await browser.printed(after: "REVOKED ", within: 30).contains("of profile \(profile)"))
        #expect(try await browser.printed(after: "DEREGISTERED ", within: 30) == profile)

        // The phone's next request: the seed's deregistration error, and the profile is gone there too.
        let next = try Session(["login", "--profile", profile] + device)
        next.type(Self.pin)
        #expect(try await next.finish() == 1)
        #expect(
            next.errors.withLock { $0 }.contains("[Generic.userDeregistered 9003]"),
            "\(next.errors.withLock { $0 })"
        )

        browser.type("audit")
        #expect(try await browser.finish(within: 60) == 0, "\(browser.errors.withLock { $0 })")
        let audit = browser.output.withLock { $0 }.split(separator: "\n").filter { $0.hasPrefix("AUDIT ") }
            .map { String($0.dropFirst("AUDIT ".count)) }
        #expect(
            audit == [
                "admin_deregister_profile|alice@example.com (operator)|ann@example.com",
                "admin_revoke_sessions|alice@example.com (operator)|ann@example.com",
                "operator_sign_in|alice@example.com (operator)|",
                // Her passkey, added with her password before she was let in: the trail shows it.
                "passkey_added|the user|alice@example.com", "login_failure|the user|ann@example.com",
                "login_failure|the user|ann@example.com", "login|the user|ann@example.com",
                "registration|the user|ann@example.com",
            ],
            "\(audit)"
        )

        for name in ["sign-in", "search", "user", "confirm", "done", "audit"] {
            let file = URL(fileURLWithPath: screenshots).appendingPathComponent("admin-console-\(name).png")
            let picture = try Data(contentsOf: file)
            #expect(picture.starts(with: [0x89, 0x50, 0x4E, 0x47]), "\(file.path) is not a PNG")
        }
    }
}

@Suite("gatehouse manifest check and serve read the adminConsole section")
struct AdminConsoleManifestTests {
    @Test(
        """
        helpdesk.yaml is valid; a console whose login client is missing is a configuration error at \
        adminConsole.loginClient for manifest check and for serve (78)
        """
    )
    func manifestCheck() async throws {
        let directory = try scratchDirectory("gatehouse-console-manifest")
        defer { try? FileManager.default.removeItem(at: directory) }
        let helpdesk = packageRoot.appendingPathComponent("Examples/manifests/helpdesk.yaml")
        let valid = try Session(["manifest", "check", helpdesk.path])
        #expect(try await valid.finish() == 0, "\(valid.errors.withLock { $0 })")
        let broken = directory.appendingPathComponent("broken.yaml")
        try String(contentsOf: helpdesk, encoding: .utf8)
            .replacingOccurrences(of: "loginClient: admin-console", with: "loginClient: nobody")
            .write(to: broken, atomically: true, encoding: .utf8)
        let check = try Session(["manifest", "check", broken.path])
        #expect(try await check.finish() == 78)
        #expect(check.errors.withLock { $0 }.contains("adminConsole.loginClient"), "\(check.errors.withLock { $0 })")
        let serve = try Session(
            [
                "serve", "--manifest", broken.path, "--port", "0", "--database",
                directory.appendingPathComponent("server.sqlite").path,
            ]
        )
        #expect(try await serve.finish() == 78)
        #expect(
            serve.errors.withLock { $0 }.contains("the login section has no client \"nobody\""),
            "\(serve.errors.withLock { $0 })"
        )
    }
}

extension Session {
    /// Waits (at most `seconds`) for a line of standard output starting with `prefix`; returns
    /// the rest of that line.
    fileprivate func printed(after prefix: String, within seconds: Int) async throws -> String {
        for _ in 0..<(seconds * 20) {
            let text = output.withLock { $0 }
            if let found = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                .first(where: { $0.hasPrefix(prefix) })
            {
                return String(found.dropFirst(prefix.count))
            }
            if !process.isRunning && output.isComplete { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw CocoaError(
            .fileReadUnknown,
            userInfo: [
                NSDebugDescriptionErrorKey: "no line \(prefix)…: \(output.withLock { $0 }) \(errors.withLock { $0 })"
            ]
        )
    }
}
