import BrowserIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehousePlugins
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import GatehouseYAML
import Hummingbird
import Logging
import ServiceLifecycle
import Testing

/// Registers through the browser: the headless browser signs in where the challenge points.
private struct BrowserDelegate: RegistrationDelegate {
    let browser: HeadlessLoginBrowser
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        guard let redirect = try? await browser.signIn(at: challenge.url) else { return .cancel }
        return .redirect(redirect)
    }
    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .pin(PIN("258147")) }
}

/// A token server with the hosted login mounted, reached in `mode`; `body` gets a client and the login.
private func withLoginServer(
    _ mode: Mode,
    _ body: (UserClient, LoginServer, any TokenServerTransport, _ secondDevice: UserClient) async throws -> Void
)
    async throws
{
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "gatehouse-browser-\(UUID().uuidString)"
    )
    defer { try? FileManager.default.removeItem(at: directory) }
    let port = try #require(LoopbackPort.free())
    let base = mode == .http ? "http://127.0.0.1:\(port)" : "http://gatehouse.embedded"
    let manifest = try ManifestLoader.jsonAndYAML.parse(
        Data(
            """
            server: {clients: [{id: test-app}]}
            login:
              passwordCost: 14
              clients: [{id: gatehouse, name: Example App, loopbackRedirectPaths: [/callback]}]
            authenticators: [{id: pin, type: pin}]
            identityProviders:
              - {id: web, type: idp.browser, name: Example login,
                 config: {authorizationURL: "\(base)/login/authorize", login: gatehouse-login}}
            """.utf8
        ),
        format: YAMLManifestFormat(),
        source: "browser.yaml",
        additionalSections: ["server", "login"]
    )
    // The server's database, on the engine the suite runs on, with the login's tables in it.
    try await withTestDatabase { database in
        let storage = try await ServerStorage.open(
            database,
            migrations: [LoginStore.migrations],
            logger: Logger(label: "test")
        )
        do {
            try await serveLogin(mode, manifest, storage, directory: directory, port: port, base: base, body)
        } catch {
            await storage.shutdown()
            throw error
        }
        await storage.shutdown()
    }
}

/// The login on `storage`, offered to `idp.browser`, and the token server on the same storage.
private func serveLogin(
    _ mode: Mode,
    _ manifest: Manifest,
    _ storage: ServerStorage,
    directory: URL,
    port: Int,
    base: String,
    _ body: (UserClient, LoginServer, any TokenServerTransport, _ secondDevice: UserClient) async throws -> Void
) async throws {
    var environment = PluginEnvironment()
    let login = try LoginServer(manifest: manifest, storage: storage, environment: environment)
    try await login.addUser("ann@example.com", password: "correct horse")
    environment.services[BrowserLoginServiceKey.self, named: "gatehouse-login"] = login
    let embedded = try await EmbeddedTokenServer(
        storage: storage,
        manifest: manifest,
        registry: try PluginRegistry.builtIn,
        environment: environment,
        extensions: [login]
    )
    func client(_ transport: any TokenServerTransport, _ name: String = "device") throws -> UserClient {
        try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: directory.appendingPathComponent(name),
                transport: transport,
                appID: "test-app",
                plugins: try PluginRegistry.builtIn.load(manifest, sides: .client)
            )
        )
    }
    guard mode == .http else {
        let recording = RecordingTransport(embedded)
        return try await body(try client(recording), login, recording, try client(embedded, "second-device"))
    }
    let application = HTTPTokenServer.application(server: embedded.server, port: port, logger: Logger(label: "test"))
    let group = ServiceGroup(configuration: .init(services: [application], logger: Logger(label: "test")))
    let running = Task { try await group.run() }
    let http = HTTPTransport(baseURL: base)
    for _ in 0..<100 where (try? await http.send(WireRequest(method: "GET", path: "/health")).status) != 200 {
        try await Task.sleep(for: .milliseconds(20))
    }
    let recording = RecordingTransport(http)
    do { try await body(try client(recording), login, recording, try client(http, "second-device")) } catch {
        await group.triggerGracefulShutdown()
        throw error
    }
    await group.triggerGracefulShutdown()
    _ = try? await running.value
}

@Suite("Registration through the browser", .serialized)
struct BrowserRegistrationTests {
    @Test(
        "the hosted login's code registers the user it names; a wrong password ends nothing but the page",
        arguments: Mode.allCases
    )
    func registers(mode: Mode) async throws {
        try await withLoginServer(mode) { client, _, transport, _ in
            let wrong = HeadlessLoginBrowser(
                transport: transport,
                username: "ann@example.com",
                password: "wrong password"
            )
            await #expect(throws: GenericError.self) {
                try await client.registerUser(identityProvider: "web", delegate: BrowserDelegate(browser: wrong))
            }
            #expect(try await client.userProfiles().isEmpty)

            let right = HeadlessLoginBrowser(
                transport: transport,
                username: "Ann@Example.com",
                password: "correct horse"
            )
            let registered = try await client.registerUser(
                identityProvider: "web",
                delegate: BrowserDelegate(browser: right)
            )
            #expect(registered.identityProvider.id == "web")
            #expect(try await client.fetchProfileResource().subject == "ann@example.com")
        }
    }

    @Test("a replayed code is refused and revokes the sessions the first redemption issued", arguments: Mode.allCases)
    func replayedCode(mode: Mode) async throws {
        try await withLoginServer(mode) { client, _, transport, secondDevice in
            let browser = HeadlessLoginBrowser(
                transport: transport,
                username: "ann@example.com",
                password: "correct horse"
            )
            let captured = CapturedRedirect()
            _ = try await client.registerUser(
                identityProvider: "web",
                delegate: CapturingDelegate(browser: browser, captured: captured)
            )
            #expect(try await client.fetchProfileResource().subject == "ann@example.com")
            try await client.refreshSession()  // the session works until the replay
            _ = try await secondDevice.registerUser(
                identityProvider: "web",
                delegate: BrowserDelegate(browser: browser)
            )
            // An attacker who saw the redirect sends its code with a registration of their own.
            let code = try #require(await captured.code)
            await #expect(throws: RegistrationError.self) {
                try await client.registerUser(identityProvider: "web", delegate: ReplayingDelegate(code: code))
            }
            // Ann's session from that code is gone: a refresh finds its family revoked.
            await #expect(throws: (any Error).self) { try await client.refreshSession() }
            // What another code issued (Ann on her second device) stays: only the replayed
            // code's sessions are revoked (RFC 6749 §4.1.2).
            try await secondDevice.refreshSession()
        }
    }
}

extension BrowserRegistrationTests {
    @Test("a code the login never issued is refused (HTTP 400), not reported as an outage", arguments: Mode.allCases)
    func unknownCode(mode: Mode) async throws {
        try await withLoginServer(mode) { client, _, transport, _ in
            await #expect(throws: RegistrationError.self) {
                try await client.registerUser(
                    identityProvider: "web",
                    delegate: ReplayingDelegate(code: "never-issued")
                )
            }
            let recording = try #require(transport as? RecordingTransport)
            let answer = try lastFlowAnswer(recording)
            #expect(answer == "400 invalid_grant")
            let profiles = try await client.userProfiles()
            #expect(profiles.isEmpty)
        }
    }

    @Test(
        "a code replayed while its first redeemer still chooses a PIN: that registration, finished after, gets no session",
        arguments: Mode.allCases
    )
    func replayBeforeTheFirstRedeemerFinishes(mode: Mode) async throws {
        try await withLoginServer(mode) { client, _, transport, attacker in
            let browser = HeadlessLoginBrowser(
                transport: transport,
                username: "ann@example.com",
                password: "correct horse"
            )
            let captured = CapturedRedirect()
            let replayed = Gate()
            // Ann's registration redeems the code, then waits at the PIN prompt until the replay.
            let ann = Task {
                try await client.registerUser(
                    identityProvider: "web",
                    delegate: CapturingDelegate(browser: browser, captured: captured, beforePin: replayed)
                )
            }
            // The server redeemed the code once the PIN is asked for.
            for _ in 0..<400 where await !replayed.hasArrived { try await Task.sleep(for: .milliseconds(25)) }
            let stolen = try #require(await captured.code)
            await #expect(throws: RegistrationError.self) {
                try await attacker.registerUser(identityProvider: "web", delegate: ReplayingDelegate(code: stolen))
            }
            await replayed.open()
            // The first redeemer's registration, finished after the replay, is refused: no session.
            await #expect(throws: (any Error).self) { try await ann.value }
            await #expect(throws: (any Error).self) { try await client.fetchProfileResource() }
        }
    }
}

/// Holds whoever arrives until opened.
private actor Gate {
    private var isOpen = false
    private(set) var hasArrived = false
    private var waiting: [CheckedContinuation<Void, Never>] = []
    func open() {
        isOpen = true
        for continuation in waiting { continuation.resume() }
        waiting = []
    }
    func arriveAndWait() async {
        hasArrived = true
        if isOpen { return }
        await withCheckedContinuation { waiting.append($0) }
    }
}

private actor CapturedRedirect {
    var code: String?
    func keep(_ url: URL) {
        code = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "code" }?.value
    }
}

/// Signs in, and keeps the code the redirect carried.
private struct CapturingDelegate: RegistrationDelegate {
    let browser: HeadlessLoginBrowser
    let captured: CapturedRedirect
    /// Opened before the PIN is chosen, when given.
    var beforePin: Gate?
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        guard let redirect = try? await browser.signIn(at: challenge.url) else { return .cancel }
        await captured.keep(redirect)
        return .redirect(redirect)
    }
    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse {
        await beforePin?.arriveAndWait()
        return .pin(PIN("258147"))
    }
}

/// Answers the browser challenge with a stolen code and this registration's own state.
private struct ReplayingDelegate: RegistrationDelegate {
    let code: String
    func browserRegistration(_ challenge: BrowserRegistrationChallenge) -> BrowserRegistrationResponse {
        let state =
            URLComponents(url: challenge.url, resolvingAgainstBaseURL: false)?.queryItems?.first {
                $0.name == "state"
            }?.value ?? ""
        guard let url = URL(string: "\(challenge.redirectURI.absoluteString)?code=\(code)&state=\(state)") else {
            return .cancel
        }
        return .redirect(url)
    }
    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .pin(PIN("258147")) }
}
