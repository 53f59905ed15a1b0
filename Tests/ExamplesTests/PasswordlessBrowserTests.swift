import Crypto
import Foundation
import GatehouseProtocol
import GatehouseTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `gatehouse serve --host localhost` with the example manifest (passkeys need a domain name),
/// ann@example.com added with a password, and, when asked, a device registered for her through
/// the hosted login (`register --identity-provider web --headless`) and enrolled for push.
private struct PasswordlessLogin {
    static let password = "correct horse"
    static let script = packageRoot.appendingPathComponent("scripts/browser-passwordless").path
    /// The example manifest's web shop: a confidential client whose redirect nobody needs to
    /// answer (the browser stops there; the test exchanges the code).
    static let redirectURI = "http://127.0.0.1:8070/callback"
    static let shopSecret = "example-web-shop-secret-change-me"

    let directory: URL
    let server: Session
    let url: String
    let device: [String]

    static func start(_ name: String, withDevice: Bool = true) async throws -> PasswordlessLogin {
        let directory = try scratchDirectory("gatehouse-passwordless-\(name)")
        let manifest = try exampleManifest(in: directory, port: 0).path
        let database = directory.appendingPathComponent("server.sqlite").path
        let add = try Session([
            "users", "add", "--username", "ann@example.com", "--database", database, "--manifest", manifest,
        ])
        add.type(password)
        add.type(password)
        #expect(try await add.finish() == 0, "\(add.errors.withLock { $0 })")
        let (server, url) = try await startServer(
            in: directory,
            manifest: ["--manifest", manifest, "--host", "localhost"],
            database: database
        )
        let login = PasswordlessLogin(
            directory: directory,
            server: server,
            url: url,
            device: ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]
        )
        guard withDevice else { return login }
        do {
            let register = try Session(
                ["register", "--identity-provider", "web", "--headless", "--username", "ann@example.com"]
                    + login.device
            )
            register.type(password)
            register.type("258147")
            #expect(try await register.finish(within: 60) == 0, "\(register.errors.withLock { $0 })")
            let enrol = try Session(["device", "enrol"] + login.device)
            enrol.type("258147")
            #expect(try await enrol.finish() == 0, "\(enrol.errors.withLock { $0 })")
            #expect(enrol.output.withLock { $0 }.contains("enrolled for mobile authentication with push"))
        } catch {
            login.stop()
            throw error
        }
        return login
    }

    func stop() {
        if server.process.isRunning { server.process.terminate() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// An authorization request of the web shop with PKCE S256, a state and a nonce.
    func authorization(acr: String? = nil) throws -> Authorization {
        let verifier = Data.random(count: 32).base64URLEncodedString
        let challenge = Data(SHA256.hash(data: Data(verifier.utf8))).base64URLEncodedString
        let state = Data.random(count: 12).base64URLEncodedString
        let nonce = Data.random(count: 12).base64URLEncodedString
        var components = try #require(URLComponents(string: url + "/login/authorize"))
        components.queryItems =
            [
                .init(name: "client_id", value: "web-shop"), .init(name: "redirect_uri", value: Self.redirectURI),
                .init(name: "response_type", value: "code"), .init(name: "scope", value: "openid email"),
                .init(name: "state", value: state), .init(name: "nonce", value: nonce),
                .init(name: "code_challenge", value: challenge), .init(name: "code_challenge_method", value: "S256"),
            ] + (acr.map { [.init(name: "acr_values", value: $0)] } ?? [])
        return Authorization(
            url: try #require(components.url?.absoluteString),
            verifier: verifier,
            state: state,
            nonce: nonce
        )
    }

    /// The ID token's claims for the code in `printed` (the browser's final address, as the
    /// script printed it), exchanged at the token endpoint as the web shop.
    func claims(from printed: String, for request: Authorization) async throws -> [String: Any] {
        let line = try #require(
            printed.split(separator: "\n").first { $0.hasPrefix(Self.redirectURI + "?") },
            "no redirect to the shop in: \(printed)"
        )
        let query = URLComponents(string: String(line))?.queryItems ?? []
        #expect(query.first { $0.name == "state" }?.value == request.state)
        let code = try #require(query.first { $0.name == "code" }?.value, "no code in \(line)")
        var exchange = URLRequest(url: try #require(URL(string: url + "/login/token")))
        exchange.httpMethod = "POST"
        exchange.timeoutInterval = 20
        exchange.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        exchange.setValue(
            "Basic " + Data("web-shop:\(Self.shopSecret)".utf8).base64EncodedString(),
            forHTTPHeaderField: "Authorization"
        )
        var form = URLComponents()
        form.queryItems = [
            .init(name: "grant_type", value: "authorization_code"), .init(name: "code", value: code),
            .init(name: "redirect_uri", value: Self.redirectURI), .init(name: "code_verifier", value: request.verifier),
        ]
        exchange.httpBody = Data((form.percentEncodedQuery ?? "").utf8)
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (body, response) = try await session.data(for: exchange)
        let text = String(decoding: body, as: UTF8.self)
        #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(text)")
        let tokens = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any], "\(text)")
        let idToken = try #require(tokens["id_token"] as? String, "no ID token: \(text)")
        // The token came straight from the token endpoint; its signature is OpenIDAcceptanceTests'.
        let parts = idToken.split(separator: ".")
        #expect(parts.count == 3)
        let payload = try #require(parts.count == 3 ? Data(base64URLEncoded: String(parts[1])) : nil)
        let claims = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        #expect(claims["sub"] as? String == "ann@example.com")
        #expect(claims["nonce"] as? String == request.nonce)
        return claims
    }
}

/// One authorization request: its address and what checks its answer.
private struct Authorization {
    let url: String
    let verifier: String
    let state: String
    let nonce: String
}

extension Session {
    /// Waits (at most `seconds`) for a line of standard output starting with `prefix`; returns
    /// the rest of that line.
    fileprivate func line(after prefix: String, within seconds: Int) async throws -> String {
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
                NSDebugDescriptionErrorKey:
                    "no line \(prefix)…: \(output.withLock { $0 }) \(errors.withLock { $0 })"
            ]
        )
    }

    /// Ends the process if it still runs (a failed test's browser or device command).
    fileprivate func stop() {
        if process.isRunning { process.terminate() }
    }
}

@Suite("Passwordless sign-in on the hosted login in Chromium: phone push, QR code, passkey, step-up", .serialized)
struct PasswordlessBrowserTests {
    static let phoneACR = "urn:gatehouse:acr:phone"
    static let passkeyACR = "urn:gatehouse:acr:passkey"

    /// "Approve on my phone" in the browser, the number typed on `gatehouse device listen`; the
    /// script's output once the page moved on by itself.
    private func approveOnPhone(_ login: PasswordlessLogin, _ arguments: [String]) async throws -> String {
        let browser = try Session(arguments, binary: PasswordlessLogin.script)
        defer { browser.stop() }
        let number = try await browser.line(after: "NUMBER ", within: 60)
        #expect(number.allSatisfy(\.isNumber) && !number.isEmpty, "\(number)")
        let listen = try Session(["device", "listen", "--count", "1"] + login.device)
        defer { listen.stop() }
        let asked = try await listen.waitFor("Type the number the website shows")
        #expect(asked.contains("Sign in to Example web shop"), "\(asked)")
        listen.type(number)
        #expect(try await listen.finish(within: 30) == 0, "\(listen.errors.withLock { $0 })")
        #expect(listen.output.withLock { $0 }.hasSuffix("Approved.\n"))
        #expect(try await browser.finish(within: 70) == 0, "\(browser.errors.withLock { $0 })")
        return browser.output.withLock { $0 }
    }

    @Test(
        """
        push: a wrong number typed on the device denies, and the page says so; the number the page shows signs \
        the browser in (acr phone, amr swk)
        """
    )
    func push() async throws {
        let login = try await PasswordlessLogin.start("push")
        defer { login.stop() }

        let refused = try Session(
            ["push", try login.authorization().url, "ann@example.com"],
            binary: PasswordlessLogin.script
        )
        defer { refused.stop() }
        let shown = try #require(Int(try await refused.line(after: "NUMBER ", within: 60)))
        let listen = try Session(["device", "listen", "--count", "1"] + login.device)
        defer { listen.stop() }
        _ = try await listen.waitFor("Type the number the website shows")
        listen.type(String(shown == 99 ? 10 : shown + 1))
        #expect(try await listen.finish(within: 30) == 0, "\(listen.errors.withLock { $0 })")
        #expect(try await refused.finish(within: 70) == 1)
        #expect(refused.errors.withLock { $0 }.contains("The sign-in was denied on the phone."))
        #expect(!refused.output.withLock { $0 }.contains("code="))

        let request = try login.authorization()
        let printed = try await approveOnPhone(login, ["push", request.url, "ann@example.com"])
        let claims = try await login.claims(from: printed, for: request)
        #expect(claims["acr"] as? String == Self.phoneACR)
        #expect(claims["amr"] as? [String] == ["swk"])
    }

    @Test("qr: zbarimg reads the QR code in a screenshot of the page, device scan approves it, the browser moves on")
    func qrCode() async throws {
        let login = try await PasswordlessLogin.start("qr")
        defer { login.stop() }
        let request = try login.authorization()
        let browser = try Session(["qr", request.url], binary: PasswordlessLogin.script)
        defer { browser.stop() }
        let code = try await browser.line(after: "CODE ", within: 60)
        let scan = try Session(["device", "scan", code] + login.device)
        defer { scan.stop() }
        // The phone says what it approves, and from where, before it asks.
        let asked = try await scan.waitFor("Approve? [y/N/r to report]")
        #expect(asked.contains("Request: Sign in to Example web shop from "), "\(asked)")
        scan.type("y")
        #expect(try await scan.finish(within: 30) == 0, "\(scan.errors.withLock { $0 })")
        #expect(scan.output.withLock { $0 }.hasSuffix("Approved.\n"))
        #expect(try await browser.finish(within: 70) == 0, "\(browser.errors.withLock { $0 })")
        let claims = try await login.claims(from: browser.output.withLock { $0 }, for: request)
        #expect(claims["acr"] as? String == Self.phoneACR)
        #expect(claims["amr"] as? [String] == ["swk"])
    }

    @Test(
        """
        passkey: a virtual authenticator adds a passkey after a password sign-in, then signs in without a \
        username; py_webauthn verifies both ceremonies, the ID token says acr passkey with mfa
        """
    )
    func passkey() async throws {
        let login = try await PasswordlessLogin.start("passkey", withDevice: false)
        defer { login.stop() }
        // The browser is signed in with the password by then: asking for the passkey's acr makes
        // the login ask again, and offer only what gives it.
        let request = try login.authorization(acr: Self.passkeyACR)
        let browser = try Session(
            ["passkey", login.url, "ann@example.com", PasswordlessLogin.password, request.url],
            binary: PasswordlessLogin.script
        )
        defer { browser.stop() }
        #expect(try await browser.finish(within: 90) == 0, "\(browser.errors.withLock { $0 })")
        let printed = browser.output.withLock { $0 }
        #expect(printed.contains("py_webauthn verified registration and assertion"), "\(printed)")
        let claims = try await login.claims(from: printed, for: request)
        #expect(claims["acr"] as? String == Self.passkeyACR)
        let amr = try #require(claims["amr"] as? [String])
        #expect(amr.contains("mfa") && amr.contains("user"), "\(amr)")
        #expect(amr.contains("hwk") || amr.contains("swk"), "\(amr)")
        #expect(!amr.contains("pwd"), "\(amr)")
    }

    @Test(
        """
        step-up: signed in with the password, a request for acr phone neither finishes on that session nor \
        offers the password; approved on the phone, its ID token says acr phone
        """
    )
    func stepUp() async throws {
        let login = try await PasswordlessLogin.start("step-up")
        defer { login.stop() }
        let first = try login.authorization()
        let request = try login.authorization(acr: Self.phoneACR)
        let printed = try await approveOnPhone(
            login,
            ["push", request.url, "ann@example.com", "--after-password", first.url, PasswordlessLogin.password]
        )
        let claims = try await login.claims(from: printed, for: request)
        #expect(claims["acr"] as? String == Self.phoneACR)
        #expect(claims["amr"] as? [String] == ["swk"])
    }
}
