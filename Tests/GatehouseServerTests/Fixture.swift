import BiometricAuthenticator
import CustomAPIIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehousePlugins
import GatehousePostgresTestSupport
import GatehouseProtocol
import GatehouseTesting
import GatehouseYAML
import Hummingbird
import Logging
import MetricsTestKit
import ServiceLifecycle
import Synchronization
import TOTPAuthenticator
import Testing

@testable import GatehouseServer

/// Where the tests' servers keep their state: SQLite (the default), or PostgreSQL when
/// `GATEHOUSE_TEST_DATABASE=postgres` (a private cluster, a fresh schema per test); `scripts/test`
/// runs the server tests both ways.
enum TestDatabase: String {
    case sqlite
    case postgres

    static let current =
        TestDatabase(rawValue: ProcessInfo.processInfo.environment["GATEHOUSE_TEST_DATABASE"] ?? "")
        ?? .sqlite
}

/// How the tests reach the server: in-process, or over HTTP on a loopback port.
enum Mode: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case embedded
    case http

    var testDescription: String { rawValue }
}

/// The registration API of the tests: init sends code 4821 to the given address; completion
/// checks it and names the user by that address.
struct FixedCodeAPI: CustomRegistrationAPI {
    func initialize(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        CustomRegistrationReply(status: 2000, data: "code 4821", state: request.data)
    }

    func complete(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        guard request.data == "4821", let user = request.state else {
            return CustomRegistrationReply(status: 4001, data: "wrong code")
        }
        return CustomRegistrationReply(status: 2000, data: "welcome \(user)", userID: user)
    }
}

/// Records every request and response, and can be switched off to play an unreachable server.
final class RecordingTransport: TokenServerTransport {
    let inner: any TokenServerTransport
    let exchanges = Mutex<[(WireRequest, WireResponse)]>([])
    let offline = Mutex(false)
    /// Requests for which the server acts but its answer never arrives, as when the connection
    /// drops (or the device dies) just after the server committed.
    let losesAnswer = Mutex<(@Sendable (WireRequest) -> Bool)?>(nil)
    /// Requests a balancer in front answers 503 before any instance sees them.
    let unavailable = Mutex<(@Sendable (WireRequest) -> Bool)?>(nil)

    init(_ inner: any TokenServerTransport) { self.inner = inner }

    var baseURL: String { inner.baseURL }

    func send(_ request: WireRequest) async throws -> WireResponse {
        if offline.withLock({ $0 }) { throw GenericError(.serverNotReachable) }
        if unavailable.withLock({ $0?(request) }) == true {
            return WireResponse(
                status: 503,
                headers: ["Content-Type": "application/json", "Retry-After": "1"],
                body: Data(#"{"error":"temporarily_unavailable","error_description":"Try again."}"#.utf8)
            )
        }
        let response = try await inner.send(request)
        exchanges.withLock { $0.append((request, response)) }
        if losesAnswer.withLock({ $0?(request) }) == true { throw GenericError(.networkConnectivityFailure) }
        return response
    }

    var recorded: [(WireRequest, WireResponse)] { exchanges.withLock { $0 } }

    private let relays = Mutex<[UUID: Task<Void, Never>]>([:])

    /// Streams pass through a relay the test can cut (``dropStreams()``), as a network would.
    func open(_ request: WireRequest) async throws -> (WireResponse, AsyncThrowingStream<Data, any Error>) {
        if offline.withLock({ $0 }) { throw GenericError(.serverNotReachable) }
        let (head, chunks) = try await inner.open(request)
        let (relay, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        let id = UUID()
        let task = Task {
            do {
                for try await chunk in chunks { continuation.yield(chunk) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        relays.withLock { $0[id] = task }
        continuation.onTermination = { [weak self] _ in
            task.cancel()
            self?.relays.withLock { _ = $0.removeValue(forKey: id) }
        }
        return (head, relay)
    }

    /// Cuts every open stream, as a dropped connection does.
    func dropStreams() {
        let open = relays.withLock { relays in
            defer { relays = [:] }
            return Array(relays.values)
        }
        for task in open { task.cancel() }
    }
}

/// A token server (embedded or over HTTP) with its state in a temporary directory.
/// The statuses the `test.scripted` custom authenticator's service answers, in order (2000 when
/// the script is empty), and how many answers it checked.
final class StatusScript: Sendable {
    private let state = Mutex<(statuses: [Int], checked: Int)>(([], 0))
    /// How long each check takes, for tests that act while a check is under way.
    let delay = Mutex<Duration>(.zero)
    /// Checks begun (counted before the delay): a test waits for it to act while one is under way.
    let begun = Mutex(0)

    func answer(_ statuses: Int...) { state.withLock { $0.statuses += statuses } }
    var checked: Int { state.withLock { $0.checked } }

    /// Scripted instead of a status: the service throws, as one whose backend is down does.
    static let outage = -1

    struct BackendDown: Error {}

    struct UnscriptableStatus: Error { let status: Int }

    func next() throws -> CustomAuthenticatorResult<String> {
        let status = state.withLock { state -> Int in
            state.checked += 1
            return state.statuses.isEmpty ? 2000 : state.statuses.removeFirst()
        }
        let payload = "status \(status)"
        switch status {
        case Self.outage: throw BackendDown()
        case 2000: return .success(payload: payload)
        case 4000: return .retry(payload: payload)
        case 4001: return .alreadyRegistered(payload: payload)
        case 4002: return .notRegistered(payload: payload)
        case 5000: return .failure(payload: payload)
        default: throw UnscriptableStatus(status: status)
        }
    }
}

extension PluginRegistry {
    /// The built-in plugins, the TOTP example, and `test.scripted`: a custom authenticator made
    /// with the closure adapters whose service answers from `script`.
    static func testing(_ script: StatusScript) throws -> PluginRegistry {
        var registry = try PluginRegistry.builtIn.registering(TOTPAuthenticatorPlugin.self)
        try registry.registerCustomAuthenticator(
            "test.scripted",
            summary: "answers scripted statuses",
            device: ClosureCustomAuthenticatorDevice(),
            service: ClosureCustomAuthenticatorService(
                register: { _ in try script.next() },
                authenticate: { _ in
                    script.begun.withLock { $0 += 1 }
                    let delay = script.delay.withLock { $0 }
                    if delay > .zero { try await Task.sleep(for: delay) }
                    return try script.next()
                }
            )
        )
        return registry
    }
}

struct Fixture {
    let directory: URL
    /// The server the transport reaches.
    let server: TokenServer
    let script: StatusScript
    /// The devices' simulated biometric sensor.
    let sensor = SimulatedBiometricSensor()
    let transport: RecordingTransport
    let manifest: Manifest
    let serverLog: RecordingLogger
    let clientLog: RecordingLogger
    /// Where the server's APNs pushes go in these tests.
    let pushes: InProcessPushTransport
    /// The server's clock, which the clients share (DPoP proofs are dated by it).
    let clock: any WallClock
    /// What the server counted (the cluster tests' servers count elsewhere).
    var metrics = TestMetrics()

    static let portalSecret = "portal-secret-0123456789"
    static let gatewaySecret = "gateway-secret-0123456789"
    static let helpdeskSecret = "helpdesk-secret-0123456789"
    static let auditorSecret = "auditor-secret-0123456789"
    static let boundAdminSecret = "bound-admin-secret-0123456789"

    /// The server's SQLite file (when the tests run on SQLite).
    var serverDatabase: String { directory.appendingPathComponent("server/server.sqlite").path }

    /// The server's database engine's dialect.
    var dialect: SQLDialect { server.store.engine.dialect }

    /// Reads the server's database behind its back (either engine).
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await server.store.lookup(body)
    }

    /// Changes the server's database behind its back (either engine): no cache hears of it.
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await server.store.engine.write(body)
    }

    /// Records every value the profiles' failure counter takes from now on (``highestFailureSeen()``).
    func watchFailures() async throws {
        let statements =
            dialect == .sqlite
            ? [
                "CREATE TABLE counter_seen (failures INTEGER NOT NULL)",
                """
                CREATE TRIGGER counter_watch AFTER UPDATE OF failures ON profiles
                BEGIN INSERT INTO counter_seen VALUES (NEW.failures); END
                """,
            ]
            : [
                "CREATE TABLE counter_seen (failures BIGINT NOT NULL)",
                """
                CREATE FUNCTION counter_watch() RETURNS trigger LANGUAGE plpgsql
                AS $$ BEGIN INSERT INTO counter_seen VALUES (NEW.failures); RETURN NEW; END $$
                """,
                """
                CREATE TRIGGER counter_watch AFTER UPDATE OF failures ON profiles
                FOR EACH ROW EXECUTE FUNCTION counter_watch()
                """,
            ]
        try await write { db in
            for statement in statements { try db.execute(sql: statement) }
        }
    }

    /// The highest value the failure counter took since ``watchFailures()``.
    func highestFailureSeen() async throws -> Int? {
        try await read { db in try Int.fetchOne(db, sql: "SELECT MAX(failures) FROM counter_seen") }
    }

    static func manifestText(
        maxPinFailures: Int,
        registrationAuthenticators: [String] = ["pin"],
        enrolment: String = "single",
        mobileAuth: Bool = true,
        requireDPoPNonce: Bool = false,
        publicURL: String? = nil,
        installationLimit: (perMinute: Int, burst: Int)? = nil,
        clientAuthenticationFailuresPerMinute: Int? = nil
    ) -> String {
        // The mobile authentication section, indented under `server:`.
        let mobileAuthSection = """
              mobileAuth:
                enrolment: \(enrolment)
                apiClients:
                  - {id: portal, secret: \(Fixture.portalSecret), callbackPrefixes: ["http://127.0.0.1:"]}
                  - {id: other-portal, secret: other-secret-0123456789}
                types:
                  - {name: login, method: confirmation, timeToLive: 60, defaultMessage: "Sign in to Example?"}
                  - {name: matched, method: confirmation, numberMatching: true, defaultMessage: "Sign in?"}
                  - {name: payment, method: pin, transactionSigning: true}
                  - {name: face, method: biometric, authenticator: face, defaultMessage: "Approve with your face"}
                  - {name: custom, method: custom, authenticator: scripted, defaultMessage: "Approve"}
                  - {name: login-qr, method: confirmation, delivery: otp, timeToLive: 60, defaultMessage: "Sign in?"}
                  - {name: payment-qr, method: pin, delivery: otp, transactionSigning: true, defaultMessage: "Pay?"}
                  - {name: face-qr, method: biometric, delivery: otp, authenticator: face, defaultMessage: "Approve"}
                  - {name: custom-qr, method: custom, delivery: otp, authenticator: scripted, defaultMessage: "Approve"}
            """
        return """
            server:
              clients:
                - id: test-app
                  allowedScopes: [read, write]
                  defaultScopes: [read]
                  implicitScopes: [read]
                  deviceScopes: [catalogue]
                  statelessRegistration: true
                  registrationValidity: 3600
                  webLoginTargets: ["https://shop.example/account/"]
                - id: plain-app
              resourceServers:
                - {id: gateway, secret: \(Fixture.gatewaySecret)}
              admin:
                clients:
                  - {id: helpdesk, secret: \(Fixture.helpdeskSecret), scopes: [admin:read, admin:write]}
                  - {id: auditor, secret: \(Fixture.auditorSecret), scopes: [admin:read]}
                  - {id: bound-admin, secret: \(Fixture.boundAdminSecret), scopes: [admin:write], requireDPoP: true}
              requireDPoPNonce: \(requireDPoPNonce)
            \(publicURL.map { "  publicURL: \($0)" } ?? "")
            \(installationLimit.map { "  rateLimitPerMinute: \($0.perMinute)\n  rateLimitBurst: \($0.burst)" } ?? "")
            \(clientAuthenticationFailuresPerMinute.map { "  clientAuthenticationFailuresPerMinute: \($0)" } ?? "")
              cleanupBatch: 10
              maxPinFailures: \(maxPinFailures)
              maxRequestBytes: 4096
              registrationAuthenticators: [\(registrationAuthenticators.joined(separator: ", "))]
            \(mobileAuth ? mobileAuthSection : "")
            authenticators:
              - id: pin
                type: pin
                name: PIN
                config:
                  policy: {length: 6, maxSimilarDigits: 2}
              - id: totp
                type: example.totp
                name: One-time code
              - id: scripted
                type: test.scripted
                name: Scripted custom authenticator
              - id: face
                type: biometric.simulated
                name: Face
                config: {sensor: face-sensor}
            identityProviders:
              - id: codes
                type: idp.customAPI
                name: Code registration
                config: {twoStep: true, handler: codes}
            """
    }

    /// A client (device) with its own data directory.
    func client(_ name: String = "device", appID: String = "test-app") throws -> UserClient {
        let plugins = try PluginRegistry.testing(script).load(
            manifest,
            environment: PluginEnvironment(
                logger: clientLog.logger,
                services: PluginServices().setting(SimulatedBiometricSensorKey.self, named: "face-sensor", to: sensor)
            ),
            sides: .client
        )
        return try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: directory.appendingPathComponent(name),
                transport: transport,
                appID: appID,
                plugins: plugins,
                clock: clock,
                logger: clientLog.logger
            )
        )
    }

    /// Every row of every table but the DPoP replay cache, to compare before and after a request.
    func snapshot() async throws -> String {
        try await snapshot(of: ["clients", "profiles", "registrations", "flows", "families", "tokens"])
    }

    /// Every row of `tables`, in storage order.
    func snapshot(of tables: [String]) async throws -> String {
        try await read { db in
            var text = ""
            for table in tables {
                let rows = try SQLRow.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY \(db.dialect.rowIdentifier)")
                for row in rows { text += "\(table): \(zip(row.columns, row.values).map { "\($0)=\($1)" })\n" }
            }
            return text
        }
    }

    /// Every value of every table of the server's PostgreSQL schema, end to end: text as UTF-8,
    /// binary as it is.
    func storedValues() async throws -> Data {
        try await read { db in
            var contents = Data()
            let tables = try String.fetchAll(
                db,
                sql: """
                    SELECT CAST(table_name AS TEXT) FROM information_schema.tables
                    WHERE table_schema = current_schema() AND table_name <> 'gatehouse_migrations'
                    """
            )
            for table in tables {
                for row in try SQLRow.fetchAll(db, sql: "SELECT * FROM \(table)") {
                    for value in row.values {
                        switch value {
                        case .text(let text): contents += Data(text.utf8)
                        case .blob(let data): contents += data
                        default: contents += Data("\(value)".utf8)
                        }
                    }
                }
            }
            return contents
        }
    }

    /// How often the server counted the security event `event`, in any flow.
    func securityEvents(_ event: String) -> Int64 {
        metrics.counters.filter { counter in
            counter.label == "gatehouse_security_events_total"
                && counter.dimensions.contains { $0.0 == "event" && $0.1 == event }
        }
        .reduce(0) { $0 + $1.totalValue }
    }

    /// The audit lines (`log=audit`) with `event=<event>`.
    func auditLines(_ event: String) -> [String] {
        serverLog.lines.filter { $0.contains("log=audit") && $0.contains("event=\(event)") }
    }

    func count(_ table: String) async throws -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0 }
    }

    /// Sends a raw request, bypassing the SDK.
    func send(
        _ method: String,
        _ path: String,
        body: Data = Data(),
        headers: [String: String] = [:]
    ) async throws -> WireResponse {
        var all = headers
        if !body.isEmpty, all["Content-Type"] == nil { all["Content-Type"] = "application/json" }
        return try await transport.send(WireRequest(method: method, path: path, headers: all, body: body))
    }
}

/// Runs `body` against a fresh server in `mode`, and tears it down afterwards.
func withFixture(
    _ mode: Mode,
    maxPinFailures: Int = 3,
    registrationAuthenticators: [String] = ["pin"],
    enrolment: String = "single",
    mobileAuth: Bool = true,
    requireDPoPNonce: Bool = false,
    clock: any WallClock = SystemWallClock(),
    pushTransports: [PushPlatform: any PushTransport]? = nil,
    _ body: (Fixture) async throws -> Void
) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-test-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let manifest = try ManifestLoader.jsonAndYAML.parse(
        Data(
            Fixture.manifestText(
                maxPinFailures: maxPinFailures,
                registrationAuthenticators: registrationAuthenticators,
                enrolment: enrolment,
                mobileAuth: mobileAuth,
                requireDPoPNonce: requireDPoPNonce
            ).utf8
        ),
        format: YAMLManifestFormat(),
        source: "test.yaml",
        additionalSections: ["server"]
    )
    let serverLog = RecordingLogger(label: "server", level: .trace)
    let clientLog = RecordingLogger(label: "client", level: .trace)
    var environment = PluginEnvironment(logger: serverLog.logger, clock: clock)
    environment.services[CustomRegistrationAPIKey.self, named: "codes"] = FixedCodeAPI()
    let script = StatusScript()
    let pushes = InProcessPushTransport()
    let metrics = TestMetrics()
    let registry = try PluginRegistry.testing(script)
    let embedded: EmbeddedTokenServer
    var schema: String?
    switch TestDatabase.current {
    case .sqlite:
        embedded = try EmbeddedTokenServer(
            directory: directory.appendingPathComponent("server"),
            manifest: manifest,
            registry: registry,
            environment: environment,
            pushTransports: pushTransports ?? [.apns: pushes],
            metrics: metrics
        )
    case .postgres:
        let cluster = try await PostgresTestCluster.shared()
        let made = try await cluster.makeSchema()
        schema = made
        try PrivateFiles.createFolder(directory.appendingPathComponent("server"))
        embedded = EmbeddedTokenServer(
            server: try await TokenServer(
                manifest: manifest,
                registry: registry,
                database: try ServerDatabase(cluster.url(schema: made)),
                environment: environment,
                pushTransports: pushTransports ?? [.apns: pushes],
                metrics: metrics
            )
        )
    }
    let fixture = { (transport: any TokenServerTransport) in
        Fixture(
            directory: directory,
            server: embedded.server,
            script: script,
            transport: RecordingTransport(transport),
            manifest: manifest,
            serverLog: serverLog,
            clientLog: clientLog,
            pushes: pushes,
            clock: clock,
            metrics: metrics
        )
    }
    do {
        try await serve(embedded, mode, logger: serverLog.logger) { transport in try await body(fixture(transport)) }
    } catch {
        await embedded.server.shutdown()
        if let schema { try? await PostgresTestCluster.shared().dropSchema(schema) }
        throw error
    }
    await embedded.server.shutdown()
    if let schema { try await PostgresTestCluster.shared().dropSchema(schema) }
}

/// Runs `body` with a transport to `embedded`'s server: itself, or HTTP on a loopback port.
private func serve(
    _ embedded: EmbeddedTokenServer,
    _ mode: Mode,
    logger: Logger,
    _ body: (any TokenServerTransport) async throws -> Void
) async throws {
    switch mode {
    case .embedded:
        try await body(embedded)
    case .http:
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let application = HTTPTokenServer.application(server: embedded.server, port: 0, logger: logger) { port in
            continuation.yield(port)
        }
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw GenericError(.serverNotReachable) }
            do {
                try await body(HTTPTransport(baseURL: "http://127.0.0.1:\(port)"))
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}

/// Registers `email` with PIN `pin` through the code API.
func register(
    _ client: UserClient,
    email: String = "jane@example.com",
    pin: String = "258147"
) async throws -> UserProfile {
    let script = ScriptedResponder([
        .customRegistration(.data(email)), .customRegistration(.data("4821")), .createPin(pin),
    ])
    let result = try await client.registerUser(delegate: script)
    #expect(await script.isFinished)
    return result.profile
}
