import CustomAPIIdentityProvider
import Foundation
import GatehouseKernel
import GatehousePlugins
import GatehousePostgresTestSupport
import GatehouseProtocol
import GatehouseServer
import GatehouseYAML
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import XignInClient
import XignInManager
import XignInValidators

/// A registration API nobody calls here; the token server needs an identity provider.
struct UnusedRegistrationAPI: CustomRegistrationAPI {
    func initialize(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        CustomRegistrationReply(status: 5000)
    }
    func complete(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        CustomRegistrationReply(status: 5000)
    }
}

/// What the linked service received.
final class Deliveries: Sendable {
    let received = Mutex<[LinkedServiceDelivery]>([])
    let accepts: Bool
    init(accepts: Bool) { self.accepts = accepts }
}

/// Where the tests keep the manager's state: the token server's SQLite file (the default), or a
/// fresh schema of a private PostgreSQL cluster with `GATEHOUSE_TEST_DATABASE=postgres`.
enum TestDatabase {
    static let isPostgres = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_DATABASE"] == "postgres"
}

/// One test's database: a SQLite file in a folder, or a PostgreSQL schema made for the test.
struct TestDatabaseLocation {
    let database: ServerDatabase
    let schema: String?
    private let cluster: PostgresTestCluster?

    init(folder: URL, postgres: Bool = TestDatabase.isPostgres) async throws {
        if postgres {
            let cluster = try await PostgresTestCluster.shared()
            let schema = try await cluster.makeSchema("xignin")
            self.cluster = cluster
            self.schema = schema
            database = try ServerDatabase(cluster.url(schema: schema))
        } else {
            try PrivateFiles.createFolder(folder)
            cluster = nil
            schema = nil
            database = .sqlite(path: folder.appendingPathComponent("server.sqlite").path)
        }
    }

    /// The storage with the manager's tables, as `serve` opens it: each instance opens its own.
    func open() async throws -> ServerStorage {
        try await ServerStorage.open(
            database,
            migrations: [XignInManager.migrations],
            logger: Logger(label: "xignin-test-storage")
        )
    }

    /// Drops the PostgreSQL schema; a SQLite file goes with its folder.
    func drop() {
        if let schema { try? cluster?.dropSchemaBlocking(schema) }
    }
}

/// An embedded token server with the XignIn manager mounted, both on one storage, a registry
/// client, and a linked service listening on a loopback port.
struct XignInFixture {
    let directory: URL
    let server: EmbeddedTokenServer
    let storage: ServerStorage
    let registry: Registry
    let deliveries: Deliveries
    let url = URL(string: "http://manager.test")!  // swift-format-ignore: NeverForceUnwrap

    var outbox: URL { directory.appendingPathComponent("server/xignin/outbox") }

    /// The activation code of the newest message in the outbox for `address`.
    func activationCode(for address: String) throws -> String {
        try XignInFixture.activationCode(for: address, in: outbox)
    }

    /// The activation code of the newest message for `address` in the outbox `folder`.
    static func activationCode(for address: String, in folder: URL) throws -> String {
        let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil).sorted {
            $0.path < $1.path
        }
        for file in files.reversed() {
            let text = try String(contentsOf: file, encoding: .utf8)
            guard text.contains("To: \(address)\r\n"),
                let line = text.split(separator: "\r\n").first(where: { $0.hasPrefix("Activation code: ") })
            else { continue }
            return String(line.dropFirst("Activation code: ".count))
        }
        throw CocoaError(.fileNoSuchFile)
    }

    /// The manager's tables and the column each is ordered by.
    static let tables = [
        ("accounts", "id"), ("activation_codes", "code_hash"), ("activations", "id"),
        ("pending_attributes", "account_id"), ("pin_keys", "token"), ("activation_attempts", "token"),
    ]

    /// Every row of the manager's tables, as text.
    func snapshot() async throws -> String {
        try await storage.read { db in
            var text = ""
            for (table, key) in Self.tables {
                for row in try SQLRow.fetchAll(db, sql: "SELECT * FROM xignin_\(table) ORDER BY \(key)") {
                    text += "\(table): \(zip(row.columns, row.values).map { "\($0)=\($1)" })\n"
                }
            }
            return text
        }
    }

    /// The rows of the manager's table `table` (its name without `xignin_`).
    func count(_ table: String) async throws -> Int {
        try await XignInFixture.count(table, in: storage)
    }

    static func count(_ table: String, in storage: ServerStorage) async throws -> Int {
        try await storage.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM xignin_\(table)") ?? 0 }
    }

    /// Every value the manager keeps, in bytes: what a copy of its tables would give away.
    func storedBytes() async throws -> Data {
        try await storage.read { db in
            var bytes = Data()
            for (table, _) in Self.tables {
                for row in try SQLRow.fetchAll(db, sql: "SELECT * FROM xignin_\(table)") {
                    for value in row.values {
                        switch value {
                        case .blob(let data): bytes.append(data)
                        case .text(let text): bytes.append(Data(text.utf8))
                        default: bytes.append(Data("\(value)".utf8))
                        }
                    }
                }
            }
            return bytes
        }
    }

    /// Sends a raw request to the manager.
    func send(
        _ method: String,
        _ path: String,
        body: String = "",
        contentType: String = "application/json"
    ) async throws -> WireResponse {
        try await server.send(
            WireRequest(method: method, path: path, headers: ["Content-Type": contentType], body: Data(body.utf8))
        )
    }

    static func manifest(registration: String, webhookPort: Int, evaluationsPerMinute: Int = 30) -> String {
        """
        server: {clients: [{id: test-app}]}
        authenticators: [{id: pin, type: pin}]
        identityProviders: [{id: unused, type: idp.customAPI, config: {handler: unused}}]
        xignin:
          managerURL: https://manager.example/xignin
          registration: \(registration)
          thirdPartyName: Servicekonto.NRW
          pin: {minLength: 5, maxLength: 8}
          alias: {minLength: 2, maxLength: 20}
          blockedEmailDomains: [blocked.example]
          categories:
            - {id: email, types: [email], required: [email]}
            - {id: idCard, types: [idCard], required: [firstName, lastName, birthdate, placeOfBirth]}
          serviceMappings:
            - {id: keycloak, webhook: "http://127.0.0.1:\(webhookPort)/provision"}
          maxActivationAttempts: 3
          evaluationsPerMinute: \(evaluationsPerMinute)
        """
    }

    static func parsedManifest(
        registration: String = "open",
        webhookPort: Int,
        evaluationsPerMinute: Int = 30
    ) throws -> Manifest {
        try ManifestLoader.jsonAndYAML.parse(
            Data(
                manifest(
                    registration: registration,
                    webhookPort: webhookPort,
                    evaluationsPerMinute: evaluationsPerMinute
                ).utf8
            ),
            format: YAMLManifestFormat(),
            source: "xignin.yaml",
            additionalSections: ["server", "xignin"]
        )
    }

    /// The plugins' services: the identity provider's registration API, which nobody calls.
    static func environment() -> PluginEnvironment {
        PluginEnvironment(
            services: PluginServices().setting(
                CustomRegistrationAPIKey.self,
                named: "unused",
                to: UnusedRegistrationAPI()
            )
        )
    }
}

/// Runs `body` with the port of a linked service that records what it receives and answers 204
/// when `accepts`, else 400.
func withLinkedService(
    accepts: Bool,
    _ body: (_ port: Int, Deliveries) async throws -> Void
) async throws {
    let deliveries = Deliveries(accepts: accepts)
    let router = Router()
    router.post("/provision") { request, _ -> Response in
        var request = request
        let buffer = try await request.collectBody(upTo: 65536)
        if let delivery = try? JSONDecoder().decode(LinkedServiceDelivery.self, from: Data(buffer.readableBytesView)) {
            deliveries.received.withLock { $0.append(delivery) }
        }
        return Response(status: deliveries.accepts ? .noContent : .badRequest)
    }
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let logger = Logger(label: "linked-service")
    let application = Application(
        router: router,
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) },
        logger: logger
    )
    let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { return }
        do {
            try await body(port, deliveries)
        } catch {
            await group.triggerGracefulShutdown()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
    }
}

/// Runs `body` with a fresh manager on a fresh storage; the linked service answers 204 when
/// `linkedServiceAccepts`. With `earlierDatabase`, the manager first imports the folder an
/// earlier version kept its own database in.
func withXignIn(
    registration: String = "open",
    linkedServiceAccepts: Bool = true,
    earlierDatabase: URL? = nil,
    _ body: (XignInFixture) async throws -> Void
) async throws {
    try await withLinkedService(accepts: linkedServiceAccepts) { port, deliveries in
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-xignin-\(UUID().uuidString)"
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        let location = try await TestDatabaseLocation(folder: directory.appendingPathComponent("server"))
        defer { location.drop() }
        let storage = try await location.open()
        do {
            let manifest = try XignInFixture.parsedManifest(registration: registration, webhookPort: port)
            let environment = XignInFixture.environment()
            let manager = try XignInManager(
                manifest: manifest,
                storage: storage,
                mail: OutboxMailSender(directory: directory.appendingPathComponent("server/xignin/outbox")),
                environment: environment
            )
            if let earlierDatabase { try await manager.importEarlierDatabase(in: earlierDatabase) }
            let server = try await EmbeddedTokenServer(
                storage: storage,
                manifest: manifest,
                registry: try PluginRegistry.builtIn,
                environment: environment,
                extensions: [manager]
            )
            let registry = try Registry(dataDirectory: directory.appendingPathComponent("device")) { _ in server }
            try await body(
                XignInFixture(
                    directory: directory,
                    server: server,
                    storage: storage,
                    registry: registry,
                    deliveries: deliveries
                )
            )
        } catch {
            await storage.shutdown()
            throw error
        }
        await storage.shutdown()
    }
}

/// Parameters for the e-mail category, filled in with `email`, PIN `pin` and optional alias.
func filled(
    _ parameters: RegistrationParameters,
    email: String,
    pin: String = "24680",
    alias: String? = nil
) -> RegistrationParameters {
    var parameters = parameters
    _ = parameters.pinSpec.setPin(pin)
    if let category = parameters.categories.first(where: { $0.id == "email" }) { _ = parameters.setSelection(category) }
    _ = parameters.selection?.info.email.setValue(value: email)
    if let alias { _ = parameters.setAlias(alias) }
    return parameters
}
