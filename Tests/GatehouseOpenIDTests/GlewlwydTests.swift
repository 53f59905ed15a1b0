import Foundation
import GatehouseOpenID
import GatehouseTesting
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The relying party against a real, independent OpenID provider: Glewlwyd from Debian, started
/// by scripts/external-openid-provider on loopback. Without Glewlwyd the test is skipped on a
/// developer's machine and fails in CI (which installs it).
@Suite("OpenID relying party against Glewlwyd")
struct GlewlwydTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let script = repository.appendingPathComponent("scripts/external-openid-provider").path
    static let binaries = ["/usr/bin/glewlwyd", "/usr/sbin/glewlwyd"]
    static var installed: Bool {
        binaries.contains { FileManager.default.isExecutableFile(atPath: $0) }
            && FileManager.default.isExecutableFile(atPath: script)
    }
    static var inCI: Bool { ProcessInfo.processInfo.environment["CI"].map { !$0.isEmpty && $0 != "false" } ?? false }

    struct Started: Decodable {
        struct User: Decodable {
            var username: String
            var password: String
            var email: String
        }
        var issuer: String
        var clientID: String
        var clientSecret: String
        var users: [User]
    }

    @Test(
        "discovery, keys, a code and Glewlwyd's ID token through the relying party",
        .enabled(
            if: installed || inCI,
            "Glewlwyd is not installed (apt-get install glewlwyd), or scripts/external-openid-provider is missing; CI runs this test"
        ),
        .timeLimit(.minutes(2))
    )
    func signsInAtGlewlwyd() async throws {
        try #require(
            Self.installed,
            "Glewlwyd (\(Self.binaries.joined(separator: " or "))) or \(Self.script) is missing"
        )
        let port = try #require(LoopbackPort.free())
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("glewlwyd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: state) }
        let redirectURI = "http://127.0.0.1:9/callback"
        let shopPort = try #require(LoopbackPort.free())
        let provider = Process()
        provider.executableURL = URL(fileURLWithPath: Self.script)
        provider.arguments = [
            "start", "--port", String(port), "--state-dir", state.path, "--redirect-uri", redirectURI,
            "--redirect-uri", "http://127.0.0.1:\(shopPort)/callback",
            "--post-logout-redirect-uri", "http://127.0.0.1:\(shopPort)/",
        ]
        let output = Pipe()
        let errors = Pipe()
        provider.standardOutput = output
        provider.standardError = errors
        try provider.run()
        do {
            try await signIn(at: provider, output: output, errors: errors, redirectURI: redirectURI, shopPort: shopPort)
            await Self.stop(provider)
        } catch {
            await Self.stop(provider)
            throw error
        }
    }

    func signIn(at provider: Process, output: Pipe, errors: Pipe, redirectURI: String, shopPort: Int) async throws {
        let line = try await Self.firstLine(of: output, from: provider, errors: errors, within: .seconds(60))
        let started = try JSONDecoder().decode(Started.self, from: Data(line.utf8))
        let user = try #require(started.users.first)

        let party = try OpenIDRelyingParty(
            .init(
                issuer: started.issuer,
                clientID: started.clientID,
                clientSecret: started.clientSecret,
                redirectURI: redirectURI
            )
        )
        let metadata = try await party.providerMetadata()
        #expect(metadata.issuer == started.issuer)
        #expect(metadata.endSessionEndpoint != nil)

        let request = try await party.begin()
        let callback = try await Self.authorize(request.url, issuer: started.issuer, user: user)
        #expect(callback["state"] == request.state)
        let signIn = try await party.finish(callback: callback, request: request, fetchUserInfo: true)
        #expect(!signIn.claims.sub.isEmpty)
        #expect(signIn.claims.iss == started.issuer)
        #expect(signIn.claims.aud.contains(started.clientID))
        #expect((signIn.claims.email ?? signIn.userInfo?.email) == user.email)
        #expect(signIn.userInfo?.sub == signIn.claims.sub)

        // Glewlwyd's own token, checked for another sign-in's nonce: refused.
        let second = try await party.begin()
        var forged = second
        forged.nonce = request.nonce
        let secondCallback = try await Self.authorize(second.url, issuer: started.issuer, user: user)
        do {
            _ = try await party.finish(callback: secondCallback, request: forged)
            Issue.record("an ID token with another sign-in's nonce was accepted")
        } catch {
            guard case .idTokenRefused(let reason) = error else {
                Issue.record("expected the ID token to be refused, got \(error)")
                return
            }
            #expect(reason.contains("nonce"))
        }
        let logout = try #require(
            try await party.endSessionURL(idTokenHint: signIn.idToken, postLogoutRedirectURI: nil)
        )
        #expect(logout.hasPrefix(try #require(metadata.endSessionEndpoint)))
        try await Self.shopSignsIn(
            at: started,
            user: user,
            port: shopPort,
            endSession: try #require(metadata.endSessionEndpoint)
        )
    }

    /// Examples/WebShop against Glewlwyd: /login, Glewlwyd's sign-in, /callback, the page, /logout.
    static func shopSignsIn(at started: Started, user: Started.User, port: Int, endSession: String) async throws {
        let shop = Process()
        shop.executableURL = try webShop()
        shop.arguments = ["--port", String(port), "--issuer", started.issuer, "--client-id", started.clientID]
        shop.environment = ProcessInfo.processInfo.environment.merging(["WEB_SHOP_CLIENT_SECRET": started.clientSecret])
        { $1 }
        let output = Pipe()
        let errors = Pipe()
        shop.standardOutput = output
        shop.standardError = errors
        try shop.run()
        defer { if shop.isRunning { kill(shop.processIdentifier, SIGKILL) } }
        let ready = try await firstLine(of: output, from: shop, errors: errors, within: .seconds(30))
        #expect(ready == "listening on http://127.0.0.1:\(port)")
        let origin = try #require(
            URLComponents(string: started.issuer).map { "\($0.scheme ?? "http")://\($0.host ?? ""):\($0.port ?? 80)" }
        )
        let program = """
            import json, sys, requests
            shop, origin, username, password = sys.argv[1:5]
            browser = requests.Session()
            def go(url, **options):
                answer = browser.get(url, allow_redirects=False, timeout=10, **options)
                if answer.status_code not in (200, 302):
                    sys.exit(f"{url}: HTTP {answer.status_code} {answer.text[:300]}")
                return answer
            authorization = go(shop + "/login").headers["Location"]
            signed = browser.post(origin + "/api/auth/", json={"username": username, "password": password}, timeout=10)
            if signed.status_code != 200:
                sys.exit(f"sign-in at Glewlwyd: HTTP {signed.status_code}")
            callback = go(authorization + "&g_continue").headers["Location"]
            landed = go(callback)
            page = go(shop + "/").text
            logout = go(shop + "/logout").headers["Location"]
            after = go(shop + "/").text
            print(json.dumps({"landed": landed.headers.get("Location"), "page": page, "logout": logout, "after": after}))
            """
        let browser = Process()
        browser.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        browser.arguments = [
            "python3", "-c", program, "http://127.0.0.1:\(port)", origin, user.username, user.password,
        ]
        let browserOutput = Pipe()
        let browserErrors = Pipe()
        browser.standardOutput = browserOutput
        browser.standardError = browserErrors
        try browser.run()
        let line = try await firstLine(of: browserOutput, from: browser, errors: browserErrors, within: .seconds(60))
        await stop(browser)
        struct Visit: Decodable {
            var landed: String?
            var page: String
            var logout: String
            var after: String
        }
        let visit = try JSONDecoder().decode(Visit.self, from: Data(line.utf8))
        #expect(visit.landed == "/")
        #expect(visit.page.contains("Signed in as ") && visit.page.contains("(\(user.email))"), "\(visit.page)")
        #expect(visit.logout.hasPrefix(endSession + "?"), "\(visit.logout)")
        let logout = try #require(URLComponents(string: visit.logout)?.queryItems)
        #expect(logout.contains { $0.name == "id_token_hint" && !($0.value ?? "").isEmpty })
        #expect(logout.contains { $0.name == "post_logout_redirect_uri" && $0.value == "http://127.0.0.1:\(port)/" })
        #expect(visit.after.contains("Sign in") && !visit.after.contains("Signed in as"))
        await stop(shop)
    }

    /// The web-shop executable built next to this test bundle.
    static func webShop() throws -> URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("web-shop")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "web-shop near \(CommandLine.arguments[0])"])
    }

    /// Signs `user` in through Glewlwyd's REST API (what its login page does) and follows the
    /// authorization URL once, without a browser: Glewlwyd answers with the redirect to the
    /// callback. Returns the callback's query parameters.
    static func authorize(_ url: String, issuer: String, user: Started.User) async throws -> [String: String] {
        let origin = try #require(
            URLComponents(string: issuer).map { "\($0.scheme ?? "http")://\($0.host ?? ""):\($0.port ?? 80)" }
        )
        let program = """
            import sys, requests
            origin, username, password, url = sys.argv[1:5]
            session = requests.Session()
            answer = session.post(origin + "/api/auth/", json={"username": username, "password": password}, timeout=10)
            if answer.status_code != 200:
                sys.exit(f"sign-in at Glewlwyd: HTTP {answer.status_code} {answer.text[:200]}")
            # g_continue: the login page's signal that the user is done there.
            answer = session.get(url + "&g_continue", allow_redirects=False, timeout=10)
            if answer.status_code != 302:
                sys.exit(f"authorization: HTTP {answer.status_code} {answer.text[:200]}")
            print(answer.headers["Location"])
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", program, origin, user.username, user.password, url]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let location = try await firstLine(of: output, from: process, errors: errors, within: .seconds(30))
        await stop(process)
        #expect(location.hasPrefix("http://127.0.0.1:9/callback?"), "\(location)")
        let items = try #require(URLComponents(string: location)?.queryItems)
        return Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
    }

    /// The first line `process` writes to `pipe`, waiting at most `limit`; throws with its
    /// standard error when it ends or the time is up first.
    static func firstLine(
        of pipe: Pipe,
        from process: Process,
        errors: Pipe,
        within limit: Duration
    ) async throws
        -> String
    {
        let reader = LineReader(pipe)
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let line = reader.firstLine { return line }
            if reader.ended {
                let name = process.executableURL?.lastPathComponent ?? "process"
                let reason = String(decoding: errors.fileHandleForReading.availableData.suffix(2000), as: UTF8.self)
                Issue.record("\(name) ended without a line: \(reason)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("no line from \(process.executableURL?.lastPathComponent ?? "process") within \(limit)")
        throw CancellationError()
    }

    /// Ends `process`: SIGTERM, then SIGKILL when it is still there after five seconds.
    static func stop(_ process: Process) async {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<50 where process.isRunning { try? await Task.sleep(for: .milliseconds(100)) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// Reads a pipe on a thread of its own with blocking reads until its end, keeping the first line.
final class LineReader: Sendable {
    private let state = Mutex<(buffer: Data, ended: Bool)>((Data(), false))

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                let stop = state.withLock { state in
                    if chunk.isEmpty { state.ended = true } else { state.buffer.append(chunk) }
                    return state.ended || state.buffer.contains(UInt8(ascii: "\n"))
                }
                if stop { return }
            }
        }
    }

    var ended: Bool { state.withLock { $0.ended } }

    var firstLine: String? {
        state.withLock { state in
            state.buffer.firstIndex(of: UInt8(ascii: "\n")).map {
                String(decoding: state.buffer[state.buffer.startIndex..<$0], as: UTF8.self)
            }
        }
    }
}
