import BrowserIdentityProvider
import Foundation
import GatehouseAdminConsole
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehousePlugins
import GatehousePostgresTestSupport
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import GatehouseYAML
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

// A token server with the hosted login and the admin console mounted, listening on a loopback
// port (the console's relying party reaches the login's discovery, keys and token endpoint over
// HTTP, as it does in production), on a clock that moves only when told. Its users: ann
// (operator, read and write), bob (operator, read only) and carl (a user, no operator); each
// may have a phone, registered through the login and enrolled, which approves sign-ins with its
// PIN. A `Browser` plays the operator's browser, in-process, with a cookie jar.

/// The people of the tests.
enum People {
    static let ann = "ann@example.com"
    static let bob = "bob@example.com"
    static let carl = "carl@example.com"
    static let password = "correct horse battery"
    static let pin = "258147"
}

/// What the logs of the console tests keep, rather than print.
let consoleLogs = RecordingLogger(label: "admin-console-tests", level: .info)

/// A token server with the login and the console, and the phones of the test.
struct ConsoleFixture {
    let server: EmbeddedTokenServer
    let login: LoginServer
    let console: AdminConsole
    let manifest: Manifest
    let clock: ManualClock
    let baseURL: String
    let directory: URL
    let storage: ServerStorage

    /// A phone of `username`: registered through the login (`idp.browser` web), signed in with
    /// its PIN and enrolled for mobile authentication.
    func phone(of username: String, name: String? = nil) async throws -> Phone {
        let client = try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: directory.appendingPathComponent(name ?? username),
                transport: server,
                appID: "test-app",
                plugins: try PluginRegistry.builtIn.load(manifest, sides: .client),
                clock: clock
            )
        )
        let browser = HeadlessLoginBrowser(transport: server, username: username, password: People.password)
        let registered = try await client.registerUser(
            identityProvider: "web",
            delegate: BrowserRegistration(browser: browser)
        )
        try await client.authenticateUser(registered.profile, delegate: ScriptedResponder([.pin(People.pin)]))
        try await client.enrollForMobileAuth()
        return Phone(client: client, profile: registered.profile)
    }

    /// Signs in to the console in a fresh browser as `username`, approving on `phone` with its
    /// PIN: the browser at the page the console answered (the console's start page, or a refusal).
    func signIn(_ phone: Phone, as username: String, next: String? = nil) async throws -> Browser {
        var browser = Browser(server: server, baseURL: baseURL)
        let start = await browser.get(
            AdminConsole.signInPath + (next.map { "?" + FormFields.encode([("next", $0)]) } ?? "")
        )
        try #require(start.status == 303, "\(start.status) \(browser.text.prefix(300))")
        let page = try await browser.follow(start)
        try #require(page.status == 200 && browser.html.contains(#"id="push""#), "\(browser.text.prefix(600))")
        _ = await browser.post(LoginServer.phonePath, browser.pageForm + [("username", username)])
        let number = try #require(browser.number, "\(browser.text.prefix(600))")
        let pending = try await phone.client.pendingPushMobileAuthRequests()
        let request = try #require(pending.first, "no push reached the phone")
        let answered = await phone.client.handlePushMobileAuthRequest(
            request,
            delegate: ScriptedResponder([.confirmation(.accept(number: number)), .pin(People.pin)])
        )
        guard case .approved = answered else { throw PhoneRefused(result: "\(answered)") }
        let redirect = await browser.post(LoginServer.phoneCompletePath, browser.pageForm)
        try #require(redirect.status == 303, "\(redirect.status) \(browser.text.prefix(600))")
        let callback = try await browser.follow(redirect)
        if callback.status == 303 { _ = try await browser.follow(callback) }
        return browser
    }

    /// The audit trail's newest events `query` selects.
    func audit(_ query: AuditQuery = AuditQuery()) async throws -> [AuditRecord] {
        try await server.server.admin.auditEvents(query).events
    }
}

/// The phone approved nothing.
struct PhoneRefused: Error {
    var result: String
}

/// An enrolled phone, driven through the SDK.
struct Phone {
    let client: UserClient
    let profile: UserProfile
}

/// Registers through the hosted login with a headless browser, and chooses the PIN.
private struct BrowserRegistration: RegistrationDelegate {
    let browser: HeadlessLoginBrowser

    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        guard let redirect = try? await browser.signIn(at: challenge.url) else { return .cancel }
        return .redirect(redirect)
    }

    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .pin(PIN(People.pin)) }
}

/// A browser for the console and the login: a cookie jar, the last page and its hidden fields.
struct Browser {
    let server: EmbeddedTokenServer
    let baseURL: String
    var jar: [String: String] = [:]
    var html = ""
    var hidden: [String: String] = [:]
    /// Every `Set-Cookie` line received, oldest first.
    var setCookies: [String] = []

    init(server: EmbeddedTokenServer, baseURL: String) {
        self.server = server
        self.baseURL = baseURL
    }

    /// The page's visible text, roughly: tags removed.
    var text: String { html.replacing(#/<[^>]+>/#, with: " ").replacing(#/\s+/#, with: " ") }

    /// The login page's waiting authorization and CSRF token.
    var pageForm: [(String, String)] {
        [("authorization", hidden["authorization"] ?? ""), ("csrf", hidden["csrf"] ?? "")]
    }

    /// The number the login's waiting page shows.
    var number: Int? {
        html.firstMatch(of: #/id="number"[^>]*>([0-9]+)</#).flatMap { Int($0.output.1) }
    }

    /// The console form token the page carries.
    var csrf: String? { hidden["csrf"] }

    /// The page's alert, if any.
    var alert: String? { html.firstMatch(of: #/role="alert">([^<]*)</#).map { String($0.output.1) } }

    /// Opens `path` and shows it.
    mutating func get(_ path: String, withCookies: Bool = true) async -> WireResponse {
        show(await exchange(WireRequest(method: "GET", path: path), withCookies: withCookies))
    }

    /// Posts `fields` as a form and shows the answer; `withCookies: false` sends it as another
    /// site's page would (SameSite=Strict cookies stay home).
    mutating func post(_ path: String, _ fields: [(String, String)], withCookies: Bool = true) async -> WireResponse {
        let request = WireRequest(
            method: "POST",
            path: path,
            headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Data(FormFields.encode(fields).utf8)
        )
        return show(await exchange(request, withCookies: withCookies))
    }

    /// Follows a redirect to a page of this server.
    mutating func follow(_ response: WireResponse) async throws -> WireResponse {
        let location = try #require(response.header("Location"), "no Location: \(response.status)")
        let path = location.hasPrefix(baseURL) ? String(location.dropFirst(baseURL.count)) : location
        try #require(path.hasPrefix("/"), "a redirect elsewhere: \(location)")
        return await get(path)
    }

    /// Posts the user page's form of `action` on `profile` of `subject`, as its button would.
    mutating func press(_ action: String, profile: String, of subject: String = People.carl) async -> WireResponse {
        await post(AdminConsole.confirmPath, actionFields(action, profile: profile, of: subject))
    }

    /// An action's fields as the user page's form has them, with the page's token.
    func actionFields(_ action: String, profile: String, of subject: String = People.carl) -> [(String, String)] {
        [
            ("csrf", csrf ?? ""), ("action", action), ("profile", profile), ("identity_provider", "web"),
            ("subject", subject),
        ]
    }

    private mutating func show(_ response: WireResponse) -> WireResponse {
        html = String(decoding: response.body, as: UTF8.self)
        hidden = [:]
        for match in html.matches(of: #/<input type="hidden" name="([a-z_]+)" value="([^"]*)"/#) {
            hidden[String(match.output.1)] = Self.unescaped(String(match.output.2))
        }
        return response
    }

    private static func unescaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&#64;", with: "@").replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&#39;", with: "'").replacingOccurrences(of: "&lt;", with: "<")
            .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&")
    }

    /// Sends `request` with the jar's cookies; keeps the cookies the answer sets.
    private mutating func exchange(_ request: WireRequest, withCookies: Bool) async -> WireResponse {
        var request = request
        if withCookies, !jar.isEmpty {
            request.setHeader("Cookie", jar.keys.sorted().map { "\($0)=\(jar[$0] ?? "")" }.joined(separator: "; "))
        }
        let response = await server.server.handle(request)
        for line in (response.header("Set-Cookie") ?? "").split(separator: "\n") {
            setCookies.append(String(line))
            let attributes = line.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let pair = attributes.first, let equals = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<equals])
            let value = String(pair[pair.index(after: equals)...])
            jar[name] = attributes.contains("Max-Age=0") || value.isEmpty ? nil : value
        }
        return response
    }
}

/// A free TCP port on 127.0.0.1 now (another process could take it before the server listens;
/// the server then fails to start, which the test reports).
func freePort() async throws -> Int {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(host: "127.0.0.1", port: 0).get()
    let port = channel.localAddress?.port ?? 0
    try await channel.close()
    return port
}

/// The manifest of the console tests: phone sign-in at the login with `pushType` (`login-pin`
/// asks the phone's PIN: two factors; `login` a tap: one), the console's operators ann (read
/// and write) and bob (read only), and `consoleExtra` lines added to its section.
func consoleManifest(
    baseURL: String,
    pushType: String,
    acrValues: String = "[urn:gatehouse:acr:passkey, urn:gatehouse:acr:phone]",
    consoleExtra: String = ""
) throws -> Manifest {
    try ManifestLoader.jsonAndYAML.parse(
        Data(
            """
            server:
              publicURL: \(baseURL)
              clients: [{id: test-app}]
              maxPinFailures: 5
              mobileAuth:
                apiClients: [{id: portal, secret: portal-secret-0123456789abcdef}]
                types:
                  - {name: login, method: confirmation, numberMatching: true, timeToLive: 120}
                  - {name: login-pin, method: pin, numberMatching: true, timeToLive: 120}
            authenticators: [{id: pin, type: pin}]
            identityProviders:
              - {id: web, type: idp.browser, name: Example login,
                 config: {authorizationURL: "\(baseURL)/login/authorize", login: gatehouse-login}}
            login:
              passwordCost: 14
              clients:
                - {id: gatehouse, name: Example App, loopbackRedirectPaths: [/callback], signInMethods: [password]}
                - {id: admin-console, name: Admin console, redirectURIs: ["\(baseURL)/admin/callback"]}
              phone: {pushType: \(pushType)}
            adminConsole:
              loginClient: admin-console
              operators:
                - {subject: \(People.ann), scopes: [admin:read, admin:write]}
                - {subject: \(People.bob), scopes: [admin:read]}
              acrValues: \(acrValues)
            \(consoleExtra)
            """.utf8
        ),
        format: YAMLManifestFormat(),
        source: "console.yaml",
        additionalSections: ["server", "login", "adminConsole"]
    )
}

/// The server's storage with the login's and the console's tables, for one test: SQLite in a
/// temporary folder, or a fresh schema of the test cluster when `GATEHOUSE_TEST_DATABASE=postgres`.
func withConsoleStorage(_ body: (ServerStorage, URL) async throws -> Void) async throws {
    let database: ServerDatabase
    var cleanUp: () -> Void
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-console-\(UUID())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    if ProcessInfo.processInfo.environment["GATEHOUSE_TEST_DATABASE"] == "postgres" {
        let cluster = try await PostgresTestCluster.shared()
        let schema = try await cluster.makeSchema("console")
        database = try ServerDatabase(cluster.url(schema: schema, pool: 4))
        cleanUp = {
            try? cluster.dropSchemaBlocking(schema)
            try? FileManager.default.removeItem(at: directory)
        }
    } else {
        database = .sqlite(path: directory.appendingPathComponent("server.sqlite").path)
        cleanUp = { try? FileManager.default.removeItem(at: directory) }
    }
    defer { cleanUp() }
    let storage = try await ServerStorage.open(
        database,
        migrations: [LoginStore.migrations, AdminConsoleStore.migrations],
        logger: consoleLogs.logger
    )
    do {
        try await body(storage, directory)
    } catch {
        await storage.shutdown()
        throw error
    }
    await storage.shutdown()
}

/// Runs `body` with the console's token server listening on a loopback port: the login's phone
/// sign-in with `pushType`, the users ann, bob and carl in its directory.
func withConsole(
    pushType: String = "login-pin",
    consoleExtra: String = "",
    _ body: (ConsoleFixture) async throws -> Void
) async throws {
    let port = try await freePort()
    let baseURL = "http://127.0.0.1:\(port)"
    let manifest = try consoleManifest(baseURL: baseURL, pushType: pushType, consoleExtra: consoleExtra)
    try await withConsoleStorage { storage, directory in
        let clock = ManualClock(Date())
        var environment = PluginEnvironment(logger: consoleLogs.logger, clock: clock)
        let login = try LoginServer(manifest: manifest, storage: storage, environment: environment)
        for user in [People.ann, People.bob, People.carl] { try await login.addUser(user, password: People.password) }
        environment.services[BrowserLoginServiceKey.self, named: "gatehouse-login"] = login
        let console = try AdminConsole(manifest: manifest, login: login, storage: storage, environment: environment)
        let server = try await EmbeddedTokenServer(
            storage: storage,
            manifest: manifest,
            registry: try PluginRegistry.builtIn,
            environment: environment,
            extensions: [login, console]
        )
        let application = HTTPTokenServer.application(server: server.server, port: port, logger: consoleLogs.logger)
        let group = ServiceGroup(configuration: .init(services: [application], logger: consoleLogs.logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            do {
                try await waitUntilListening(baseURL)
                try await body(
                    ConsoleFixture(
                        server: server,
                        login: login,
                        console: console,
                        manifest: manifest,
                        clock: clock,
                        baseURL: baseURL,
                        directory: directory,
                        storage: storage
                    )
                )
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        await server.server.shutdown()
    }
}

/// Waits (at most 10 s) until the login's discovery document answers at `baseURL`.
private func waitUntilListening(_ baseURL: String) async throws {
    let transport = HTTPTransport(baseURL: baseURL)
    for _ in 0..<100 {
        if let answer = try? await transport.send(WireRequest(method: "GET", path: LoginServer.discoveryPath)),
            answer.status == 200
        {
            return
        }
        try await Task.sleep(for: .milliseconds(100))
    }
    throw GenericError(.serverNotReachable)
}
