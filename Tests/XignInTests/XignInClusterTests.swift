import Foundation
import GatehouseClient
import GatehouseKernel
import GatehousePlugins
import GatehouseProtocol
import GatehouseServer
import Logging
import ServiceLifecycle
import Synchronization
import Testing
import XignInClient
import XignInManager
import XignInValidators

/// A load balancer in front of the instances: each request to the next instance in turn. Requests
/// to a path the test names are held until as many as it says have arrived, then all sent at
/// once, spread over the instances, as clients (or an attacker) racing the instances would.
final class GatedBalancer: TokenServerTransport {
    let instances: [HTTPTransport]
    var baseURL: String { instances[0].baseURL }
    private let turn = Atomic<Int>(0)
    private let gate = Mutex<(path: String, count: Int, held: [CheckedContinuation<Int, Never>])?>(nil)
    /// Per held path: how many requests each instance got, and the statuses they answered.
    private let released: Mutex<[String: (perInstance: [Int], statuses: [Int])]> = Mutex([:])

    init(ports: [Int]) {
        instances = ports.map { HTTPTransport(baseURL: "http://127.0.0.1:\($0)") }
    }

    /// Holds the next `count` requests to `path` until the last of them arrives.
    func hold(_ count: Int, to path: String) {
        gate.withLock { $0 = (path, count, []) }
    }

    /// How many of the held requests to `path` each instance got.
    func served(_ path: String) -> [Int] {
        released.withLock { $0[path]?.perInstance ?? [] }
    }

    /// The statuses the held requests to `path` were answered with, sorted.
    func statuses(_ path: String) -> [Int] {
        released.withLock { $0[path]?.statuses.sorted() ?? [] }
    }

    func send(_ request: WireRequest) async throws -> WireResponse {
        guard gate.withLock({ $0?.path == request.path }) else {
            return try await instances[turn.add(1, ordering: .relaxed).newValue % instances.count].send(request)
        }
        // Released together, the held requests go to the instances in turn by arrival.
        let index = await withCheckedContinuation { continuation in
            let released = gate.withLock { state -> [CheckedContinuation<Int, Never>] in
                guard var held = state else { return [continuation] }
                held.held.append(continuation)
                guard held.held.count == held.count else {
                    state = held
                    return []
                }
                state = nil
                return held.held
            }
            for (arrival, waiting) in released.enumerated() { waiting.resume(returning: arrival % instances.count) }
        }
        let response = try await instances[index].send(request)
        released.withLock { released in
            var entry = released[request.path] ?? (Array(repeating: 0, count: instances.count), [])
            entry.perInstance[index] += 1
            entry.statuses.append(response.status)
            released[request.path] = entry
        }
        return response
    }
}

/// Several instances, each a token server with its own XignIn manager and its own storage, on
/// one PostgreSQL schema, behind a ``GatedBalancer``.
struct XignInCluster {
    let directory: URL
    let balancer: GatedBalancer
    /// The first instance's storage, to look at the shared tables.
    let storage: ServerStorage
    let deliveries: Deliveries
    let url = URL(string: "http://manager.test")!  // swift-format-ignore: NeverForceUnwrap

    /// The outbox every instance writes its activation mails to.
    var outbox: URL { directory.appendingPathComponent("outbox") }

    /// A device of its own, reaching the instances through the balancer.
    func device(_ name: String) throws -> Registry {
        try Registry(dataDirectory: directory.appendingPathComponent("device-\(name)")) { [balancer] _ in balancer }
    }

    func attempts(forCodeOf accountEmail: String) async throws -> Int? {
        try await storage.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT attempts FROM xignin_activation_codes JOIN xignin_accounts
                    ON xignin_accounts.id = xignin_activation_codes.account_id WHERE email = ?
                    """,
                arguments: [accountEmail]
            )
        }
    }
}

/// Runs `body` with `count` instances on one fresh PostgreSQL schema, each served over HTTP on a
/// loopback port.
func withXignInCluster(
    instances count: Int = 3,
    evaluationsPerMinute: Int = 30,
    _ body: (XignInCluster) async throws -> Void
) async throws {
    try await withLinkedService(accepts: true) { port, deliveries in
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-xignin-cluster-\(UUID().uuidString)"
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        let location = try await TestDatabaseLocation(folder: directory, postgres: true)
        defer { location.drop() }
        let manifest = try XignInFixture.parsedManifest(webhookPort: port, evaluationsPerMinute: evaluationsPerMinute)
        let logger = Logger(label: "xignin-cluster")
        var storages: [ServerStorage] = []
        var servers: [TokenServer] = []
        do {
            for _ in 0..<count {
                let storage = try await location.open()
                storages.append(storage)
                let manager = try XignInManager(
                    manifest: manifest,
                    storage: storage,
                    mail: OutboxMailSender(directory: directory.appendingPathComponent("outbox")),
                    environment: XignInFixture.environment()
                )
                servers.append(
                    try await TokenServer(
                        manifest: manifest,
                        registry: try PluginRegistry.builtIn,
                        storage: storage,
                        environment: XignInFixture.environment(),
                        extensions: [manager]
                    )
                )
            }
            let (ports, announced) = AsyncStream.makeStream(of: Int.self)
            let applications = servers.map { server in
                HTTPTokenServer.application(server: server, port: 0, logger: logger) { announced.yield($0) }
            }
            let group = ServiceGroup(configuration: .init(services: applications, logger: logger))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                var listening: [Int] = []
                for await port in ports {
                    listening.append(port)
                    if listening.count == count { break }
                }
                let cluster = XignInCluster(
                    directory: directory,
                    balancer: GatedBalancer(ports: listening),
                    storage: storages[0],
                    deliveries: deliveries
                )
                do {
                    try await body(cluster)
                } catch {
                    await group.triggerGracefulShutdown()
                    throw error
                }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        } catch {
            for server in servers { await server.shutdown() }
            for storage in storages { await storage.shutdown() }
            throw error
        }
        for server in servers { await server.shutdown() }
        for storage in storages { await storage.shutdown() }
    }
}

@Suite(
    "XignIn on several instances sharing one PostgreSQL database",
    .serialized,
    .disabled(if: TestDatabase.isPostgres, "they run on PostgreSQL in every run; once is enough")
)
struct XignInClusterTests {
    @Test("wrong activation PINs sent at once through 3 instances stop at exactly the attempt limit")
    func wrongPinsAtOnce() async throws {
        try await withXignInCluster { cluster in
            let owner = try cluster.device("owner")
            let parameters = try await owner.initialization(url: cluster.url)
            _ = try await owner.register(data: filled(parameters, email: "burst@example.com"))
            let code = try XignInFixture.activationCode(for: "burst@example.com", in: cluster.outbox)
            // Nine devices evaluate a wrong PIN for the code at the same moment, three per instance.
            let tries = 9
            cluster.balancer.hold(tries, to: "/xignin/v1/pin/evaluate")
            let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<tries {
                    let device = try cluster.device("attacker-\(index)")
                    group.addTask {
                        do {
                            _ = try await device.activate(url: cluster.url, code: code, pin: "11111")
                            return "activated"
                        } catch let error as any DomainError {
                            return error.codeName
                        }
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(cluster.balancer.served("/xignin/v1/pin/evaluate") == [3, 3, 3])
            // Exactly the limit (3) were evaluated; the rest were refused, the code being locked.
            #expect(
                cluster.balancer.statuses("/xignin/v1/pin/evaluate") == [200, 200, 200]
                    + Array(repeating: 400, count: tries - 3)
            )
            // The evaluated ones then failed their activation with no attempt left to report.
            #expect(outcomes == Array(repeating: "invalidActivationCode", count: tries))
            #expect(try await cluster.attempts(forCodeOf: "burst@example.com") == 3)
            // Locked, even for the right PIN.
            await #expect(throws: (any Error).self) {
                _ = try await owner.activate(url: cluster.url, code: code, pin: "24680")
            }
            #expect(try await XignInFixture.count("activations", in: cluster.storage) == 0)
        }
    }

    @Test(
        "24 registration PIN evaluations at once from one address through 3 instances, 6 a minute allowed: exactly 6 are evaluated, as at one"
    )
    func evaluationsLimitedOnce() async throws {
        try await withXignInCluster(evaluationsPerMinute: 6) { cluster in
            let path = "/xignin/v1/pin/evaluate"
            cluster.balancer.hold(24, to: path)
            let body = Data(#"{"blinded": "AAAA"}"#.utf8)
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<24 {
                    group.addTask {
                        _ = try? await cluster.balancer.send(
                            WireRequest(
                                method: "POST",
                                path: path,
                                headers: ["Content-Type": "application/json"],
                                body: body
                            )
                        )
                    }
                }
            }
            #expect(cluster.balancer.served(path) == [8, 8, 8])
            // 400: taken from the limit and then refused for the point it sent; 429: past the
            // limit. Each instance's own limit would have let 6 through at each of the three.
            let statuses = cluster.balancer.statuses(path)
            #expect(statuses.filter { $0 != 429 }.count == 6, "\(statuses)")
            #expect(statuses.filter { $0 == 429 }.count == 18, "\(statuses)")
        }
    }

    @Test("one activation code used at 3 instances at once activates once and delivers its attributes once")
    func oneCodeAtOnce() async throws {
        try await withXignInCluster { cluster in
            let owner = try cluster.device("owner")
            var parameters = try await owner.initialization(url: cluster.url, serviceMappingId: "keycloak")
            parameters.setArbitraryUserAttributes(["team": "blue"])
            _ = try await owner.register(data: filled(parameters, email: "once@example.com"))
            let code = try XignInFixture.activationCode(for: "once@example.com", in: cluster.outbox)
            // Three devices with the right PIN: each has its PIN evaluated, then their
            // activations reach the three instances at the same moment.
            cluster.balancer.hold(3, to: "/xignin/v1/activations")
            let activated = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<3 {
                    let device = try cluster.device("copy-\(index)")
                    group.addTask {
                        do {
                            _ = try await device.activate(url: cluster.url, code: code, pin: "24680")
                            return true
                        } catch is any DomainError {
                            return false
                        }
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(cluster.balancer.served("/xignin/v1/activations") == [1, 1, 1])
            #expect(activated.filter { $0 }.count == 1)
            #expect(try await XignInFixture.count("activations", in: cluster.storage) == 1)
            #expect(cluster.deliveries.received.withLock { $0.map(\.attributes) } == [["team": "blue"]])
            #expect(try await XignInFixture.count("pending_attributes", in: cluster.storage) == 0)
        }
    }
}
