import Foundation
import Testing

/// `gatehouse admin …` against `gatehouse serve` with Examples/manifests/server.yaml and two admin
/// clients: `helpdesk` (read and change) and `auditor` (read only).
@Suite("gatehouse admin commands", .serialized)
struct AdminCommandTests {
    static let helpdeskSecret = "helpdesk-secret-0123456789"
    static let auditorSecret = "auditor-secret-0123456789"

    @Test(
        """
        admin: a helpdesk finds ann by the start of her address, reads her device, revokes its sessions; the audit \
        trail shows her registration and login and the revocation by admin_client:helpdesk, and exports as JSON lines
        """
    )
    func helpdeskStory() async throws {
        let directory = try scratchDirectory("gatehouse-admin-test")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url, device, profile) = try await serverWithUser(in: directory)
        defer { server.process.terminate() }

        // Ann logs in with her PIN (an event of its own) and out: a second session, ended.
        let login = try Session(["login", "--profile", profile] + device)
        login.type("258147")
        #expect(try await login.finish() == 0, "\(login.errors.withLock { $0 })")

        let admin = try adminArguments(url, "helpdesk", Self.helpdeskSecret, in: directory)
        let found = try await run(["admin", "users", "--subject-prefix", "ANN@"] + admin)
        #expect(found.status == 0, "\(found.errors)")
        let table = found.output.split(separator: "\n")
        #expect(table.first?.hasPrefix("SUBJECT") == true, "\(found.output)")
        #expect(table.count == 2 && table[1].contains("ann@example.com") && table[1].contains("demo-api"))

        let json = try await run(["admin", "users", "--subject-prefix", "ann", "--json"] + admin)
        #expect(json.status == 0, "\(json.errors)")
        let users = try #require(try object(json.output)["users"] as? [[String: Any]])
        #expect(users.count == 1)
        #expect(users.first?["subject"] as? String == "ann@example.com")
        #expect(users.first?["profiles"] as? Int == 1)
        #expect((users.first?["last_used_at"] as? String)?.hasSuffix("Z") == true)

        let user = try await run(
            ["admin", "user", "--identity-provider", "demo-api", "--subject", "ann@example.com"] + admin
        )
        #expect(user.status == 0, "\(user.errors)")
        for expected in [
            "User ann@example.com (identity provider demo-api)", "Profile \(profile): app gatehouse-example",
            "Failed attempts: 0", "Authenticators:  pin (since ", "Push:            not enrolled",
            // The registration's session, revoked by the login, may be swept by the janitor already.
            "Sessions:        1 active of ", "Pending transactions: none",
        ] {
            #expect(user.output.contains(expected), "missing \(expected) in \(user.output)")
        }

        let revoked = try await run(["admin", "revoke-sessions", profile] + admin)
        #expect(revoked.status == 0, "\(revoked.errors)")
        #expect(revoked.output == "Revoked 1 active session of profile \(profile).\n")
        let after = try await run(
            ["admin", "user", "--identity-provider", "demo-api", "--subject", "ann@example.com", "--json"] + admin
        )
        let profiles = try #require(try object(after.output)["profiles"] as? [[String: Any]])
        let sessions = try #require(profiles.first?["sessions"] as? [[String: Any]])
        #expect(sessions.allSatisfy { $0["active"] as? Bool == false })

        // The trail, newest first: the admin's action in its client's name, then ann's own.
        let audit = try await run(["admin", "audit", "--user", "ann@example.com"] + admin)
        #expect(audit.status == 0, "\(audit.errors)")
        let lines = audit.output.split(separator: "\n")
        let events = lines.map { $0.components(separatedBy: "  ").dropFirst(2).first ?? "" }
        #expect(events == ["admin_revoke_sessions", "login", "registration"], "\(audit.output)")
        #expect(lines.first?.contains("by admin_client:helpdesk") == true)
        #expect(lines.first?.contains("demo-api/ann@example.com  profile \(profile)  sessions=1") == true)
        #expect(lines.last?.contains("by user") == true)

        let filtered = try await run(
            ["admin", "audit", "--event", "admin_revoke_sessions", "--actor", "admin_client:helpdesk", "--json"]
                + admin
        )
        let page = try object(filtered.output)
        let only = try #require(page["events"] as? [[String: Any]])
        #expect(only.count == 1 && only.first?["profile_id"] as? String == profile)
        #expect((only.first?["at"] as? String)?.hasSuffix("Z") == true)
        #expect(page["next_cursor"] == nil)

        // A page of one has a next one: --before continues it.
        let first = try await run(["admin", "audit", "--limit", "1"] + admin)
        #expect(first.output.contains("admin_revoke_sessions"))
        let hint = try #require(first.errors.firstMatch(of: #/add --before ([0-9]+)/#), "\(first.errors)")
        let older = try await run(["admin", "audit", "--limit", "1", "--before", String(hint.output.1)] + admin)
        #expect(older.output.contains("  login  "), "\(older.output)")

        // The export: every event, oldest first, one JSON object a line.
        let export = try await run(["admin", "audit", "export", "--since", "1d"] + admin)
        #expect(export.status == 0, "\(export.errors)")
        let records = try export.output.split(separator: "\n").map { try object(String($0)) }
        #expect(records.compactMap { $0["event"] as? String } == ["registration", "login", "admin_revoke_sessions"])
        #expect(records.compactMap { $0["seq"] as? Int } == records.compactMap { $0["seq"] as? Int }.sorted())
        #expect(export.errors.contains("Exported 3 events."))
        let resumed = try await run(
            ["admin", "audit", "export", "--after", String(records.first?["seq"] as? Int ?? 0)] + admin
        )
        #expect(resumed.output.split(separator: "\n").count == 2, "\(resumed.output)")
    }

    @Test(
        """
        admin refusals: a read-only client may read but not deregister (403, exit 1, the profile stays); a wrong \
        secret is 401 (exit 1); a secret file others may read, or no secret, is a usage error (64); no secret on \
        the command line
        """
    )
    func refusals() async throws {
        let directory = try scratchDirectory("gatehouse-admin-refusals")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url, _, profile) = try await serverWithUser(in: directory)
        defer { server.process.terminate() }

        let auditor = try adminArguments(url, "auditor", Self.auditorSecret, in: directory)
        let read = try await run(["admin", "users", "--profile", profile] + auditor)
        #expect(read.status == 0, "\(read.errors)")
        #expect(read.output.contains("ann@example.com"))
        let refused = try await run(["admin", "deregister", profile] + auditor)
        #expect(refused.status == 1)
        #expect(refused.output.isEmpty)
        #expect(
            refused.errors == "error: This request needs the scope admin:write. [HTTP 403 insufficient_scope]\n",
            "\(refused.errors)"
        )
        let still = try await run(["admin", "users", "--profile", profile] + auditor)
        #expect(still.output.contains("ann@example.com"), "the profile was deregistered: \(still.output)")

        let wrong = try adminArguments(url, "helpdesk", "not-the-helpdesk-secret", in: directory)
        let unauthorized = try await run(["admin", "users", "--subject-prefix", "ann"] + wrong)
        #expect(unauthorized.status == 1)
        #expect(unauthorized.errors.contains("The admin client's id or secret is not right. [HTTP 401 invalid_client]"))
        #expect(!unauthorized.errors.contains("not-the-helpdesk-secret"))

        // The secret from the environment instead of a file.
        let environment = try await run(
            ["admin", "users", "--subject", "ann@example.com", "--server", url, "--client-id", "helpdesk"],
            environment: ["GATEHOUSE_ADMIN_SECRET": Self.helpdeskSecret]
        )
        #expect(environment.status == 0, "\(environment.errors)")

        let helpdesk = try adminArguments(url, "helpdesk", Self.helpdeskSecret, in: directory)
        let missing = try await run(["admin", "disenrol", "NOSUCHPROFILE"] + helpdesk)
        #expect(missing.status == 1)
        #expect(missing.errors == "error: No profile has this id. [HTTP 404 profile_not_found]\n", "\(missing.errors)")
        let pin = try await run(["admin", "remove-authenticator", profile, "pin"] + helpdesk)
        #expect(pin.status == 1)
        #expect(pin.errors.contains("[HTTP 409 pin_cannot_be_removed]"))

        // Plain http to another machine is refused before anything is sent (a connection attempt
        // to this unroutable address would end 69, unreachable, instead).
        let remote = try await run(
            ["admin", "users", "--subject-prefix", "ann", "--server", "http://192.0.2.1:9", "--client-id", "helpdesk"],
            environment: ["GATEHOUSE_ADMIN_SECRET": Self.helpdeskSecret]
        )
        #expect(remote.status == 64, "\(remote.errors)")
        #expect(remote.errors.contains("plain http to another machine"), "\(remote.errors)")
        #expect(!remote.errors.contains(Self.helpdeskSecret))

        // A secret file others may read is refused before anything is sent, as ssh refuses such a key.
        let open = directory.appendingPathComponent("helpdesk.secret")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: open.path)
        let exposed = try await run(["admin", "users", "--subject-prefix", "ann"] + helpdesk)
        #expect(exposed.status == 64)
        #expect(exposed.errors.contains("may be read by others (permissions 644)"), "\(exposed.errors)")
        #expect(exposed.errors.contains("chmod 600"))

        let none = try await run(
            ["admin", "users", "--subject-prefix", "ann", "--server", url, "--client-id", "helpdesk"],
            environment: ["GATEHOUSE_ADMIN_SECRET": ""]
        )
        #expect(none.status == 64)
        #expect(none.errors.contains("never on the command line"), "\(none.errors)")
        let argument = try await run(
            ["admin", "users", "--subject-prefix", "ann", "--server", url, "--client-id", "helpdesk"]
                + ["--client-secret", Self.helpdeskSecret]
        )
        #expect(argument.status == 64, "a secret on the command line was taken")

        let unreachable = try await run(
            ["admin", "users", "--subject-prefix", "ann", "--server", "http://127.0.0.1:1", "--client-id", "helpdesk"],
            environment: ["GATEHOUSE_ADMIN_SECRET": Self.helpdeskSecret]
        )
        #expect(unreachable.status == 69, "\(unreachable.errors)")
    }
}

/// A server with two admin clients, and ann registered on a device there; the device commands'
/// arguments and her profile's id.
private func serverWithUser(
    in directory: URL
) async throws -> (server: Session, url: String, device: [String], profile: String) {
    let example = try String(
        contentsOf: packageRoot.appendingPathComponent("Examples/manifests/server.yaml"),
        encoding: .utf8
    )
    let admin = """
        server:
          admin:
            clients:
              - {id: helpdesk, secret: \(AdminCommandTests.helpdeskSecret), scopes: [admin:read, admin:write]}
              - {id: auditor, secret: \(AdminCommandTests.auditorSecret), scopes: [admin:read]}

        """
    let manifest = directory.appendingPathComponent("server.yaml")
    let range = try #require(example.range(of: "server:\n"))
    try example.replacingCharacters(in: range, with: admin).write(to: manifest, atomically: true, encoding: .utf8)
    let (server, url) = try await startServer(in: directory, manifest: ["--manifest", manifest.path])
    let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]
    let registered = try await registerOverCommandLine(device)
    let profile = try #require(
        registered.firstMatch(of: #/Registered profile ([A-Za-z0-9]+) /#).map { String($0.output.1) },
        "\(registered)"
    )
    return (server, url, device, profile)
}

/// `--server`, `--client-id` and a secret file only its owner may read.
private func adminArguments(_ url: String, _ client: String, _ secret: String, in directory: URL) throws -> [String] {
    let file = directory.appendingPathComponent("\(client).secret")
    _ = FileManager.default.createFile(atPath: file.path, contents: Data((secret + "\n").utf8))
    try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
    return ["--server", url, "--client-id", client, "--client-secret-file", file.path]
}

/// Runs `gatehouse` to its end: its status, standard output and standard error.
private func run(
    _ arguments: [String],
    environment: [String: String] = [:]
) async throws -> (status: Int32, output: String, errors: String) {
    let session = try Session(arguments, environment: environment)
    let status = try await session.finish()
    return (status, session.output.withLock { $0 }, session.errors.withLock { $0 })
}

/// A JSON object.
private func object(_ text: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
}
