import Foundation
import Testing

@Suite("gatehouse device and portal commands", .serialized)
struct MobileAuthCommandTests {
    @Test(
        "device enrol and listen answer what portal push starts: number matching, then PIN with signing, then a denial"
    )
    func listenAndPush() async throws {
        let directory = try scratchDirectory("gatehouse-push-test")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url, device, enrolled) = try await enrolledDevice(in: directory)
        defer { server.process.terminate() }
        #expect(enrolled.contains("enrolled for mobile authentication with push (events)"))

        let listen = try Session(["device", "listen", "--count", "3"] + device)
        _ = try await listen.waitFor("Listening for requests")
        let portal = ["portal", "push", "--server", url, "--client-secret", "example-portal-secret-change-me"]

        // Number matching: the portal shows a number, the user types it on the device.
        let login = try Session(portal + ["--user", "ann@example.com", "--type", "login"])
        let shown = try await login.waitFor("Number to type on the device: ")
        let number = try #require(
            shown.split(separator: "\n").first { $0.hasPrefix("Number to type") }?.split(separator: " ").last
        )
        _ = try await listen.waitFor("Type the number the website shows")
        listen.type(String(number))
        #expect(try await login.finish() == 0, "\(login.output.withLock { $0 }) \(login.errors.withLock { $0 })")
        #expect(login.output.withLock { $0 }.contains("Verdict: approved with confirmation."))

        // A payment with the PIN: the device shows the secure message and what it signs.
        let pay = try Session(
            portal + [
                "--user", "ann@example.com", "--type", "payment", "--message", "Pay 12 EUR?",
                "--secure-message", "12.00 EUR to Example Shop, order 1234", "--signing-data",
                "pay 12.00 EUR order 1234",
            ]
        )
        _ = try await listen.waitFor("12.00 EUR to Example Shop, order 1234")
        _ = try await listen.waitFor("PIN (")
        listen.type("258147")
        #expect(try await pay.finish() == 0, "\(pay.output.withLock { $0 }) \(pay.errors.withLock { $0 })")
        #expect(pay.output.withLock { $0 }.contains("Verdict: approved with pin; signature verified."))

        // A denial: the portal's command says so and exits 3.
        let refused = try Session(
            portal + ["--user", "ann@example.com", "--type", "login", "--message", "Sign in from Lagos?"]
        )
        _ = try await refused.waitFor("Number to type on the device: ")
        _ = try await listen.waitFor("Sign in from Lagos?")
        listen.type("r")
        #expect(try await refused.finish() == 3)
        #expect(refused.output.withLock { $0 }.contains("Verdict: denied (not_recognised)."))
        #expect(try await listen.finish() == 0, "\(listen.errors.withLock { $0 })")
        #expect(listen.output.withLock { $0 } == "Approved.\nApproved.\nDenied.\n")

        let unknown = try Session(portal + ["--user", "nobody@example.com", "--type", "login"])
        #expect(try await unknown.finish() == 1)
        #expect(unknown.errors.withLock { $0 }.contains("no device enrolled"))
    }

    @Test(
        "portal otp writes the code's QR code as a PNG; device scan of what zbarimg reads approves with the PIN, once"
    )
    func scanOTP() async throws {
        let zbarimg = "/usr/bin/zbarimg"
        guard FileManager.default.isExecutableFile(atPath: zbarimg) else {
            Issue.record("zbarimg is missing: run scripts/install-dependencies (it installs zbar-tools)")
            return
        }
        let directory = try scratchDirectory("gatehouse-otp-test")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url, device, _) = try await enrolledDevice(in: directory)
        defer { server.process.terminate() }

        let png = directory.appendingPathComponent("code.png")
        let portal = try Session([
            "portal", "otp", "--server", url, "--client-secret", "example-portal-secret-change-me", "--type",
            "payment-qr", "--secure-message", "12.00 EUR to Example Shop, order 1234", "--signing-data",
            "pay 12.00 EUR order 1234", "--qr-png", png.path,
        ])
        defer { if portal.process.isRunning { portal.process.terminate() } }
        let shown = try await portal.waitFor("QR code written to")
        let printed = try #require(shown.split(separator: "\n").first { $0.hasPrefix("Code: ") }?.dropFirst(6))

        // What a phone's camera reads from the picture is the code the portal printed.
        let decoder = try Session(["--raw", "-q", png.path], binary: zbarimg)
        #expect(try await decoder.finish() == 0, "\(decoder.errors.withLock { $0 })")
        let code = decoder.output.withLock { $0 }.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(code == String(printed))

        // A device listen on the same device meanwhile: a scanned code's request is the scan's
        // alone, never sent on the events channel, so the two do not race for it.
        let listen = try Session(["device", "listen"] + device)
        defer { listen.process.terminate() }
        _ = try await listen.waitFor("Listening for requests")
        try await Task.sleep(for: .seconds(2))  // past the connection's start

        let scan = try Session(["device", "scan", code] + device)
        _ = try await scan.waitFor("12.00 EUR to Example Shop, order 1234")
        _ = try await scan.waitFor("PIN (")
        // Claimed and pending while the PIN is asked: listen is shown nothing.
        try await Task.sleep(for: .seconds(3))
        #expect(!listen.errors.withLock { $0 }.contains("Request "), "\(listen.errors.withLock { $0 })")
        scan.type("258147")
        #expect(try await scan.finish() == 0, "\(scan.errors.withLock { $0 })")
        #expect(scan.output.withLock { $0 }.contains("Approved."))
        #expect(!scan.errors.withLock { $0 }.contains("alreadyHandled"))
        #expect(listen.process.isRunning, "\(listen.errors.withLock { $0 })")
        #expect(!listen.errors.withLock { $0 }.contains("Request ") && listen.output.withLock { $0 }.isEmpty)
        #expect(try await portal.finish() == 0, "\(portal.errors.withLock { $0 })")
        #expect(
            portal.output.withLock { $0 }.contains(
                "Verdict: approved with pin; signature verified; user ann@example.com."
            )
        )

        // The code is spent: scanning it again is refused before any PIN is asked.
        let again = try Session(["device", "scan", code] + device)
        #expect(try await again.finish() != 0)
        #expect(again.errors.withLock { $0 }.contains("alreadyHandled 9029"), "\(again.errors.withLock { $0 })")
        #expect(!again.output.withLock { $0 }.contains("PIN ("))
    }

    @Test("an idle device listen sleeps in the kernel: a handful of wake-ups in 5 s, not thousands")
    func idleListenSleeps() async throws {
        let directory = try scratchDirectory("gatehouse-idle-test")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, _, device, _) = try await enrolledDevice(in: directory)
        defer { server.process.terminate() }

        let listen = try Session(["device", "listen"] + device)
        defer { listen.process.terminate() }
        _ = try await listen.waitFor("Listening for requests")
        try await Task.sleep(for: .seconds(2))  // past the connection's start
        let pid = listen.process.processIdentifier
        let before = try ProcessCounters(pid)
        try await Task.sleep(for: .seconds(5))
        let after = try ProcessCounters(pid)
        #expect(listen.process.isRunning, "\(listen.errors.withLock { $0 })")
        // The busy loop this guards against woke the process thousands of times a second; idle,
        // a quiet channel (the server's keep-alive comes every 15 s) wakes it a few times.
        let wakeUps = after.contextSwitches - before.contextSwitches
        #expect(wakeUps < 200, "\(wakeUps) context switches in 5 s")
        #expect(after.cpuSeconds - before.cpuSeconds < 0.5, "\(after.cpuSeconds - before.cpuSeconds) s of CPU in 5 s")
    }

    @Test("the push-mobile-auth example runs the whole story in one process and exits 0")
    func example() async throws {
        let example = try Session([], binary: "push-mobile-auth")
        #expect(try await example.finish() == 0, "\(example.errors.withLock { $0 })")
        let output = example.output.withLock { $0 }
        for expected in [
            "portal: approved with confirmation", "phone shows the sealed details: €42.00 to Example Shop",
            "portal: approved with pin, signature verified", "portal: denied (not_recognised)",
            "gh_transaction_id — ids and the short message only",
            "portal: approved with pin by jane@example.com, who scanned it", "Done.",
        ] {
            #expect(output.contains(expected), "missing: \(expected)")
        }
        // The story only: no log line, unless --log-level asks for them.
        #expect(logLines(output + example.errors.withLock { $0 }).isEmpty)
        let verbose = try Session(["--log-level", "info"], binary: "push-mobile-auth")
        #expect(try await verbose.finish() == 0)
        #expect(!logLines(verbose.output.withLock { $0 } + verbose.errors.withLock { $0 }).isEmpty)
    }
}

/// A process's CPU time (user and system, /proc/PID/stat) and its threads' context switches
/// (voluntary and not, /proc/PID/task/*/status): each wake-up of a thread is one switch.
struct ProcessCounters {
    var cpuSeconds: Double
    var contextSwitches: Int

    init(_ pid: Int32) throws {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = stat[(stat.lastIndex(of: ")") ?? stat.startIndex)...].split(separator: " ")
        // After "pid (comm)": state is fields[1]; utime and stime are fields[12] and fields[13].
        cpuSeconds = Double((Int(fields[12]) ?? 0) + (Int(fields[13]) ?? 0)) / Double(sysconf(Int32(_SC_CLK_TCK)))
        contextSwitches = 0
        for thread in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8)
            else { continue }
            for line in status.split(separator: "\n") where line.contains("ctxt_switches:") {
                contextSwitches += Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
    }
}

/// A server with its state in `directory`, and a device there registered and enrolled for
/// mobile authentication over the command line; the device commands' arguments, and what
/// `device enrol` printed.
private func enrolledDevice(
    in directory: URL
) async throws -> (server: Session, url: String, device: [String], enrolled: String) {
    let (server, url) = try await startServer(in: directory)
    let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]
    try await registerOverCommandLine(device)
    let enrol = try Session(["device", "enrol"] + device)
    enrol.type("258147")
    #expect(try await enrol.finish() == 0, "\(enrol.errors.withLock { $0 })")
    return (server, url, device, enrol.output.withLock { $0 })
}
