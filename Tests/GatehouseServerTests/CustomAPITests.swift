import CustomAPIIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehousePlugins
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import GatehouseYAML
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import Testing

/// A custom registration API served over HTTP on a loopback port, as an integrator would run it.
private final class Received: Sendable {
    let calls = Mutex<[String]>([])
}

private func withRegistrationAPI(_ body: (URL, Received) async throws -> Void) async throws {
    let received = Received()
    let router = Router()
    router.post("/register") { request, _ -> Response in
        var request = request
        let buffer = try await request.collectBody(upTo: 16384)
        let json = try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any] ?? [:]
        let step = json["step"] as? String ?? ""
        let data = json["data"] as? String
        received.calls.withLock { $0.append("\(step):\(data ?? "nil")") }
        if data == "down" { return Response(status: .serviceUnavailable) }  // the API's backend is out
        let reply: [String: Any] =
            switch (step, data) {
            case ("init", let user?): ["status": 2000, "data": "code 7310", "state": user]
            case ("complete", "7310"): ["status": 2000, "data": "hello", "user_id": json["state"] as? String ?? ""]
            case ("complete", "blocked"): ["status": 5004, "data": "account blocked"]
            default: ["status": 4001, "data": "try again"]
            }
        return Response(
            status: .ok,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: reply)))
        )
    }
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let logger = Logger(label: "registration-api")
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
        guard let port = await iterator.next(), let url = URL(string: "http://127.0.0.1:\(port)/register") else {
            return
        }
        do {
            try await body(url, received)
        } catch {
            await group.triggerGracefulShutdown()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
    }
}

@Suite("Custom API over HTTP", .serialized)
struct CustomAPITests {
    @Test("a two-step registration through an HTTP custom API, with its info on success and on failure")
    func httpCustomAPI() async throws {
        try await withRegistrationAPI { url, received in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "gatehouse-api-\(UUID().uuidString)"
            )
            defer { try? FileManager.default.removeItem(at: directory) }
            let text = """
                server:
                  clients: [{id: test-app}]
                authenticators: [{id: pin, type: pin}]
                identityProviders:
                  - {id: partner, type: idp.customAPI, config: {twoStep: true, url: "\(url.absoluteString)"}}
                """
            let manifest = try ManifestLoader.jsonAndYAML.parse(
                Data(text.utf8),
                format: YAMLManifestFormat(),
                source: "api.yaml",
                additionalSections: ["server"]
            )
            let registry = try PluginRegistry.builtIn
            let server = try EmbeddedTokenServer(
                directory: directory.appendingPathComponent("server"),
                manifest: manifest,
                registry: registry
            )
            let recording = RecordingTransport(server)
            let client = try UserClient(
                configuration: ClientConfiguration(
                    dataDirectory: directory.appendingPathComponent("device"),
                    transport: recording,
                    appID: "test-app",
                    plugins: try registry.load(manifest, sides: .client)
                )
            )
            let script = ScriptedResponder([
                .customRegistration(.data("ann")), .customRegistration(.data("0000")),
                .customRegistration(.data("7310")),
                .createPin("258147"),
            ])
            let result = try await client.registerUser(identityProvider: "partner", delegate: script)
            #expect(result.info == CustomInfo(status: 2000, data: "hello"))
            #expect(received.calls.withLock { $0 } == ["init:ann", "complete:0000", "complete:7310"])
            #expect(try await client.fetchProfileResource().subject == "ann")

            let refused = ScriptedResponder([.customRegistration(.data("bob")), .customRegistration(.data("blocked"))])
            do {
                _ = try await client.registerUser(identityProvider: "partner", delegate: refused)
                Issue.record("a blocked account registered")
            } catch let error as RegistrationError {
                #expect(error.code == .customRegistrationFailure)
                #expect(error.details.customInfo == CustomInfo(status: 5004, data: "account blocked"))
            }
            #expect(try await client.userProfiles().count == 1)
            // A refusal is HTTP 400; an API that fails is a temporary failure (502), not a refusal.
            #expect(try lastFlowAnswer(recording) == "400 invalid_grant")
            let down = ScriptedResponder([.customRegistration(.data("down"))])
            await #expect(throws: RegistrationError.self) {
                try await client.registerUser(identityProvider: "partner", delegate: down)
            }
            #expect(try lastFlowAnswer(recording) == "502 temporarily_unavailable")
            #expect(try await client.userProfiles().count == 1)
        }
    }
}

/// The status and OAuth error of the last flow message's answer, e.g. "400 invalid_grant".
func lastFlowAnswer(_ recording: RecordingTransport) throws -> String? {
    guard let (_, response) = recording.recorded.last(where: { $0.0.path.hasPrefix(Endpoint.flowPrefix) }) else {
        return nil
    }
    return "\(response.status) \(try WireCoding.decode(ErrorBody.self, from: response.body).error)"
}
