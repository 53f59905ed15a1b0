import Foundation
import GatehouseTesting
import Synchronization
import Testing

@Suite("gatehouse command", .serialized)
struct GatehouseCommandTests {
    @Test("gatehouse demo runs every flow and exits 0")
    func demo() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-demo-test-\(UUID().uuidString)"
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        let demo = try Session(["demo", "--data-dir", directory.path])
        let status = try await demo.finish()
        let output = demo.output.withLock { $0 }
        #expect(status == 0, "\(demo.errors.withLock { $0 })")
        for expected in [
            "custom API, step 1",
            "PIN refused: This PIN is too common; choose another one. [PinValidation.blacklisted 9011]",
            "✓ registered profile", "✓ authenticated",
            "refused: The PIN is not correct. [Authentication.invalidPin 9009]",
            "(2 of 3 attempts left)", "✓ registered; the profile's authenticators: PIN, Face (simulated)",
            "✓ authenticated: the sensor matched",
            "← refused: The authenticator was deregistered; use the PIN. [Authentication.authenticatorDeregistered 9022]",
            "✓ authenticated with the PIN; the profile's authenticators: PIN",
            "✓ PIN changed", "GET /v1/resource/profile", "profiles left on the device: 0",
            "Done.",
        ] {
            #expect(output.contains(expected), "missing: \(expected)")
        }
        #expect(!output.contains("258147"))
        #expect(!output.contains("914736"))
        #expect(logLines(output + demo.errors.withLock { $0 }).isEmpty, "\(demo.errors.withLock { $0 })")
    }

    @Test("serve, then register, login, profiles and deregister over HTTP, with PINs on standard input")
    func serveAndDevice() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-cli-test-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url) = try await startServer(in: directory)
        defer { server.process.terminate() }
        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]

        let register = try Session(["register"] + device)
        _ = try await register.waitFor("E-mail address: ")
        register.type("ann@example.com")
        let prompt = try await register.waitFor("Code: ")
        let sent = try #require(prompt.range(of: "Code sent to "))
        let digits = try #require(prompt[sent.upperBound...].range(of: #"[0-9]{6}"#, options: .regularExpression))
        let code = String(prompt[digits])
        register.type(code)
        _ = try await register.waitFor("Choose a PIN of 6 digits: ")
        register.type("123456")
        _ = try await register.waitFor("That PIN cannot be used")
        register.type("258147")
        #expect(try await register.finish() == 0, "\(register.errors.withLock { $0 })")
        let registered = register.output.withLock { $0 }
        #expect(registered.hasPrefix("Registered profile "))
        let profile = String(registered.dropFirst("Registered profile ".count).prefix(6))

        let profiles = try Session(["profiles"] + device)
        #expect(try await profiles.finish() == 0)
        #expect(
            profiles.output.withLock { $0 }.hasPrefix(
                profile + "  ann@example.com at identity provider demo-api, registered "
            )
        )

        let login = try Session(["login", "--profile", profile] + device)
        login.type("000111")
        login.type("258147")
        #expect(try await login.finish() == 0, "\(login.errors.withLock { $0 })")
        #expect(login.errors.withLock { $0 }.contains("The PIN is not correct."))
        #expect(login.errors.withLock { $0 }.contains("PIN (2 attempts left): "))
        #expect(login.output.withLock { $0 }.contains("Authenticated profile \(profile) (subject ann@example.com"))

        let change = try Session(["change-pin", "--profile", profile] + device)
        for line in ["258147", "258147", "914736"] { change.type(line) }
        #expect(try await change.finish() == 0, "\(change.errors.withLock { $0 })")
        #expect(change.output.withLock { $0 }.contains("Changed the PIN of \(profile)."))
        let again = try Session(["login", "--profile", profile] + device)
        again.type("914736")
        #expect(try await again.finish() == 0, "\(again.errors.withLock { $0 })")

        let deregister = try Session(["deregister", "--profile", profile] + device)
        #expect(try await deregister.finish() == 0)
        #expect(deregister.output.withLock { $0 } == "Deregistered profile \(profile).\n")
        let none = try Session(["profiles"] + device)
        #expect(try await none.finish() == 0)
        #expect(none.output.withLock { $0 } == "No profiles on this device for \(url).\n")
    }

    @Test(
        "an integrator's own build with a third-party authenticator: serve, register it, log in with it, prefer, deregister"
    )
    func thirdPartyAuthenticator() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-totp-test-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let manifest = ["--manifest", "Examples/manifests/totp.yaml"]
        let (server, url) = try await startServer(in: directory, binary: "totp-gatehouse", manifest: manifest)
        defer { server.process.terminate() }
        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path] + manifest
        func run(_ arguments: [String], typing lines: [String] = []) async throws -> (String, String) {
            let session = try Session(arguments + device, binary: "totp-gatehouse")
            for line in lines { session.type(line) }
            let status = try await session.finish()
            let (output, errors) = (session.output.withLock { $0 }, session.errors.withLock { $0 })
            #expect(status == 0, "\(arguments): \(errors)")
            return (output, errors)
        }

        let register = try Session(["register"] + device, binary: "totp-gatehouse")
        _ = try await register.waitFor("E-mail address: ")
        register.type("ann@example.com")
        let prompt = try await register.waitFor("Code: ")
        let sent = try #require(prompt.range(of: "Code sent to "))
        let digits = try #require(prompt[sent.upperBound...].range(of: #"[0-9]{6}"#, options: .regularExpression))
        register.type(String(prompt[digits]))
        _ = try await register.waitFor("Choose a PIN of 6 digits: ")
        register.type("258147")
        #expect(try await register.finish() == 0, "\(register.errors.withLock { $0 })")
        let profile = String(register.output.withLock { $0 }.dropFirst("Registered profile ".count).prefix(6))

        let (before, _) = try await run(["authenticators", "list", "--profile", profile])
        #expect(before.contains("totp\tcustom\tOne-time code\tnot registered"))
        #expect(before.contains("pin\tpin\tPIN\tregistered, preferred"))
        // Log in with the PIN, the PIN again for the registration, then let the device make the secret.
        let (added, _) = try await run(
            ["authenticators", "register", "totp", "--profile", profile],
            typing: ["258147", "258147", ""]
        )
        #expect(added.contains("Registered totp."))
        // The service's protocol status is not for people: no "(status 2000)".
        #expect(!added.contains("(status"), "\(added)")
        // At a terminal the answer is a secret (the plugin's declared prompt): what the user types
        // is never shown.
        let terminal = try Session(
            [
                "-qfec",
                (["login", "--profile", profile, "--authenticator", "totp"] + device).reduce(
                    "'\(try binary("totp-gatehouse").path)'"
                ) { $0 + " '\($1)'" },
                "/dev/null",
            ],
            binary: "/usr/bin/script"
        )
        let asked = try await terminal.waitFor("(p for the PIN")
        // The prompt says how many attempts are left, as the PIN's does.
        #expect(asked.contains(#/One-time code, Answer \([0-9]+ attempts? left\) \(p for the PIN/#), "\(asked)")
        // The TOTP device half answers with its own code whatever is typed.
        terminal.type("314159")
        #expect(try await terminal.finish() == 0)
        let screen = terminal.output.withLock { $0 }
        #expect(screen.contains("Authenticated profile \(profile)"), "\(screen)")
        #expect(!screen.contains("314159"), "the typed answer was echoed: \(screen)")
        #expect(!screen.contains("(status"), "\(screen)")
        let (preferred, _) = try await run(["authenticators", "prefer", "totp", "--profile", profile])
        #expect(preferred.contains("totp is now preferred"))
        // Deregistering logs in with the preferred TOTP; choose the PIN instead, then confirm.
        let (removed, _) = try await run(
            ["authenticators", "deregister", "totp", "--profile", profile],
            typing: ["p", "258147", "y"]
        )
        #expect(removed.contains("Deregistered totp."))
        let (after, _) = try await run(["authenticators", "list", "--profile", profile, "--show", "registered"])
        #expect(after == "pin\tpin\tPIN\tregistered, preferred\n")
    }

    @Test(
        "pin-length-store keeps the length after a successful registration or change only, and drops it on deregistration"
    )
    func pinLengthStore() async throws {
        let example = try Session([], binary: "pin-length-store")
        #expect(try await example.finish() == 0, "\(example.errors.withLock { $0 })")
        let lines = example.output.withLock { $0 }.split(separator: "\n").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        for expected in [
            "stored length: 6", "PIN pad with 6 digits, 3 attempts left", "create-PIN pad with 5 digits",
            "change cancelled; stored length still: 6", "stored length: 5", "PIN pad with 5 digits, 1 attempt left",
            "deregistered (userDeregistered); stored length: none", "Done.",
        ] {
            #expect(lines.contains(expected), "missing: \(expected)")
        }
        #expect(logLines(example.output.withLock { $0 } + example.errors.withLock { $0 }).isEmpty)
    }

    @Test("xignin register, activate and list against gatehouse serve, retrying a refused e-mail")
    func xignin() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-xignin-cli-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url) = try await startServer(in: directory)
        defer { server.process.terminate() }
        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]

        let first = try Session(["xignin", "register", "--alias", "Laptop"] + device)
        _ = try await first.waitFor("Activation PIN (5–8 digits): ")
        first.type("12a45")
        _ = try await first.waitFor("Only numbers are allowed.")
        first.type("24680")
        _ = try await first.waitFor("email: ")
        first.type("ann@example")
        _ = try await first.waitFor("This is not a valid e-mail address.")
        first.type("ann@example.com")
        #expect(try await first.finish() == 0, "\(first.errors.withLock { $0 })")
        // The manager's URL derives from the address the server listens on (no managerURL is set).
        #expect(first.output.withLock { $0 }.contains("Registered at \(url)/xignin."))

        // The same address again: the manager refuses it, the command asks again.
        let second = try Session(["xignin", "register"] + device)
        second.type("13579")
        second.type("ann@example.com")
        _ = try await second.waitFor("email: notAvailable")
        second.type("bob@example.com")
        #expect(try await second.finish() == 0, "\(second.errors.withLock { $0 })")

        let outbox = directory.appendingPathComponent("xignin/outbox")
        let mails = try FileManager.default.contentsOfDirectory(atPath: outbox.path).sorted()
        #expect(mails.count == 2)
        let texts = try mails.map { try String(contentsOf: outbox.appendingPathComponent($0), encoding: .utf8) }
        let mail = try #require(texts.first { $0.contains("To: ann@example.com\r\n") })
        let code = try #require(mail.split(separator: "\r\n").first { $0.hasPrefix("Activation code: ") }).dropFirst(17)

        let activate = try Session(["xignin", "activate", "--code", String(code)] + device)
        activate.type("24680")
        #expect(try await activate.finish() == 0, "\(activate.errors.withLock { $0 })")
        #expect(activate.output.withLock { $0 } == "Activated \"Laptop\" at \(url)/xignin.\n")

        let list = try Session(["xignin", "list"] + device)
        #expect(try await list.finish() == 0)
        #expect(list.output.withLock { $0 }.hasPrefix("Laptop\t\(url)/xignin\t"))
    }

    @Test("the xignin-registration example walks the seed's flow and exits 0")
    func xigninExample() async throws {
        let run = try await ChildProcess.run(try binary("xignin-registration"))
        let text = run.outputText
        #expect(run.status == 0)
        // The story only: no log lines (the embedded server's warning about its keys among them).
        #expect(logLines(text + run.errorText).isEmpty)
        for expected in [
            "setPin(5 characters) → onlyNumbers", "email.setValue(\"jane@\") → invalid", "setAlias(\"J\") → tooShort",
            ".success(managerUrl: https://xign.example/)", "selection.info.email.error → notAvailable",
            "receives your_first_key=some data, your_second_key=some data", "activated \"Jane's phone\"", "Done.",
        ] {
            #expect(text.contains(expected), "missing: \(expected)")
        }
    }

    @Test("a bad manifest stops the server at start-up with one line")
    func badManifest() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-bad-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let manifest = directory.appendingPathComponent("server.yaml")
        try Data("server:\n  maxPinFailures: many\nauthenticators: [{id: pin, type: pin}]\n".utf8).write(to: manifest)
        let server = try Session([
            "serve", "--manifest", manifest.path, "--database", directory.appendingPathComponent("s.sqlite").path,
        ])
        #expect(try await server.finish() != 0)
        #expect(
            server.errors.withLock { $0 }.contains(
                "\(manifest.path): server.maxPinFailures: expected an integer, found \"many\""
            )
        )
    }
}
