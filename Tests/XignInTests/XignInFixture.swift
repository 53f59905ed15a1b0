import CustomAPIIdentityProvider
import Foundation
import GRDB
import GatehouseKernel
import GatehousePlugins
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

/// An embedded token server with the XignIn manager mounted, a registry client, and a linked
/// service listening on a loopback port.
struct XignInFixture {
    let directory: URL
    let server: EmbeddedTokenServer
    let registry: Registry
    let deliveries: Deliveries
    let url = URL(string: "http://manager.test")!  // swift-format-ignore: NeverForceUnwrap

    var outbox: URL { directory.appendingPathComponent("server/xignin/outbox") }

    /// The activation code of the newest message in the outbox for `address`.
    func activationCode(for address: String) throws -> String {
        let files = try FileManager.default.contentsOfDirectory(at: outbox, includingPropertiesForKeys: nil).sorted {
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

    func snapshot() throws -> String {
        let queue = try DatabaseQueue(path: directory.appendingPathComponent("server/xignin/xignin.sqlite").path)
        return try queue.read { db in
            var text = ""
            for table in ["accounts", "activation_codes", "activations", "pending_attributes", "pin_keys"] {
                for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY rowid") {
                    text += "\(table): \(row)\n"
                }
            }
            return text
        }
    }

    func count(_ table: String) throws -> Int {
        try DatabaseQueue(path: directory.appendingPathComponent("server/xignin/xignin.sqlite").path).read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
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

    static func manifest(registration: String, webhookPort: Int) -> String {
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
        """
    }
}

/// Runs `body` with a fresh manager; the linked service answers 204 when `linkedServiceAccepts`.
func withXignIn(
    registration: String = "open",
    linkedServiceAccepts: Bool = true,
    _ body: (XignInFixture) async throws -> Void
) async throws {
    let deliveries = Deliveries(accepts: linkedServiceAccepts)
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
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-xignin-\(UUID().uuidString)"
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let manifest = try ManifestLoader.jsonAndYAML.parse(
                Data(XignInFixture.manifest(registration: registration, webhookPort: port).utf8),
                format: YAMLManifestFormat(),
                source: "xignin.yaml",
                additionalSections: ["server", "xignin"]
            )
            let environment = PluginEnvironment(
                services: PluginServices().setting(
                    CustomRegistrationAPIKey.self,
                    named: "unused",
                    to: UnusedRegistrationAPI()
                )
            )
            let manager = try XignInManager(
                manifest: manifest,
                directory: directory.appendingPathComponent("server/xignin"),
                environment: environment
            )
            let server = try EmbeddedTokenServer(
                directory: directory.appendingPathComponent("server"),
                manifest: manifest,
                registry: try PluginRegistry.builtIn,
                environment: environment,
                extensions: [manager]
            )
            let registry = try Registry(dataDirectory: directory.appendingPathComponent("device")) { _ in server }
            try await body(
                XignInFixture(directory: directory, server: server, registry: registry, deliveries: deliveries)
            )
        } catch {
            await group.triggerGracefulShutdown()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
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
