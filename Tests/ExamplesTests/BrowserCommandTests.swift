import Foundation
import GatehouseTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `gatehouse users add`, `gatehouse serve` and `gatehouse register --identity-provider web` on
/// free ports, up to the moment the register command prints the address to sign in at.
private struct BrowserRegistration {
    let directory: URL
    let server: Session
    let register: Session
    let url: String
    let address: URL

    static func start() async throws -> BrowserRegistration {
        let directory = try scratchDirectory("gatehouse-browser-cli")
        let port = try #require(LoopbackPort.free())
        // The example manifest, with this test's server address; the redirect listener takes a
        // port the system picks, whatever port the manifest's loopback redirect URI names.
        let manifest = try exampleManifest(in: directory, port: port)
        let database = directory.appendingPathComponent("server.sqlite").path
        let common = ["--manifest", manifest.path]

        let add = try Session(["users", "add", "--username", "Ann@Example.com", "--database", database] + common)
        add.type("correct horse")
        add.type("correct horse")
        #expect(try await add.finish() == 0, "\(add.errors.withLock { $0 })")
        #expect(add.output.withLock { $0 } == "Added ann@example.com.\n")

        let server = try Session(["serve", "--database", database, "--port", "\(port)"] + common)
        _ = try await server.waitFor("listening on http://")
        let url = "http://127.0.0.1:\(port)"
        let device = directory.appendingPathComponent("device").path
        let register = try Session(
            ["register", "--identity-provider", "web", "--server", url, "--data-dir", device] + common,
            environment: ["GATEHOUSE_NO_BROWSER": "1"]
        )
        let prompt = try await register.waitFor("/login/authorize?")
        let start = try #require(prompt.range(of: url + "/login/authorize?"))
        let address = try #require(URL(string: String(prompt[start.lowerBound...].prefix { !$0.isWhitespace })))
        let redirect = try #require(
            URLComponents(url: address, resolvingAgainstBaseURL: false)?.queryItems?.first {
                $0.name == "redirect_uri"
            }?
            .value
        )
        #expect(redirect.hasPrefix("http://127.0.0.1:") && redirect.hasSuffix("/callback"))
        #expect(!redirect.contains(":53180/"), "the listener should take a port the system picks")
        return BrowserRegistration(directory: directory, server: server, register: register, url: url, address: address)
    }

    /// After the browser came back: the PIN, and the registration is done.
    func finish() async throws {
        defer {
            server.process.terminate()
            try? FileManager.default.removeItem(at: directory)
        }
        _ = try await register.waitFor("Choose a PIN of 6 digits: ")
        register.type("258147")
        #expect(try await register.finish() == 0, "\(register.errors.withLock { $0 })")
        #expect(register.output.withLock { $0 }.contains("with Example login."))
    }
}

@Suite("gatehouse users and browser registration", .serialized)
struct BrowserCommandTests {
    @Test(
        "users add, then register --identity-provider web: the URL is printed, the redirect comes back to the terminal"
    )
    func register() async throws {
        let registration = try await BrowserRegistration.start()
        // The browser, by hand: the page, its form and cookie, the posted password, then the
        // redirect followed to the terminal's loopback listener.
        // A session of its own: no connection is carried over from other tests.
        let browser = URLSession(configuration: .ephemeral)
        defer { browser.finishTasksAndInvalidate() }
        let (pageData, pageResponse) = try await browser.data(from: registration.address)
        let page = String(decoding: pageData, as: UTF8.self)
        let cookie = try #require(
            (pageResponse as? HTTPURLResponse)?.value(forHTTPHeaderField: "Set-Cookie")?.split(separator: ";").first
        )
        func field(_ name: String) throws -> String {
            let range = try #require(page.range(of: #"name="\#(name)" value="[^"]*""#, options: .regularExpression))
            return String(page[range].split(separator: "\"", omittingEmptySubsequences: false)[3])
        }
        var post = URLRequest(url: try #require(URL(string: registration.url + "/login/authorize")))
        post.httpMethod = "POST"
        post.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        post.setValue(String(cookie), forHTTPHeaderField: "Cookie")
        post.httpBody = Data(
            "authorization=\(try field("authorization"))&csrf=\(try field("csrf"))&username=ann%40example.com&password=correct+horse"
                .utf8
        )
        let (landed, _) = try await browser.data(for: post)
        #expect(String(decoding: landed, as: UTF8.self).contains("You can close this window"))
        try await registration.finish()
    }

    @Test("a real browser: headless Chromium types into the login form, submits, and the registration finishes")
    func chromium() async throws {
        let registration = try await BrowserRegistration.start()
        let browser = try Session(
            [
                registration.address.absoluteString, "ann@example.com", "correct horse", "--expect",
                "You can close this window",
            ],
            binary: packageRoot.appendingPathComponent("scripts/browser-login").path
        )
        #expect(try await browser.finish() == 0, "\(browser.errors.withLock { $0 })")
        #expect(browser.output.withLock { $0 }.contains("/callback?code="))
        try await registration.finish()
    }

    @Test("gatehouse demo --identity-provider web registers through the hosted login with a browser without a screen")
    func demo() async throws {
        let directory = try scratchDirectory("gatehouse-demo-web")
        defer { try? FileManager.default.removeItem(at: directory) }
        let demo = try Session(["demo", "--identity-provider", "web", "--data-dir", directory.path])
        #expect(try await demo.finish() == 0, "\(demo.errors.withLock { $0 })")
        let output = demo.output.withLock { $0 }
        #expect(output.contains("signed in as jane@example.com"))
        #expect(output.contains("registered profile") && output.contains("with Example login"))
        #expect(output.hasSuffix("Done.\n"))
    }
}
