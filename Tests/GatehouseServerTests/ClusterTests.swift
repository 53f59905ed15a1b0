import Crypto
import CustomAPIIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehousePostgresTestSupport
import GatehouseProtocol
import GatehouseTesting
import GatehouseYAML
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import GatehouseServer

/// What a load balancer in front of the instances does: each request to the next instance in
/// turn, all under one public URL (the one DPoP proofs name). A request the test picks out is
/// instead sent to every instance at once, each copy with a fresh DPoP proof, as an attacker (or
/// a retrying client) racing the instances would.
final class Balancer: TokenServerTransport {
    let instances: [HTTPTransport]
    let baseURL: String
    private let turn = Atomic<Int>(0)
    /// Requests each instance got.
    private let counts: Mutex<[Int]>
    var served: [Int] { counts.withLock { $0 } }
    private let racing = Mutex<
        (matches: @Sendable (WireRequest) -> Bool, proof: @Sendable (String) async throws -> String)?
    >(
        nil
    )
    /// The answers every copy of a raced request got.
    let racedAnswers = Mutex<[WireResponse]>([])

    init(ports: [Int], publicURL: String) {
        instances = ports.map { HTTPTransport(baseURL: "http://127.0.0.1:\($0)") }
        counts = Mutex(ports.map { _ in 0 })
        baseURL = publicURL
    }

    /// Sends every request matching `matches` to all instances at once; `proof` makes a fresh
    /// DPoP proof for a URL.
    func race(
        _ matches: @escaping @Sendable (WireRequest) -> Bool,
        proof: @escaping @Sendable (String) async throws -> String
    ) {
        racing.withLock { $0 = (matches, proof) }
    }

    func send(_ request: WireRequest) async throws -> WireResponse {
        if let (matches, proof) = racing.withLock({ $0 }), matches(request) {
            racing.withLock { $0 = nil }
            return try await raced(request, proof: proof)
        }
        let index = turn.add(1, ordering: .relaxed).newValue % instances.count
        counts.withLock { $0[index] += 1 }
        return try await instances[index].send(request)
    }

    func open(_ request: WireRequest) async throws -> (WireResponse, AsyncThrowingStream<Data, any Error>) {
        let index = turn.add(1, ordering: .relaxed).newValue % instances.count
        return try await instances[index].open(request)
    }

    private func raced(
        _ request: WireRequest,
        proof: @escaping @Sendable (String) async throws -> String
    ) async throws -> WireResponse {
        let url = baseURL + (request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path)
        var copies: [WireRequest] = []
        for _ in instances {
            var copy = request
            copy.setHeader("DPoP", try await proof(url))
            copies.append(copy)
        }
        let answers = try await withThrowingTaskGroup(of: WireResponse.self) { group in
            for (instance, copy) in zip(instances, copies) { group.addTask { try await instance.send(copy) } }
            return try await group.reduce(into: [WireResponse]()) { $0.append($1) }
        }
        racedAnswers.withLock { $0 = answers }
        return answers.first { (200..<300).contains($0.status) } ?? answers[0]
    }
}

/// `servers`, each served over HTTP on a loopback port of its own, behind a ``Balancer`` that
/// names `publicURL`; they stop serving when `body` returns or throws.
func servingBehindBalancer(
    _ servers: [TokenServer],
    publicURL: String,
    logger: Logger,
    _ body: (Balancer) async throws -> Void
) async throws {
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
            if listening.count == servers.count { break }
        }
        do {
            try await body(Balancer(ports: listening, publicURL: publicURL))
        } catch {
            await group.triggerGracefulShutdown()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
    }
}

/// Three `TokenServer`s on one PostgreSQL schema, each served over HTTP on its own loopback port,
/// behind a ``Balancer``; `body` gets a fixture whose transport is the balancer.
func withCluster(
    instances count: Int = 3,
    maxPinFailures: Int = 3,
    installationLimit: (perMinute: Int, burst: Int)? = nil,
    clientAuthenticationFailuresPerMinute: Int? = nil,
    _ body: (Fixture, Balancer, [TokenServer]) async throws -> Void
) async throws {
    let publicURL = "http://gatehouse.cluster.test"
    let cluster = try await PostgresTestCluster.shared()
    let schema = try await cluster.makeSchema("cluster")
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-cluster-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    let manifest = try ManifestLoader.jsonAndYAML.parse(
        Data(
            Fixture.manifestText(
                maxPinFailures: maxPinFailures,
                publicURL: publicURL,
                installationLimit: installationLimit,
                clientAuthenticationFailuresPerMinute: clientAuthenticationFailuresPerMinute
            ).utf8
        ),
        format: YAMLManifestFormat(),
        source: "cluster.yaml",
        additionalSections: ["server"]
    )
    let serverLog = RecordingLogger(label: "server", level: .info)
    let script = StatusScript()
    let pushes = InProcessPushTransport()
    var environment = PluginEnvironment(logger: serverLog.logger)
    environment.services[CustomRegistrationAPIKey.self, named: "codes"] = FixedCodeAPI()
    var servers: [TokenServer] = []
    for _ in 0..<count {
        servers.append(
            try await TokenServer(
                manifest: manifest,
                registry: try PluginRegistry.testing(script),
                database: try ServerDatabase(cluster.url(schema: schema)),
                environment: environment,
                pushTransports: [.apns: pushes]
            )
        )
    }
    let servedServers = servers
    do {
        try await servingBehindBalancer(servers, publicURL: publicURL, logger: serverLog.logger) { balancer in
            let fixture = Fixture(
                directory: directory,
                server: servedServers[0],
                script: script,
                transport: RecordingTransport(balancer),
                manifest: manifest,
                serverLog: serverLog,
                clientLog: RecordingLogger(label: "client", level: .info),
                pushes: pushes,
                clock: SystemWallClock()
            )
            try await body(fixture, balancer, servedServers)
        }
    } catch {
        for server in servers { await server.shutdown() }
        try? await cluster.dropSchema(schema)
        throw error
    }
    for server in servers { await server.shutdown() }
    try await cluster.dropSchema(schema)
}

/// A registered user's session whose access token `instances` have each answered once (and kept),
/// then changed behind their backs: an answer of scope "read" comes from memory, "changed" from
/// the database.
func keptEverywhere(
    _ fixture: Fixture,
    _ instances: [HTTPTransport]
) async throws -> (UserClient, TokenResponse) {
    let client = try fixture.client()
    _ = try await register(client)
    let tokens = try #require(await client.sessionTokens)
    for instance in instances {
        #expect(try await introspect(via: instance, tokens.accessToken).answer?.scope == "read")
    }
    let hash = Data(SHA256.hash(data: Data(tokens.accessToken.utf8)))
    try await fixture.write { db in
        try db.execute(sql: "UPDATE tokens SET scope = 'changed' WHERE hash = ?", arguments: [hash])
    }
    for instance in instances {
        #expect(try await introspect(via: instance, tokens.accessToken).answer?.scope == "read")
    }
    return (client, tokens)
}

/// `instance`'s introspection of `token`, asked until it no longer comes from memory (scope
/// "read", see ``keptEverywhere(_:_:)``), for 5 s at most.
func answerOnceForgotten(_ instance: HTTPTransport, _ token: String) async throws -> IntrospectionResponse? {
    let asked = ContinuousClock.now
    var answer = try await introspect(via: instance, token).answer
    while answer?.scope == "read", ContinuousClock.now - asked < .seconds(5) {
        try await Task.sleep(for: .milliseconds(10))
        answer = try await introspect(via: instance, token).answer
    }
    return answer
}

@Suite(
    "Several instances on one PostgreSQL database",
    .serialized,
    .disabled(if: TestDatabase.current == .postgres, "they run on PostgreSQL in every run; once is enough")
)
struct ClusterTests {
    @Test("1,000 wrong PINs spread over 3 instances at once release exactly the maximum number of evaluations")
    func wrongPinBurst() async throws {
        let maximum = 25
        try await withCluster(maxPinFailures: maximum) { fixture, balancer, _ in
            let owner = try fixture.client()
            let profile = try await register(owner)
            try await fixture.watchFailures()
            // One wrong PIN through the SDK shows the two requests an attempt takes; the burst
            // sends them itself, below the SDK, as an attacker with the device's key would.
            // (Another app instance on the same device data tries it: the owner keeps its session,
            // whose key, the profile's, signs the burst's proofs.)
            let before = fixture.transport.recorded.count
            let other = try fixture.client()
            _ = try? await other.authenticateUser(profile, delegate: ScriptedResponder([.pin("000111")]))
            let attempt = fixture.transport.recorded.dropFirst(before)
            let start = try #require(attempt.first { $0.0.path == Endpoint.authentication }?.0)
            let evaluate = try #require(attempt.first { pinOperation($0.0) == "evaluate" }?.0)
            let firstReleased = attempt.filter { pinOperation($0.0) == "evaluate" && $0.1.status == 200 }.count

            func signed(_ request: WireRequest, path: String) async throws -> WireRequest {
                var copy = request
                copy.path = path
                copy.setHeader("DPoP", try await owner.dpopProof(method: request.method, url: balancer.baseURL + path))
                return copy
            }
            // 1,000 flows, started on every instance in turn.
            let flows = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<1000 {
                    group.addTask {
                        let response = try await balancer.send(try await signed(start, path: Endpoint.authentication))
                        return try? WireCoding.decode(FlowResponse.self, from: response.body).flowID
                    }
                }
                return try await group.reduce(into: [String]()) { if let id = $1 { $0.append(id) } }
            }
            #expect(flows.count == 1000)
            // Then a wrong PIN in each, all at once, every instance taking its share.
            let messages = try await withThrowingTaskGroup(of: WireRequest.self) { group in
                for flow in flows { group.addTask { try await signed(evaluate, path: Endpoint.flow(flow)) } }
                return try await group.reduce(into: [WireRequest]()) { $0.append($1) }
            }
            let statuses = await withTaskGroup(of: Int.self) { group in
                for message in messages { group.addTask { (try? await balancer.send(message).status) ?? -1 } }
                return await group.reduce(into: [Int]()) { $0.append($1) }
            }
            // Exactly the maximum: each allowed attempt released one evaluation, on whichever
            // instance it reached, and none beyond.
            #expect(firstReleased + statuses.filter { $0 == 200 }.count == maximum)
            #expect(try await fixture.highestFailureSeen() == maximum)
            #expect(
                !statuses.contains { $0 >= 500 || $0 < 0 },
                "\(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))"
            )
            for requests in balancer.served { #expect(requests > 600, "\(balancer.served)") }
        }
    }

    @Test(
        "60 installations at once, spread over 3 instances, with a burst of 20: exactly 20 are registered, as at one"
    )
    func installationBurst() async throws {
        try await withCluster(installationLimit: (perMinute: 1, burst: 20)) { fixture, balancer, _ throws in
            let answers = await withTaskGroup(of: WireResponse?.self) { group in
                for _ in 0..<60 {
                    group.addTask {
                        try? await RawInstallation(key: .p256(P256.Signing.PrivateKey()), fixture: fixture).register()
                    }
                }
                return await group.reduce(into: [WireResponse?]()) { $0.append($1) }
            }
            let statuses = answers.map { $0?.status ?? -1 }
            // Each instance's own bucket let its 20 through; the shared one, 20 in all.
            #expect(
                statuses.filter { $0 == 201 }.count == 20,
                "\(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))"
            )
            #expect(statuses.filter { $0 == 429 }.count == 40)
            #expect(
                answers.compactMap { $0 }.filter { $0.status == 429 }.allSatisfy { $0.header("Retry-After") != nil }
            )
            #expect(try await fixture.count("clients") == 20)
            for requests in balancer.served { #expect(requests == 20, "\(balancer.served)") }
        }
    }

    /// `Authorization: Basic` for `id` and `secret`.
    private static func basic(_ id: String, _ secret: String) -> [String: String] {
        ["Authorization": "Basic " + Data("\(id):\(secret)".utf8).base64EncodedString()]
    }

    /// A portal's look-up of a transaction (404: there is none) or a resource server's
    /// introspection (200), each with HTTP Basic credentials.
    private static func basicRequest(portal: Bool, id: String, secret: String) -> WireRequest {
        if portal {
            return WireRequest(
                method: "GET",
                path: Endpoint.portalTransaction("AAAAAAAAAAAAAAAAAAAAAAAA"),
                headers: basic(id, secret)
            )
        }
        var headers = basic(id, secret)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        return WireRequest(method: "POST", path: Endpoint.introspect, headers: headers, body: Data("token=x".utf8))
    }

    @Test(
        "30 wrong Basic secrets at once, spread over 3 instances, with 3 a minute allowed: exactly 3 are answered and audited, as at one"
    )
    func wrongSecretBurst() async throws {
        try await withCluster(clientAuthenticationFailuresPerMinute: 3) { fixture, balancer, _ throws in
            let answers = await withTaskGroup(of: WireResponse?.self) { group in
                for guess in 0..<30 {
                    group.addTask {
                        try? await balancer.send(
                            Self.basicRequest(
                                portal: guess % 2 == 0,
                                id: guess % 2 == 0 ? "portal" : "gateway",
                                secret: "guess-\(guess)-0123456789"
                            )
                        )
                    }
                }
                return await group.reduce(into: [WireResponse?]()) { $0.append($1) }
            }
            let statuses = answers.map { $0?.status ?? -1 }
            // Each instance's own bucket let its 3 through; the shared one, 3 in all.
            #expect(
                statuses.filter { $0 == 401 }.count == 3,
                "\(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))"
            )
            #expect(statuses.filter { $0 == 429 }.count == 27)
            #expect(
                answers.compactMap { $0 }.filter { $0.status == 429 }.allSatisfy { $0.header("Retry-After") != nil }
            )
            for requests in balancer.served { #expect(requests == 10, "\(balancer.served)") }
            // Each wrong secret answered is a security event of the audit trail, and only those.
            let audited = try await fixture.read { db in
                try SQLRow.fetchAll(
                    db,
                    sql: "SELECT actor, detail FROM audit_events WHERE event = 'client_authentication_failure'"
                )
            }
            #expect(audited.count == 3)
            for row in audited {
                let actor: String = row["actor"]
                let detail: String = row["detail"]
                #expect(actor == "server")
                #expect(detail.contains("127.0.0.1") && !detail.contains("guess-"), "\(detail)")
            }
        }
    }

    @Test(
        "a right secret taken on trust at every instance is refused at each once wrong ones at one instance empty the shared bucket"
    )
    func lockoutReachesEveryInstance() async throws {
        try await withCluster(clientAuthenticationFailuresPerMinute: 3) { fixture, balancer, _ throws in
            let right = Self.basicRequest(portal: false, id: "gateway", secret: Fixture.gatewaySecret)
            // The right secret twice at each instance: the second time from memory, without the
            // database. None is counted.
            for instance in balancer.instances {
                for _ in 0..<2 { #expect(try await instance.send(right).status == 200) }
            }
            let wrong = Self.basicRequest(portal: false, id: "gateway", secret: "guess-0123456789")
            for _ in 0..<3 { #expect(try await balancer.instances[0].send(wrong).status == 401) }
            // The last wrong secret emptied the bucket: the other instances hear so and refuse
            // the secret they had taken on trust.
            for instance in balancer.instances {
                #expect(await eventually { try await instance.send(right).status == 429 })
            }
            #expect(try await fixture.count("audit_events WHERE event = 'client_authentication_failure'") == 3)
        }
    }

    @Test(
        "12 events channels of one profile opened at once over 3 instances: exactly 4 open, as at one; a closed one gives its slot back to every instance"
    )
    func eventChannelsPerProfile() async throws {
        try await withCluster { fixture, balancer, _ throws in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            let ports = try balancer.instances.map { try #require(URL(string: $0.baseURL)?.port) }
            // Raw connections, so a test can close one as a device would.
            func open(at instance: Int) async throws -> (status: String, connection: LoopbackConnection) {
                let proof = try await client.dpopProof(method: "GET", url: balancer.baseURL + Endpoint.mobileAuthEvents)
                let connection = try LoopbackConnection(port: ports[instance])
                try connection.send(
                    "GET \(Endpoint.mobileAuthEvents)?profile=\(profile.id) HTTP/1.1\r\nHost: gatehouse.cluster.test\r\n"
                        + "DPoP: \(proof)\r\n\r\n"
                )
                let head = try await connection.receive()
                return (String(head.prefix(12)), connection)
            }
            let opened = try await withThrowingTaskGroup(of: (String, LoopbackConnection).self) { group in
                for index in 0..<12 { group.addTask { try await open(at: index % 3) } }
                return try await group.reduce(into: [(String, LoopbackConnection)]()) { $0.append($1) }
            }
            let statuses = opened.map(\.0)
            // Each instance would hold 4 of its own: 12 without the shared slots.
            #expect(
                statuses.filter { $0 == "HTTP/1.1 200" }.count == 4,
                "\(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))"
            )
            #expect(statuses.filter { $0 == "HTTP/1.1 429" }.count == 8)
            #expect(try await fixture.count("event_channels") == 4)
            // A device closes one channel: its slot is free at once, at any instance.
            let served = opened.filter { $0.0 == "HTTP/1.1 200" }.map(\.1)
            served[0].closeBothSides()
            #expect(await eventually { try await fixture.count("event_channels") == 3 })
            var again: [LoopbackConnection] = []
            for instance in [1, 2, 0] {
                let reopened = try await open(at: instance)
                again.append(reopened.connection)
                // The first takes the free slot, wherever the closed one was; then all are taken.
                #expect(reopened.status == (instance == 1 ? "HTTP/1.1 200" : "HTTP/1.1 429"), "at instance \(instance)")
            }
            for connection in again + opened.map(\.1) { connection.closeBothSides() }
        }
    }

    @Test("a refresh token reused at another instance revokes its family at every instance")
    func refreshReuse() async throws {
        try await withCluster { fixture, balancer, _ in
            let client = try fixture.client()
            _ = try await register(client)
            let original = try #require(await client.sessionTokens)
            try await client.refreshSession()
            let rotated = try #require(await client.sessionTokens)
            // Every instance keeps the rotated access token's answer: only the revocation's
            // announcement can end it there.
            for instance in balancer.instances {
                #expect(try await introspect(via: instance, rotated.accessToken).answer?.active == true)
            }

            let proof = try await client.dpopProof(method: "POST", url: balancer.baseURL + Endpoint.token)
            let reuse = try await balancer.instances[1].send(
                WireRequest(
                    method: "POST",
                    path: Endpoint.token,
                    headers: ["Content-Type": "application/json", "DPoP": proof],
                    body: try WireCoding.encode(
                        TokenRequest(grantType: "refresh_token", refreshToken: original.refreshToken)
                    )
                )
            )
            #expect(reuse.status == 400)
            #expect(try WireCoding.decode(ErrorBody.self, from: reuse.body).errorDescription.contains("already used"))
            // The rotated session is gone everywhere.
            for instance in balancer.instances {
                let access = try await instance.send(
                    WireRequest(
                        method: "GET",
                        path: Endpoint.profileResource,
                        headers: ["Authorization": "DPoP \(rotated.accessToken)"]
                    )
                )
                #expect(access.status == 401)
                // From memory too, within the announcement window (PostgresEngine.announcementWindow).
                #expect(
                    await eventually(seconds: 5) {
                        try await introspect(via: instance, rotated.accessToken).answer == .inactive
                    }
                )
            }
        }
    }

    @Test("one refresh token raced to 3 instances rotates once; the copies count as reuse (8 rounds)")
    func refreshRaced() async throws {
        try await withCluster { fixture, balancer, _ in
            let client = try fixture.client()
            let profile = try await register(client)
            for round in 0..<Self.rounds {
                if round > 0 {
                    try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
                }
                balancer.race(
                    { $0.path == Endpoint.token },
                    proof: { try await client.dpopProof(method: "POST", url: $0) }
                )
                try? await client.refreshSession()
                let answers = balancer.racedAnswers.withLock { $0 }
                #expect(answers.count == 3)
                #expect(answers.filter { $0.status == 200 }.count == 1, "round \(round): \(answers.map(\.status))")
                // The first copy after the rotation is reuse; one after that finds the family revoked.
                var descriptions: [String] = []
                for answer in answers where answer.status != 200 {
                    let body = try WireCoding.decode(ErrorBody.self, from: answer.body)
                    #expect(answer.status == 400 && body.error == "invalid_grant")
                    descriptions.append(body.errorDescription)
                }
                #expect(descriptions.filter { $0.range(of: "already used") != nil }.count == 1, "\(descriptions)")
                #expect(descriptions.count == 2, "\(descriptions)")
                // A copy came back after the rotation: the whole family, the new tokens too, is revoked.
                #expect(
                    try await fixture.read { db in
                        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM tokens WHERE revoked = FALSE")
                    } == 0
                )
            }
        }
    }

    /// Races run this many times, so that the copies overlap in some of them whatever the timing.
    static let rounds = 8

    @Test("the last step of a flow sent to 3 instances at once is answered once (8 rounds)")
    func flowStepOnce() async throws {
        try await withCluster { fixture, balancer, _ in
            let owner = try fixture.client()
            let profile = try await register(owner)
            // Another app instance on the device authenticates; its last step is sent to every
            // instance at once, each copy signed afresh with the profile's key (the owner's session's).
            let other = try fixture.client()
            for round in 0..<Self.rounds {
                let sessionsBefore = try await fixture.count("families")
                balancer.race(
                    { pinOperation($0) == "prove" },
                    proof: { try await owner.dpopProof(method: "POST", url: $0) }
                )
                try await other.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
                let answers = balancer.racedAnswers.withLock { $0 }
                #expect(answers.count == 3)
                #expect(answers.filter { $0.status == 200 }.count == 1, "round \(round): \(answers.map(\.status))")
                #expect(!answers.contains { $0.status >= 500 })
                // One session: the flow opened one token family.
                #expect(try await fixture.count("families") == sessionsBefore + 1)
            }
        }
    }

    @Test("an answer to a push request sent to 3 instances at once is taken once (8 rounds)")
    func pushAnsweredOnce() async throws {
        try await withCluster { fixture, balancer, _ in
            let (client, _) = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)
            for round in 0..<Self.rounds {
                let started = try await portal.started("login")
                let request = try pending(client, from: lastPush(fixture))
                balancer.race(
                    { $0.path.contains("/answer") },
                    proof: { try await client.dpopProof(method: "POST", url: $0) }
                )
                _ = await client.handlePushMobileAuthRequest(
                    request,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
                let answers = balancer.racedAnswers.withLock { $0 }
                #expect(answers.count == 3)
                #expect(
                    answers.filter { (200..<300).contains($0.status) }.count == 1,
                    "round \(round): \(answers.map(\.status))"
                )
                #expect(answers.filter { $0.status == 409 }.count == 2)
                #expect(try await portal.result(started.transactionID).status == .approved)
            }
        }
    }

    @Test("an outbox claim passes over a callback another instance's claim holds, instead of waiting for it")
    func claimsSkipLockedCallbacks() async throws {
        try await withCluster(instances: 2) { fixture, _, servers in
            _ = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)
            let held = try await portal.started("login").transactionID
            let free = try await portal.started("login").transactionID
            // Both ended, with a callback due in ten minutes, behind the servers' backs: their own
            // outboxes leave them alone for now, a claim made as if an hour had passed takes them.
            let now = fixture.clock.now.timeIntervalSince1970
            try await fixture.write { db in
                try db.execute(
                    sql: """
                        UPDATE mobile_transactions SET status = 'denied', reason = 'superseded', answered_at = ?,
                            callback_uri = 'http://127.0.0.1:9/cb', callback_state = 'due', callback_attempts = 0,
                            callback_next_at = ?
                        WHERE id IN (?, ?)
                        """,
                    arguments: [now, now + 600, held, free]
                )
            }
            // One instance holds `held`'s row in an open change, as a claim in progress does.
            let holding = RowHold()
            let holder = Task {
                try await servers[0].store.write { db in
                    _ = try SQLRow.fetchOne(
                        db,
                        sql: "SELECT id FROM mobile_transactions WHERE id = ? FOR UPDATE",
                        arguments: [held]
                    )
                    holding.locked.signal()
                    // Released by the test, or after 20 s, so a failure cannot hang the suite.
                    _ = holding.release.wait(timeout: .now() + 20)
                    holding.released.store(true, ordering: .sequentiallyConsistent)
                }
            }
            defer { holding.release.signal() }
            try #require(
                await withCheckedContinuation { continuation in
                    Thread { continuation.resume(returning: holding.locked.wait(timeout: .now() + 20) == .success) }
                        .start()
                }
            )
            let claimed = try await servers[1].store.dueCallbacks(now: now + 3600, maxAttempts: 5)
            // Answered while the other change still held its row (without SKIP LOCKED the claim
            // waits for it: 10 s, then lock_timeout fails it).
            let releasedFirst = holding.released.load(ordering: .sequentiallyConsistent)
            #expect(!releasedFirst)
            #expect(claimed.map(\.transactionID).contains(free))
            #expect(!claimed.map(\.transactionID).contains(held))
            holding.release.signal()
            try await holder.value
        }
    }

    @Test("a revocation at one instance ends the token in every instance's kept answers within the window")
    func revocationSeenEverywhere() async throws {
        try await withCluster { fixture, balancer, servers in
            let (client, tokens) = try await keptEverywhere(fixture, balancer.instances)
            // Logging out at one instance: the others hear of it within the window.
            await client.logout()
            let revoked = ContinuousClock.now
            var seen: [Duration] = []
            for instance in balancer.instances {
                while try await introspect(via: instance, tokens.accessToken).answer != .inactive {
                    guard ContinuousClock.now - revoked < PostgresEngine.announcementWindow else { break }
                    try await Task.sleep(for: .milliseconds(2))
                }
                seen.append(ContinuousClock.now - revoked)
                #expect(try await introspect(via: instance, tokens.accessToken).answer == .inactive)
            }
            #expect(seen.allSatisfy { $0 < PostgresEngine.announcementWindow }, "\(seen)")
            // What the others heard was the logout, not a lost connection: they keep answers again.
            for server in servers { #expect(server.store.activeTokens.isKeeping) }
        }
    }

    @Test("an instance that loses its announcements keeps no answer until it hears them again")
    func lostAnnouncements() async throws {
        try await withCluster { fixture, balancer, _ in
            let instance = balancer.instances[1]
            let (_, tokens) = try await keptEverywhere(fixture, [instance])
            // The database drops every listening connection: each instance forgets what it kept.
            let ended = try await fixture.read { db in
                try Int.fetchOne(
                    db,
                    sql: """
                        SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
                        WHERE query LIKE 'LISTEN%' AND datname = current_database()
                        """
                )
            }
            #expect((ended ?? 0) >= 3)
            let answer = try await answerOnceForgotten(instance, tokens.accessToken)
            #expect(answer?.scope == "changed")
        }
    }

    @Test("an instance whose announcements stall (the connection stays open) stops keeping answers within the window")
    func stalledAnnouncements() async throws {
        try await withCluster { fixture, balancer, servers in
            let instance = balancer.instances[2]
            let (_, tokens) = try await keptEverywhere(fixture, [instance])
            // The database process serving the listening connections stops: nothing is heard
            // any more, but no connection closes.
            let listeners = try await fixture.read { db in
                try Int.fetchAll(
                    db,
                    sql: "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()"
                )
            }
            #expect(listeners.count >= 3)
            for pid in listeners { kill(pid_t(pid), SIGSTOP) }
            defer { for pid in listeners { kill(pid_t(pid), SIGCONT) } }
            let stalled = ContinuousClock.now
            let answer = try await answerOnceForgotten(instance, tokens.accessToken)
            let noticed = ContinuousClock.now - stalled
            #expect(answer?.scope == "changed")
            // Every instance stops trusting its kept answers within the window (each on its own
            // heartbeat's beat).
            while servers.contains(where: { $0.store.activeTokens.isKeeping }),
                ContinuousClock.now - stalled < .seconds(5)
            {
                try await Task.sleep(for: .milliseconds(10))
            }
            let allNoticed = ContinuousClock.now - stalled
            #expect(servers.allSatisfy { !$0.store.activeTokens.isKeeping })
            // The margin is for a loaded machine's late timers; what it tells apart is a stall
            // noticed on the heartbeat's beat from one noticed never (the 5 s loop above).
            for took in [noticed, allNoticed] {
                #expect(took < PostgresEngine.announcementWindow + .milliseconds(1500), "\(took)")
            }
            // Heard again: answers are kept again.
            for pid in listeners { kill(pid_t(pid), SIGCONT) }
            let resumed = ContinuousClock.now
            while !servers.allSatisfy({ $0.store.activeTokens.isKeeping }), ContinuousClock.now - resumed < .seconds(5)
            {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(servers.allSatisfy { $0.store.activeTokens.isKeeping })
        }
    }
}

/// A row held open by one change while another claims: the holder says when it has the lock,
/// the test says when to let go.
private final class RowHold: Sendable {
    let locked = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let released = Atomic(false)
}
