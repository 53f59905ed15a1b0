import Foundation
import GatehousePostgresTestSupport
import GatehouseTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Two `gatehouse serve` instances on one PostgreSQL schema behind HAProxy, a real load balancer
/// (Debian's `haproxy`), at one front address that is both instances' `server.publicURL`.
/// HAProxy deals requests round robin, one request at a time (a kept-alive connection does not
/// stick to an instance), except the routes a test pins to one instance so that the steps of a
/// flow are known to cross them. HAProxy logs every request with the instance that answered it.
final class BalancedInstances {
    enum Instance: String, CaseIterable, Sendable {
        case one, two
    }

    /// Requests HAProxy sends to `instance` whatever the round robin says.
    struct Pin {
        var method: String
        var pathPrefix: String
        var instance: Instance
    }

    /// One request as HAProxy logged it.
    struct Routed: Equatable, CustomStringConvertible {
        var instance: String
        var method: String
        var path: String
        var status: Int
        var description: String { "\(method) \(path) → \(instance) (\(status))" }
    }

    /// The address clients use: HAProxy's front.
    let url: String
    /// Each instance's own address, for what must not go through the balancer (`/metrics`).
    let instanceURLs: [Instance: String]
    let database: PostgresTestCluster
    let schema: String
    let directory: URL
    /// The manifest both instances run: the example's, with `server.publicURL` naming the front.
    let manifest: URL
    private let instances: [Instance: Session]
    private let balancer: Session

    private init(
        url: String,
        instanceURLs: [Instance: String],
        database: PostgresTestCluster,
        schema: String,
        directory: URL,
        manifest: URL,
        instances: [Instance: Session],
        balancer: Session
    ) {
        self.url = url
        self.instanceURLs = instanceURLs
        self.database = database
        self.schema = schema
        self.directory = directory
        self.manifest = manifest
        self.instances = instances
        self.balancer = balancer
    }

    /// The PostgreSQL URL both instances share.
    var databaseURL: String { database.url(schema: schema, pool: 4) }

    /// Starts the instances on a fresh schema of the process's test cluster, each running
    /// `example` (a manifest under Examples/manifests/, `server.publicURL` set to the front
    /// address by this harness), then HAProxy with `pins`; returns once a request through the
    /// front is answered. `edit` may change the manifest's text further.
    static func start(
        _ name: String,
        example: String = "server.yaml",
        pins: [Pin] = [],
        edit: (String) -> String = { $0 }
    ) async throws -> BalancedInstances {
        // Checked first: without them the test must fail, saying what to install.
        let haproxy = try HarnessFailure.require(
            ["/usr/sbin/haproxy", "/usr/bin/haproxy"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "HAProxy is not installed (no /usr/sbin/haproxy): run scripts/install-dependencies, or apt-get install haproxy"
        )
        let database = try await PostgresTestCluster.shared()
        let schema = try await database.makeSchema(name)
        let directory = try scratchDirectory("gatehouse-\(name)")
        var started: [Instance: Session] = [:]
        do {
            let front = try HarnessFailure.require(LoopbackPort.free(), "no free loopback port for HAProxy")
            let url = "http://127.0.0.1:\(front)"
            let text = try String(
                contentsOf: packageRoot.appendingPathComponent("Examples/manifests/\(example)"),
                encoding: .utf8
            )
            // The instances name the balancer in DPoP proofs they check and in the login's and
            // the XignIn manager's addresses, not themselves.
            guard let server = text.range(of: "\nserver:\n") else {
                throw HarnessFailure("Examples/manifests/\(example) has no top-level server section")
            }
            let manifest = directory.appendingPathComponent("manifest.yaml")
            try edit(text.replacingCharacters(in: server, with: "\nserver:\n  publicURL: \(url)\n"))
                .write(to: manifest, atomically: true, encoding: .utf8)

            var instanceURLs: [Instance: String] = [:]
            // One after the other: the first creates the schema's tables, the second finds them.
            for instance in Instance.allCases {
                let session = try Session(
                    [
                        "serve", "--manifest", manifest.path, "--database", database.url(schema: schema, pool: 4),
                        "--port", "0", "--log-level", "warning", "--shutdown-timeout", "2",
                    ],
                    environment: ["XDG_DATA_HOME": dataFolder(of: instance, in: directory).path]
                )
                started[instance] = session
                instanceURLs[instance] = try await served(by: session)
            }
            let configuration = directory.appendingPathComponent("haproxy.cfg")
            try haproxyConfiguration(front: front, instances: instanceURLs, pins: pins)
                .write(to: configuration, atomically: true, encoding: .utf8)
            // -db: in the foreground, not a daemon, so it ends with this test.
            let balancer = try Session(["-f", configuration.path, "-db"], binary: haproxy)
            let pair = BalancedInstances(
                url: url,
                instanceURLs: instanceURLs,
                database: database,
                schema: schema,
                directory: directory,
                manifest: manifest,
                instances: started,
                balancer: balancer
            )
            do {
                try await pair.waitUntilAnswering()
            } catch {
                pair.stop()
                throw error
            }
            return pair
        } catch {
            stop(Array(started.values))
            try? database.dropSchemaBlocking(schema)
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Each instance's own data folder (`XDG_DATA_HOME`), where it keeps what is not in the
    /// database, such as the XignIn manager's outbox.
    func dataFolder(of instance: Instance) -> URL { Self.dataFolder(of: instance, in: directory) }

    private static func dataFolder(of instance: Instance, in directory: URL) -> URL {
        directory.appendingPathComponent("\(instance.rawValue)-data")
    }

    /// HAProxy's configuration: one front on `front`, round robin over the instances, `pins`
    /// first; bounded timeouts; a log line per request naming the instance. `forwardfor` passes
    /// the client's address on in X-Forwarded-For, which the instances would otherwise never see.
    static func haproxyConfiguration(front: Int, instances: [Instance: String], pins: [Pin]) -> String {
        func server(_ instance: Instance) -> String {
            let address = instances[instance].map { String($0.dropFirst("http://".count)) } ?? "127.0.0.1:1"
            return "    server \(instance.rawValue) \(address)\n"
        }
        let pinned = pins.map {
            "    use_backend only-\($0.instance.rawValue) if { method \($0.method) } { path_beg \($0.pathPrefix) }\n"
        }
        return """
            global
                log stdout format raw local0 info
                maxconn 512
            defaults
                mode http
                log global
                log-format "routed %s %HM %HPO %ST"
                option forwardfor
                timeout connect 2s
                timeout client 30s
                timeout server 30s
                timeout http-request 10s
                timeout http-keep-alive 2s
                timeout queue 5s
            frontend gatehouse
                bind 127.0.0.1:\(front)
            \(pinned.joined())    default_backend both
            backend both
                balance roundrobin
            \(Instance.allCases.map(server).joined())
            """
                + Instance.allCases.map { "backend only-\($0.rawValue)\n" + server($0) }.joined()
    }

    /// The address `serve` announces once it listens (waited for at most 20 s, less when the
    /// process ends first, as when it refuses the manifest).
    private static func served(by session: Session) async throws -> String {
        for _ in 0..<400 {
            let announced = session.output.withLock { $0 }
            if let start = announced.range(of: "listening on http://") {
                let url = announced[start.lowerBound...].dropFirst("listening on ".count)
                return String(url.prefix { !$0.isWhitespace })
            }
            guard session.process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        _ = try? await session.finish()
        throw HarnessFailure("gatehouse serve did not start: " + session.errors.withLock { $0 })
    }

    /// Waits (at most 10 s) until `GET /health` through the front answers 200.
    private func waitUntilAnswering() async throws {
        let session = Self.session()
        defer { session.finishTasksAndInvalidate() }
        let health = try HarnessFailure.require(URL(string: url + "/health"), "bad front URL \(url)")
        for _ in 0..<100 {
            guard balancer.process.isRunning else { break }
            if let (_, response) = try? await session.data(from: health),
                (response as? HTTPURLResponse)?.statusCode == 200
            {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw HarnessFailure(
            "HAProxy at \(url) did not answer /health: "
                + balancer.output.withLock { $0 } + balancer.errors.withLock { $0 }
        )
    }

    /// An ephemeral URLSession whose every request is bounded.
    static func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 10
        configuration.timeoutIntervalForResource = 20
        return URLSession(configuration: configuration)
    }

    /// The requests HAProxy has logged so far, oldest first.
    func routed() -> [Routed] {
        balancer.output.withLock { $0 }.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 5, fields[0] == "routed", let status = Int(fields[4]) else { return nil }
            return Routed(
                instance: String(fields[1]),
                method: String(fields[2]),
                path: String(fields[3]),
                status: status
            )
        }
    }

    /// The requests HAProxy has logged once `expected` holds of them, waited for at most 2 s:
    /// HAProxy writes a request's line after its answer, so a client can be a moment ahead of it.
    func routed(until expected: ([Routed]) -> Bool) async throws -> [Routed] {
        for _ in 0..<40 where !expected(routed()) { try await Task.sleep(for: .milliseconds(50)) }
        return routed()
    }

    /// How many `method` requests to `endpoint` (the server's label: a template such as
    /// `/v1/flows/{flowID}`, or `/login/*` for a mounted service) each instance says it answered,
    /// from its own `/metrics`, fetched from it directly.
    func answered(_ method: String, _ endpoint: String) async throws -> [Instance: Int] {
        let session = Self.session()
        defer { session.finishTasksAndInvalidate() }
        var counts: [Instance: Int] = [:]
        for instance in Instance.allCases {
            let address = try HarnessFailure.require(
                instanceURLs[instance].flatMap { URL(string: $0 + "/metrics") },
                "no address for instance \(instance)"
            )
            let (data, _) = try await session.data(from: address)
            let series = #"gatehouse_http_requests_total{endpoint="\#(endpoint)",method="\#(method)",status=""#
            counts[instance] = String(decoding: data, as: UTF8.self).split(separator: "\n")
                .filter { $0.hasPrefix(series) }
                .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
                .reduce(0) { $0 + Int($1) }
        }
        return counts
    }

    /// What each instance wrote to standard error, for failure messages.
    var logs: String {
        Instance.allCases.map { instance in
            "[\(instance)] " + (instances[instance]?.errors.withLock { $0 } ?? "")
        }.joined(separator: "\n")
    }

    /// Stops HAProxy and the instances (each waited for, at most 5 s), then drops the schema and
    /// the scratch directory.
    func stop() {
        Self.stop([balancer] + Instance.allCases.compactMap { instances[$0] })
        try? database.dropSchemaBlocking(schema)
        try? FileManager.default.removeItem(at: directory)
    }

    private static func stop(_ sessions: [Session]) {
        for session in sessions where session.process.isRunning { session.process.terminate() }
        for session in sessions {
            for _ in 0..<100 where session.process.isRunning { usleep(50_000) }
            if session.process.isRunning { kill(session.process.processIdentifier, SIGKILL) }
        }
    }
}

/// Why the two-instance harness could not do its part.
struct HarnessFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }

    static func require<T>(_ value: T?, _ problem: String) throws -> T {
        guard let value else { throw HarnessFailure(problem) }
        return value
    }
}
