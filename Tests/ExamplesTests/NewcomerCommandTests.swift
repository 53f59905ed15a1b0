import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("What a newcomer meets: one database per serve, manifest check, GATEHOUSE_SERVER, default profiles")
struct NewcomerCommandTests {
    @Test("A second serve on one SQLite database is refused with one line and status 75; the first keeps serving")
    func secondServeRefused() async throws {
        let directory = try scratchDirectory("gatehouse-lock")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (first, url) = try await startServer(in: directory)
        defer { first.process.terminate() }
        // What it serves is logged at start, the database named without secrets.
        let started = first.errors.withLock { $0 }
        let database = directory.appendingPathComponent("server.sqlite").path
        #expect(started.contains("Serving"), "\(started)")
        #expect(started.contains("database=\(database)") && started.contains("address=\(url)"), "\(started)")
        #expect(started.contains("manifest=Examples/manifests/server.yaml") && started.contains("version="))

        let second = try Session(["serve", "--database", database, "--port", "0"])
        #expect(try await second.finish() == 75)
        let errors = second.errors.withLock { $0 }
        #expect(
            errors
                == "error: the database \(database) is in use by another gatehouse serve (it holds \(database).lock); "
                + "stop that one first, or use PostgreSQL for several instances\n"
        )
        #expect(first.process.isRunning)
    }

    @Test("manifest check: a good file exits 0, a bad one prints serve's one line and exits 78")
    func manifestCheck() async throws {
        let directory = try scratchDirectory("gatehouse-check")
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = try Session(["manifest", "check", "Examples/manifests/server.yaml"], in: packageRoot)
        #expect(try await good.finish() == 0, "\(good.errors.withLock { $0 })")
        #expect(good.output.withLock { $0 } == "Examples/manifests/server.yaml: the manifest is valid.\n")

        let bad = directory.appendingPathComponent("bad.yaml")
        try """
        authenticators:
          - {id: pin, type: pin, config: {policy: {length: ten}}}
        identityProviders: []
        """.write(to: bad, atomically: true, encoding: .utf8)
        let check = try Session(["manifest", "check", bad.path], in: directory)
        #expect(try await check.finish() == 78)
        let line = check.errors.withLock { $0 }
        #expect(line.hasPrefix("error: \(bad.path): authenticators[0] (id \"pin\"): config.policy.length: "), "\(line)")
        #expect(line.split(separator: "\n").count == 1)

        // serve says the same of the same file.
        let serve = try Session(
            ["serve", "--manifest", bad.path, "--database", directory.appendingPathComponent("s.sqlite").path]
        )
        #expect(try await serve.finish() == 78)
        #expect(serve.errors.withLock { $0 }.hasSuffix(line))

        let placeholder = directory.appendingPathComponent("placeholder.yaml")
        try String(contentsOf: packageRoot.appendingPathComponent("Examples/manifests/server.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "${publicURL}/web/", with: "${publicUrl}/web/")
            .write(to: placeholder, atomically: true, encoding: .utf8)
        let unknown = try Session(["manifest", "check", placeholder.path], in: directory)
        #expect(try await unknown.finish() == 78)
        #expect(
            unknown.errors.withLock { $0 }.contains(
                "server.clients[0].webLoginTargets[0]: unknown placeholder \"${publicUrl}\"; the only one is ${publicURL}"
            ),
            "\(unknown.errors.withLock { $0 })"
        )
    }

    @Test("Device commands take GATEHOUSE_SERVER, need no --profile for one profile or a default, from any folder")
    func serverVariableAndDefaultProfile() async throws {
        let directory = try scratchDirectory("gatehouse-newcomer")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url) = try await startServer(in: directory)
        defer { server.process.terminate() }
        #expect(try #require(URL(string: url)?.port) != 8080)
        let elsewhere = directory.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        let data = ["--data-dir", elsewhere.appendingPathComponent("device").path]
        let environment = ["GATEHOUSE_SERVER": url]

        func run(_ arguments: [String], typing lines: [String] = []) async throws -> Session {
            let session = try Session(arguments + data, environment: environment, in: elsewhere)
            for line in lines { session.type(line) }
            _ = try await session.finish()
            return session
        }
        func register(_ email: String) async throws -> String {
            let register = try Session(["register"] + data, environment: environment, in: elsewhere)
            _ = try await register.waitFor("E-mail address: ")
            register.type(email)
            let prompt = try await register.waitFor("Code: ")
            let sent = try #require(prompt.range(of: "Code sent to "))
            let digits = try #require(prompt[sent.upperBound...].range(of: #"[0-9]{6}"#, options: .regularExpression))
            register.type(String(prompt[digits]))
            _ = try await register.waitFor("Choose a PIN of 6 digits: ")
            register.type("258147")
            #expect(try await register.finish() == 0, "\(register.errors.withLock { $0 })")
            return String(register.output.withLock { $0 }.dropFirst("Registered profile ".count).prefix(6))
        }

        let first = try await register("ann@example.com")
        let one = try await run(["login"], typing: ["258147"])
        #expect(one.process.terminationStatus == 0, "\(one.errors.withLock { $0 })")
        #expect(one.output.withLock { $0 }.contains("Authenticated profile \(first)"))

        let second = try await register("bob@example.com")
        let ambiguous = try await run(["login"])
        #expect(ambiguous.process.terminationStatus == 64)
        #expect(
            ambiguous.errors.withLock { $0 }
                == ("error: This device has 2 profiles for \(url): name one with --profile, "
                    + "or choose a default with `gatehouse profiles default ID`.\n")
        )

        let chosen = try await run(["profiles", "default", second])
        #expect(chosen.process.terminationStatus == 0, "\(chosen.errors.withLock { $0 })")
        let listed = try await run(["profiles"])
        #expect(listed.output.withLock { $0 }.contains("\(second)  bob@example.com at identity provider demo-api"))
        #expect(listed.output.withLock { $0 }.split(separator: "\n").filter { $0.hasSuffix(" *") }.count == 1)
        let login = try await run(["login"], typing: ["258147"])
        #expect(login.process.terminationStatus == 0, "\(login.errors.withLock { $0 })")
        #expect(login.output.withLock { $0 }.contains("Authenticated profile \(second)"))

        // --server still wins over the variable.
        let refused = try await run(["login", "--server", "http://127.0.0.1:1"])
        #expect(refused.process.terminationStatus == 69, "\(refused.errors.withLock { $0 })")
    }
}
