import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `gatehouse serve --database postgres://…` with Examples/manifests/server.yaml, twice, on one
/// database behind HAProxy: what a user does through the one address works whichever instance
/// answers each request, because everything a flow keeps between requests is in the database.
@Suite("Two gatehouse serve instances behind HAProxy on one PostgreSQL database", .serialized)
struct TwoInstanceTests {
    @Test(
        "both instances start with server.yaml, requests through HAProxy reach both, a device registers and logs in"
    )
    func bothInstancesServe() async throws {
        let pair = try await BalancedInstances.start("two_serve")
        defer { pair.stop() }

        // Round robin, one request at a time, on one kept-alive connection: five each, as each
        // instance counts them itself.
        let before = try await pair.answered("GET", "/health")
        let client = BalancedInstances.session()
        defer { client.finishTasksAndInvalidate() }
        let health = try #require(URL(string: pair.url + "/health"))
        for _ in 0..<10 {
            let (_, response) = try await client.data(from: health)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
        }
        let after = try await pair.answered("GET", "/health")
        for instance in BalancedInstances.Instance.allCases {
            #expect(
                (after[instance] ?? 0) - (before[instance] ?? 0) == 5,
                "\(instance) answered \(before[instance] ?? 0) → \(after[instance] ?? 0) of 10: \(pair.routed())"
            )
            // The example's XignIn manager is mounted at each, as its hosted login is (the
            // browser test signs in there).
            let manager = try #require(
                pair.instanceURLs[instance].flatMap { URL(string: $0 + "/xignin/v1/configuration") }
            )
            let (_, answer) = try await client.data(from: manager)
            #expect((answer as? HTTPURLResponse)?.statusCode == 200, "\(instance)")
        }

        // A registration's and a login's requests alternate between the instances; the DPoP
        // proofs name the front address, which both take as theirs.
        let device = ["--server", pair.url, "--data-dir", pair.directory.appendingPathComponent("device").path]
        try await registerOverCommandLine(device)
        let login = try Session(["login"] + device)
        _ = try await login.waitFor("PIN")
        login.type("258147")
        #expect(try await login.finish() == 0, "\(login.errors.withLock { $0 })\n\(pair.logs)")
        #expect(login.output.withLock { $0 }.contains("subject ann@example.com"))
        let flowSteps = pair.routed().filter { $0.path.hasPrefix("/v1/flows/") }
        #expect(Set(flowSteps.map(\.instance)) == ["one", "two"], "\(flowSteps)")
        #expect(flowSteps.allSatisfy { $0.status == 200 }, "\(flowSteps)")
    }

    @Test(
        "a browser registration through HAProxy: the login page, its POST and the code's redemption at different instances"
    )
    func browserRegistration() async throws {
        try Self.requireChromium()
        // The page (and its CSRF token and pending authorization) at one, the POST at two, the
        // flow step that redeems the code two issued at one again.
        let pair = try await BalancedInstances.start(
            "two_browser",
            pins: [
                .init(method: "GET", pathPrefix: "/login/", instance: .one),
                .init(method: "POST", pathPrefix: "/login/", instance: .two),
                .init(method: "POST", pathPrefix: "/v1/flows/", instance: .one),
            ]
        )
        defer { pair.stop() }
        let add = try Session([
            "users", "add", "--username", "Ann@Example.com", "--database", pair.databaseURL, "--manifest",
            pair.manifest.path,
        ])
        add.type("correct horse")
        add.type("correct horse")
        #expect(try await add.finish() == 0, "\(add.errors.withLock { $0 })")
        #expect(add.output.withLock { $0 } == "Added ann@example.com.\n")

        let device = pair.directory.appendingPathComponent("device").path
        let register = try Session(
            ["register", "--identity-provider", "web", "--server", pair.url, "--data-dir", device],
            environment: ["GATEHOUSE_NO_BROWSER": "1"]
        )
        // Its loopback listener would wait for a browser that never comes if the test fails.
        defer { if register.process.isRunning { register.process.terminate() } }
        let prompt = try await register.waitFor("/login/authorize?")
        // The login's address is the front's: server.publicURL, not an instance's own.
        let start = try #require(prompt.range(of: pair.url + "/login/authorize?"), "\(prompt)")
        let address = String(prompt[start.lowerBound...].prefix { !$0.isWhitespace })
        let browser = try Session(
            [address, "ann@example.com", "correct horse", "--expect", "You can close this window"],
            binary: packageRoot.appendingPathComponent("scripts/browser-login").path
        )
        #expect(try await browser.finish() == 0, "\(browser.errors.withLock { $0 })\n\(pair.logs)")
        _ = try await register.waitFor("Choose a PIN of 6 digits: ")
        register.type("258147")
        #expect(try await register.finish() == 0, "\(register.errors.withLock { $0 })\n\(pair.logs)")
        #expect(register.output.withLock { $0 }.contains("with Example login."))

        let login = try Session(["login", "--server", pair.url, "--data-dir", device])
        _ = try await login.waitFor("PIN")
        login.type("258147")
        #expect(try await login.finish() == 0, "\(login.errors.withLock { $0 })\n\(pair.logs)")
        #expect(login.output.withLock { $0 }.contains("subject ann@example.com"))

        // The crossings happened, as HAProxy routed them and as each instance counted them.
        let page = BalancedInstances.Routed(instance: "one", method: "GET", path: "/login/authorize", status: 200)
        let signIn: (BalancedInstances.Routed) -> Bool = {
            $0.instance == "two" && $0.method == "POST" && $0.path == "/login/authorize" && $0.status / 100 == 3
        }
        let routed = try await pair.routed { $0.contains(page) && $0.contains(where: signIn) }
        #expect(routed.contains(page), "\(routed)")
        #expect(routed.contains(where: signIn), "\(routed)")
        let pages = try await pair.answered("GET", "/login/*")
        let posts = try await pair.answered("POST", "/login/*")
        #expect((pages[.one] ?? 0) >= 1 && pages[.two] == 0, "\(pages)")
        #expect((posts[.two] ?? 0) >= 1 && posts[.one] == 0, "\(posts)")
        let steps = try await pair.answered("POST", "/v1/flows/{flowID}")
        #expect((steps[.one] ?? 0) >= 1 && steps[.two] == 0, "\(steps)")
    }

    @Test(
        "a XignIn registration at one instance and its activation at the other, through HAProxy"
    )
    func xigninAcrossInstances() async throws {
        let pair = try await BalancedInstances.start(
            "two_xignin",
            pins: [
                .init(method: "POST", pathPrefix: "/xignin/v1/registrations", instance: .one),
                .init(method: "POST", pathPrefix: "/xignin/v1/activations", instance: .two),
            ]
        )
        defer { pair.stop() }
        let device = ["--server", pair.url, "--data-dir", pair.directory.appendingPathComponent("device").path]

        let register = try Session(["xignin", "register", "--alias", "Laptop"] + device)
        _ = try await register.waitFor("Activation PIN (5–8 digits): ")
        register.type("24680")
        _ = try await register.waitFor("email: ")
        register.type("ann@example.com")
        #expect(try await register.finish() == 0, "\(register.errors.withLock { $0 })\n\(pair.logs)")
        // The manager's address is the front's (server.publicURL), not the instance's.
        #expect(register.output.withLock { $0 }.contains("Registered at \(pair.url)/xignin."))

        let code = try Self.activationCode(to: "ann@example.com", in: pair)
        let activate = try Session(["xignin", "activate", "--code", code] + device)
        activate.type("24680")
        #expect(try await activate.finish() == 0, "\(activate.errors.withLock { $0 })\n\(pair.logs)")
        #expect(activate.output.withLock { $0 } == "Activated \"Laptop\" at \(pair.url)/xignin.\n")

        let list = try Session(["xignin", "list"] + device)
        #expect(try await list.finish() == 0)
        #expect(list.output.withLock { $0 }.hasPrefix("Laptop\t\(pair.url)/xignin\t"))

        let registered: (BalancedInstances.Routed) -> Bool = {
            $0.instance == "one" && $0.path == "/xignin/v1/registrations" && $0.status / 100 == 2
        }
        let activated: (BalancedInstances.Routed) -> Bool = {
            $0.instance == "two" && $0.path == "/xignin/v1/activations" && $0.status / 100 == 2
        }
        let routed = try await pair.routed { $0.contains(where: registered) && $0.contains(where: activated) }
        #expect(routed.contains(where: registered), "\(routed)")
        #expect(routed.contains(where: activated), "\(routed)")
        let answered = try await pair.answered("POST", "/xignin/*")
        #expect((answered[.one] ?? 0) >= 1 && (answered[.two] ?? 0) >= 1, "\(answered)")
    }

    /// The activation code of the newest e-mail to `address` in the outbox of the instance that
    /// took the registration (each instance writes the mails it sends to its own data folder).
    static func activationCode(to address: String, in pair: BalancedInstances) throws -> String {
        let outbox = pair.dataFolder(of: .one).appendingPathComponent("gatehouse/xignin/outbox")
        let mails = try FileManager.default.contentsOfDirectory(atPath: outbox.path).sorted()
        let texts = try mails.map { try String(contentsOf: outbox.appendingPathComponent($0), encoding: .utf8) }
        let mail = try #require(texts.last { $0.contains("To: \(address)\r\n") }, "no mail to \(address) in \(outbox)")
        let line = try #require(mail.split(separator: "\r\n").first { $0.hasPrefix("Activation code: ") })
        return String(line.dropFirst("Activation code: ".count))
    }

    /// Fails, saying what to install, unless the headless browser and its driver are there.
    static func requireChromium() throws {
        for path in ["/usr/bin/chromium", "/usr/bin/chromedriver"]
        where !FileManager.default.isExecutableFile(atPath: path) {
            throw HarnessFailure(
                "\(path) is missing: run scripts/install-dependencies, or apt-get install chromium chromium-driver"
            )
        }
    }

}
