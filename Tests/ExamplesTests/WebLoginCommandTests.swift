import Foundation
import GatehouseTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("gatehouse web-login")
struct WebLoginCommandTests {
    @Test("the PIN, then a one-time link that lands a browser on the server's page signed in")
    func webLogin() async throws {
        let directory = try scratchDirectory("gatehouse-web-login")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = try #require(LoopbackPort.free())
        let manifest = try exampleManifest(in: directory, port: port)
        let server = try Session(
            [
                "serve", "--database", directory.appendingPathComponent("server.sqlite").path, "--port", "\(port)",
                "--manifest", manifest.path,
            ]
        )
        defer { server.process.terminate() }
        _ = try await server.waitFor("listening on http://")
        let url = "http://127.0.0.1:\(port)"
        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]
        try await registerOverCommandLine(device + ["--manifest", manifest.path])

        let login = try Session(["web-login", "\(url)/web/session"] + device + ["--manifest", manifest.path])
        _ = try await login.waitFor("PIN")
        login.type("258147")
        #expect(try await login.finish() == 0, "\(login.errors.withLock { $0 })")
        let printed = login.output.withLock { $0 }
        let start = try #require(printed.range(of: "\(url)/web/sign-in?token="))
        let link = try #require(URL(string: String(printed[start.lowerBound...].prefix { !$0.isWhitespace })))

        // A browser: keeps the cookies, and follows the redirect. The link's page asks first.
        let browser = URLSession(configuration: .ephemeral)
        defer { browser.finishTasksAndInvalidate() }
        let (question, asked) = try await browser.data(from: link)
        #expect((asked as? HTTPURLResponse)?.statusCode == 200)
        let html = String(decoding: question, as: UTF8.self)
        #expect(html.contains("Continue as ann@example.com"))
        // The user presses the button: the form's fields, posted to the form's action.
        var fields: [String] = []
        for match in html.matches(of: #/<input type="hidden" name="([a-z]+)" value="([A-Za-z0-9_.-]+)">/#) {
            fields.append("\(match.output.1)=\(match.output.2)")
        }
        #expect(fields.count == 2)
        var submit = URLRequest(url: try #require(URL(string: "\(url)/web/sign-in")))
        submit.httpMethod = "POST"
        submit.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        submit.httpBody = Data(fields.joined(separator: "&").utf8)
        let (page, response) = try await browser.data(for: submit)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: page, as: UTF8.self).contains("Signed in as ann@example.com"))
        // The link worked once.
        let (_, again) = try await URLSession(configuration: .ephemeral).data(from: link)
        #expect((again as? HTTPURLResponse)?.statusCode == 404)
    }
}
