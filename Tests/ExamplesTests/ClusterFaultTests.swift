import Foundation
import GatehouseClient
import GatehouseKernel
import GatehousePlugins
import GatehouseProtocol
import GatehouseTesting
import GatehouseYAML
import Synchronization
import Testing

/// Faults of a cluster across real network hops (`scripts/cluster-bed`): PostgreSQL, three
/// instances and HAProxy on hosts of their own, under a mixed load of registrations, PIN
/// logins, refreshes, push answers and wrong PINs through the SDK. For each fault: no
/// acknowledged write is lost, nothing happens twice, every answer that is not the work's is a
/// 503 from an instance or HAProxy's word for a request whose instance went away while it had
/// it, and the load recovers, in a time each test prints.
@Suite(
    "A cluster across network namespaces survives lost hosts and a lost database",
    .serialized,
    // Five clusters of debug builds under load, one after another: scripts/test runs them in a
    // phase of their own, so that they do not load the machine under the rest of the suite.
    .enabled(
        if: ProcessInfo.processInfo.environment["GATEHOUSE_CLUSTER_FAULTS"] == "1",
        "run by scripts/test in a phase of its own (GATEHOUSE_CLUSTER_FAULTS=1)"
    )
)
struct ClusterFaultTests {
    @Test("an instance killed (kill -9) and another cut off the network: the others carry on, both come back")
    func lostHosts() async throws {
        try await Self.withBed { bed, load in
            try await load.during("i2 killed") { try await bed.fault("kill", "i2") }
            try await bed.fault("start", "i2")
            try await bed.waitUntilReady("i2")
            try await load.during("i3 cut off") { try await bed.fault("cut", "i3") }
            try await bed.fault("restore", "i3")
            try await bed.waitUntilReady("i3")
        }
    }

    @Test("an instance partitioned from the database turns not ready, is drained, and serves again once healed")
    func partitionedInstance() async throws {
        try await Self.withBed { bed, load in
            try await load.during("i1 partitioned from the database") {
                try await bed.fault("partition", "i1")
                // Its own /ready fails (the database does not answer within its 2 s), so
                // HAProxy takes it out of the rotation.
                #expect(await eventually(seconds: 20) { try await !bed.isReady("i1") }, "i1 stayed ready")
            }
            try await bed.fault("heal", "i1")
            try await bed.waitUntilReady("i1")
            // Back in the rotation: it answers requests through the front again.
            let before = bed.routed().filter { $0.server == "i1" }.count
            try await load.run(for: .seconds(3))
            #expect(bed.routed().filter { $0.server == "i1" }.count > before, "i1 got no requests after healing")
        }
    }

    @Test("the database killed (kill -9) and started again: refusals are 503s, nothing acknowledged is lost")
    func lostDatabase() async throws {
        try await Self.withBed { bed, load in
            try await load.during("the database killed") {
                try await bed.fault("kill", "db")
                try await Task.sleep(for: .seconds(2))
                try await bed.fault("start", "db")
            }
            for host in ["i1", "i2", "i3"] { try await bed.waitUntilReady(host) }
        }
    }

    @Test("slow links to the database (50 ms each way with 5 % loss, and 10 % loss alone): slower, nothing lost")
    func slowLinks() async throws {
        try await Self.withBed { bed, load in
            try await load.during("i1 delayed and lossy, i2 lossy") {
                try await bed.fault("slow", "i1", "--delay", "50", "--loss", "5")
                try await bed.fault("slow", "i2", "--loss", "10")
                try await Task.sleep(for: .seconds(6))
            }
            // Slow, not gone: HAProxy kept both in the rotation (their /ready answers within its
            // 2 s deadline over the slowed links, and the check waits 3 s).
            let downs = bed.log(of: "lb").split(separator: "\n").filter { $0.contains(" is DOWN") }
            #expect(downs.isEmpty, "\(downs)")
            #expect(bed.routed().contains { $0.server == "i1" && $0.status / 100 == 2 })
            try await bed.fault("fast", "i1")
            try await bed.fault("fast", "i2")
        }
    }

    @Test(
        "the primary killed (kill -9) under load, its synchronous standby promoted: the instances follow, nothing acknowledged is lost, announcements resume"
    )
    func lostPrimary() async throws {
        try await Self.withBed(standby: true) { bed, load in
            try await load.during("the primary killed, its standby promoted 1 s later") {
                try await bed.fault("kill", "db")
                // What a failover manager takes to decide; the instances answer 503 meanwhile
                // (db refuses connections, db2 accepts no writes yet).
                try await Task.sleep(for: .seconds(1))
                try await bed.fault("promote", "db2")
            }
            #expect(try await bed.primary() == "db2")
            for host in ["i1", "i2", "i3"] { try await bed.waitUntilReady(host) }
            // Every instance listens on the new primary: it keeps answers, and a revocation at
            // one ends them at every other.
            try await load.checkAnnouncements()
            // The lost primary comes back as the new one's synchronous standby, under load; the
            // instances' new connections pass over it (first in their URL, it accepts no writes).
            try await load.during("the lost primary rebuilt as the synchronous standby") {
                try await bed.fault("rebuild", "db")
            }
            let replication = try await bed.sql("SELECT application_name, sync_state FROM pg_stat_replication")
            #expect(replication.trimmingCharacters(in: .whitespacesAndNewlines) == "db|sync")
        }
    }

    @Test(
        "the primary's host vanishes under load (its link cut, then fenced), its standby promoted: connections and the listener leave the dead host by their timeouts"
    )
    func vanishedPrimary() async throws {
        try await Self.withBed(standby: true) { bed, load in
            try await load.during("the primary's host cut off, its standby promoted 1 s later") {
                // Nothing tells the instances: their connections to db stay open and silent.
                try await bed.fault("cut", "db")
                try await Task.sleep(for: .seconds(1))
                // Fenced (it could not be reached anyway), then the standby promoted.
                try await bed.fault("kill", "db")
                try await bed.fault("promote", "db2")
                for host in ["i1", "i2", "i3"] { try await bed.waitUntilReady(host) }
            }
            // The listening connections to db were deaf: each instance noticed by its heartbeats
            // and listens on db2 now.
            try await load.checkAnnouncements()
            try await bed.fault("restore", "db")
            try await bed.fault("rebuild", "db")
        }
    }

    /// A bed with the fault manifest, users registered before the load, the load running
    /// around `body`, and every check of the suite once the load stopped.
    static func withBed(
        standby: Bool = false,
        _ body: (ClusterBed, FaultLoad) async throws -> Void
    ) async throws {
        let scratch = try scratchDirectory("gatehouse-faults")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let manifest = scratch.appendingPathComponent("faults.yaml")
        try Self.manifest.write(to: manifest, atomically: true, encoding: .utf8)
        let bed = try await ClusterBed.up(manifest: manifest, in: scratch, standby: standby)
        do {
            let load = try await FaultLoad.prepared(on: bed, in: scratch)
            try await load.run(for: .seconds(2))
            try await body(bed, load)
            // After the last fault: everything works again, and stays working.
            try await load.run(for: .seconds(3))
            try await load.check()
        } catch {
            let logs = ["i1", "i2", "i3"].map { "[\($0)] " + bed.log(of: $0).suffix(1500) }.joined(separator: "\n")
            await bed.down()
            throw HarnessFailure("\(error)\n\(logs)")
        }
        await bed.down()
    }

    /// The example cluster manifest with limits a test's load stays under (every request comes
    /// from HAProxy's one address) and a portal for the push answers.
    static let manifest = """
        server:
          publicURL: http://replaced.by.cluster-bed
          clients:
            - {id: faults, allowedScopes: [read], defaultScopes: [read]}
          resourceServers:
            - {id: gateway, secret: faults-gateway-secret-0123456789}
          rateLimitPerMinute: 100000
          rateLimitBurst: 100000
          maxPinFailures: 3
          mobileAuth:
            enrolment: single
            apiClients:
              - {id: portal, secret: portal-secret-0123456789, callbackPrefixes: ["http://127.0.0.1/"]}
            types:
              - {name: login, method: confirmation, numberMatching: true, timeToLive: 120, defaultMessage: "Sign in?"}
        authenticators:
          - {id: pin, type: pin, name: PIN}
        identityProviders:
          - {id: demo-api, type: idp.customAPI, name: Demo, config: {twoStep: true, handler: one-time-code}}
        """
}

extension ClusterBed {
    /// Waits (at most 30 s) until `host` is ready and HAProxy has it back in the rotation.
    func waitUntilReady(_ host: String) async throws {
        let ready = await eventually(seconds: 30) { try await self.isReady(host) }
        guard ready else { throw HarnessFailure("\(host) did not get ready again: \(log(of: host).suffix(2000))") }
        // Two good checks 250 ms apart bring it back.
        try await Task.sleep(for: .seconds(1))
    }
}

/// Users doing what users do, through the SDK and HAProxy's front: registering, logging in
/// with the PIN and refreshing, answering pushes, and one guessing PINs. What each got
/// acknowledged is recorded, to be found afterwards.
final class FaultLoad: Sendable {
    static let pin = "258147"
    private let bed: ClusterBed
    private let scratch: URL
    private let plugins: LoadedPlugins
    private let sessionUsers: [UserClient]
    private let pushUser: UserClient
    private let portal: PortalClient
    private let record = Mutex(Record())
    /// How many of `record.approved` ``checkAcknowledged()`` has looked up already.
    private let approvalsChecked = Mutex(0)
    private let stopped = Atomic(false)

    struct Record: Sendable {
        /// Profiles whose registration the SDK reported done.
        var registered: [String] = []
        var logins = 0
        var refreshes = 0
        /// Push transactions whose approval the server acknowledged.
        var approved: [String] = []
        /// Each guessing user: the wrong PINs the server said were wrong, and whether it then
        /// deregistered the profile.
        var guessers: [(refused: Int, deregistered: Bool)] = []
        /// Operations that failed, with when and why.
        var failures: [(at: ContinuousClock.Instant, what: String)] = []
        /// Each fault: when it began and when its action (and its end, if the body ends it) was done.
        var faults: [(name: String, began: ContinuousClock.Instant, ended: ContinuousClock.Instant)] = []
    }

    private init(
        bed: ClusterBed,
        scratch: URL,
        plugins: LoadedPlugins,
        sessionUsers: [UserClient],
        pushUser: UserClient
    ) {
        self.bed = bed
        self.scratch = scratch
        self.plugins = plugins
        self.sessionUsers = sessionUsers
        self.pushUser = pushUser
        portal = PortalClient(
            transport: HTTPTransport(baseURL: bed.front, timeout: 60),
            clientID: "portal",
            secret: "portal-secret-0123456789"
        )
    }

    /// Registers the users the load needs before any fault.
    static func prepared(on bed: ClusterBed, in scratch: URL) async throws -> FaultLoad {
        let plugins = try clientPlugins()
        func user(_ name: String) async throws -> UserClient {
            let client = try makeClient(name, bed: bed, scratch: scratch, plugins: plugins)
            let registration = try await client.registerUser(delegate: Demo(email: "\(name)@example.com"))
            try await client.authenticateUser(registration.profile, delegate: Demo())
            return client
        }
        var sessionUsers: [UserClient] = []
        for index in 0..<3 { sessionUsers.append(try await user("session\(index)")) }
        let pushUser = try await user("push")
        try await pushUser.enrollForMobileAuth()
        try await pushUser.enrollForPushMobileAuth(deviceToken: "apns-token-faults", platform: .apns)
        return FaultLoad(
            bed: bed,
            scratch: scratch,
            plugins: plugins,
            sessionUsers: sessionUsers,
            pushUser: pushUser
        )
    }

    /// Runs the load for `duration`.
    func run(for duration: Duration) async throws {
        try await during(nil) { try await Task.sleep(for: duration) }
    }

    /// Runs the load while `fault` runs and for 4 s after it, recording it under `name`.
    func during(_ name: String?, _ fault: () async throws -> Void) async throws {
        stopped.store(false, ordering: .relaxed)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, user) in sessionUsers.enumerated() {
                group.addTask { await self.sessions(user, index) }
            }
            for worker in 0..<2 { group.addTask { await self.registrations(worker) } }
            group.addTask { await self.pushes() }
            group.addTask { await self.guesses() }
            defer { stopped.store(true, ordering: .relaxed) }
            try await Task.sleep(for: .milliseconds(500))
            let began = ContinuousClock.now
            try await fault()
            if let name { record.withLock { $0.faults.append((name, began, ContinuousClock.now)) } }
            try await Task.sleep(for: name == nil ? .zero : .seconds(4))
            stopped.store(true, ordering: .relaxed)
            try await group.waitForAll()
        }
    }

    private var isStopped: Bool { stopped.load(ordering: .relaxed) }

    private func failed(_ what: String, _ error: any Error) {
        let reason = (error as? any DomainError).map { "\($0.codeName): \($0.message)" } ?? "\(error)"
        record.withLock { $0.failures.append((ContinuousClock.now, "\(what): \(reason)")) }
    }

    /// A PIN login, then three refreshes; after a failure the next round logs in again, so the
    /// session a user holds is always one the server acknowledged.
    private func sessions(_ user: UserClient, _ index: Int) async {
        while !isStopped {
            do {
                let profile = try HarnessFailure.require(
                    try await user.userProfiles().first,
                    "session\(index) has no profile"
                )
                try await user.authenticateUser(profile, delegate: Demo())
                record.withLock { $0.logins += 1 }
                for _ in 0..<3 where !isStopped {
                    try await user.refreshSession()
                    record.withLock { $0.refreshes += 1 }
                }
            } catch {
                failed("session\(index)", error)
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// New users registering, each from a device of its own.
    private func registrations(_ worker: Int) async {
        var number = 0
        while !isStopped {
            number += 1
            let name = "new\(worker)-\(UUID().uuidString.prefix(8))"
            do {
                let client = try Self.makeClient(name, bed: bed, scratch: scratch, plugins: plugins)
                let registration = try await client.registerUser(delegate: Demo(email: "\(name)@example.com"))
                record.withLock { $0.registered.append(registration.profile.id) }
            } catch {
                failed("registration \(name)", error)
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// The portal asks, the phone finds the request among its pending ones and approves it.
    private func pushes() async {
        while !isStopped {
            do {
                let started = try await portal.start(PortalMobileAuthRequest(userID: "push@example.com", type: "login"))
                let pending = try await pushUser.pendingPushMobileAuthRequests()
                let request = try HarnessFailure.require(
                    pending.first { $0.transactionID == started.transactionID },
                    "transaction \(started.transactionID) is not pending"
                )
                let number = started.number
                let result = await pushUser.handlePushMobileAuthRequest(
                    request,
                    delegate: Phone(answer: .accept(number: number))
                )
                switch result {
                case .approved: record.withLock { $0.approved.append(started.transactionID) }
                case .denied: failed("push", HarnessFailure("denied"))
                case .failed(let error): failed("push", error)
                }
            } catch {
                failed("push", error)
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// A user who guesses PINs until the server deregisters the profile, then another.
    private func guesses() async {
        while !isStopped {
            let name = "guess-\(UUID().uuidString.prefix(8))"
            let guesser: UserClient
            do {
                guesser = try Self.makeClient(name, bed: bed, scratch: scratch, plugins: plugins)
                _ = try await guesser.registerUser(delegate: Demo(email: "\(name)@example.com"))
            } catch {
                failed("guesser \(name)", error)
                try? await Task.sleep(for: .milliseconds(200))
                continue
            }
            var refused = 0
            var deregistered = false
            while !isStopped, !deregistered, let profile = try? await guesser.userProfiles().first {
                do {
                    try await guesser.authenticateUser(profile, delegate: Demo(pin: "111111"))
                    failed("guess", HarnessFailure("a wrong PIN was accepted"))
                } catch let error as any DomainError where error.codeName == "invalidPin" {
                    refused += 1
                } catch let error as any DomainError where error.codeName == "userDeregistered" {
                    deregistered = true
                } catch {
                    failed("guess", error)
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            record.withLock { $0.guessers.append((refused, deregistered)) }
        }
    }

    /// What a kill trial checks after its fault: every registration acknowledged so far is in
    /// `profiles` (on the primary of now), and every push approval acknowledged since the last
    /// look is approved. Returns how many of each it checked, and what was lost.
    func checkAcknowledged() async throws -> (registrations: Int, approvals: Int, lost: [String]) {
        let (registered, approved) = record.withLock { ($0.registered, $0.approved) }
        let stored = Set(try await bed.sql("SELECT id FROM profiles").split(separator: "\n").map(String.init))
        var lost = registered.filter { !stored.contains($0) }.map { "registration \($0)" }
        let new = approved.dropFirst(approvalsChecked.withLock { $0 })
        for id in new where try await portal.result(id).status != .approved { lost.append("approval \(id)") }
        approvalsChecked.withLock { $0 = approved.count }
        return (registered.count, new.count, lost)
    }

    /// Operations that failed since `instant`, and when the last of them failed.
    func failures(since instant: ContinuousClock.Instant) -> (count: Int, last: Duration?, what: String?) {
        let failed = record.withLock { $0.failures.filter { $0.at >= instant } }
        let last = failed.max { $0.at < $1.at }
        return (failed.count, last.map { $0.at - instant }, last?.what)
    }

    /// Every instance hears the database's announcements: each keeps a token's introspection
    /// answer in memory (it does only while its own heartbeats come back), and a logout at one
    /// instance ends the token at every other within the window. An instance still listening
    /// to a lost server would answer from the database instead, and fail the first part.
    func checkAnnouncements() async throws {
        let client = try Self.makeClient("announced", bed: bed, scratch: scratch, plugins: plugins)
        let registration = try await client.registerUser(delegate: Demo(email: "announced@example.com"))
        try await client.authenticateUser(registration.profile, delegate: Demo())
        let token = try HarnessFailure.require(await client.sessionTokens?.accessToken, "no session")
        let instances = bed.instances.sorted { $0.key < $1.key }.map { ($0.key, HTTPTransport(baseURL: $0.value)) }
        // The scope changed behind the instances' backs: one answering from memory still says
        // "read". A heartbeat lost to a loaded machine between the two looks makes an instance
        // drop what it kept: the sequence is tried again then.
        var kept: [String] = []
        for _ in 0..<10 {
            _ = try await bed.sql(
                "UPDATE tokens SET scope = 'read' WHERE hash = sha256(convert_to('\(token)', 'UTF8'))"
            )
            for (_, instance) in instances { _ = try await Self.introspect(token, at: instance) }
            _ = try await bed.sql(
                "UPDATE tokens SET scope = 'changed' WHERE hash = sha256(convert_to('\(token)', 'UTF8'))"
            )
            kept = []
            for (name, instance) in instances where try await Self.introspect(token, at: instance)?.scope == "read" {
                kept.append(name)
            }
            if kept.count == instances.count { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(kept.count == instances.count, "only \(kept) keep answers: the others hear no announcements")
        await client.logout()
        let loggedOut = ContinuousClock.now
        for (name, instance) in instances {
            while try await Self.introspect(token, at: instance)?.active != false,
                ContinuousClock.now - loggedOut < .seconds(5)
            {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(try await Self.introspect(token, at: instance)?.active == false, "\(name) kept the token")
        }
        print(
            "announcements after the switch: heard by \(kept.count) instances, revocation seen everywhere "
                + "\(ContinuousClock.now - loggedOut) after the logout"
        )
    }

    /// `instance`'s introspection of `token`, as the resource server "gateway".
    private static func introspect(_ token: String, at instance: HTTPTransport) async throws -> IntrospectionResponse? {
        let credentials = Data("gateway:faults-gateway-secret-0123456789".utf8).base64EncodedString()
        let response = try await instance.send(
            WireRequest(
                method: "POST",
                path: Endpoint.introspect,
                headers: [
                    "content-type": "application/x-www-form-urlencoded", "authorization": "Basic \(credentials)",
                ],
                body: Data("token=\(token)&token_type_hint=access_token".utf8)
            )
        )
        guard response.status == 200 else { throw HarnessFailure("introspection answered \(response.status)") }
        return try WireCoding.decode(IntrospectionResponse.self, from: response.body)
    }

    /// The checks, once the load has stopped and the cluster is whole again.
    func check() async throws {
        let record = record.withLock { $0 }
        let routed = bed.routed()
        print(summary(record, routed))

        // No answer outside the work's own and 503 (an instance's "try again"), but for requests
        // HAProxy had handed to an instance that died or vanished with them: a 502 or 504 when
        // the instance's side failed (termination S… or s…), or the connection closed without an
        // answer (-1) when HAProxy ended the instance's sessions as it went down (D…). To the
        // client each is a lost answer, which it treats as one.
        let lostWithTheirInstance: (ClusterBed.Routed) -> Bool = { request in
            ["S", "s", "D"].contains { request.termination.hasPrefix($0) }
        }
        let unexpected = routed.filter { request in
            switch request.status {
            case 200..<500, 503: false
            case 502, 504, -1: !lostWithTheirInstance(request)
            default: true
            }
        }
        #expect(
            unexpected.isEmpty,
            "answers that are neither the work's, 503, nor a lost instance's: \(unexpected.prefix(8))"
        )
        #expect(!routed.contains { $0.status == 500 }, "500s: \(routed.filter { $0.status == 500 }.prefix(5))")

        // The load did something, before and after each fault.
        #expect(record.registered.count >= 5, "\(record.registered.count) registrations")
        #expect(record.refreshes >= 10, "\(record.refreshes) refreshes")
        #expect(record.approved.count >= 3, "\(record.approved.count) push approvals")

        // Every acknowledged registration is there.
        let stored = Set(try await bed.sql("SELECT id FROM profiles").split(separator: "\n").map(String.init))
        let lost = record.registered.filter { !stored.contains($0) }
        #expect(lost.isEmpty, "\(lost.count) of \(record.registered.count) acknowledged registrations lost")

        // Every acknowledged approval is approved, once: each transaction has one accepted answer.
        for id in record.approved {
            #expect(try await portal.result(id).status == .approved, "transaction \(id)")
        }
        let acceptedAnswers = Dictionary(
            grouping: routed.filter { $0.method == "POST" && $0.path.hasSuffix("/answer") && $0.status / 100 == 2 },
            by: \.path
        )
        let twice = acceptedAnswers.filter { $0.value.count > 1 }
        #expect(twice.isEmpty, "answers accepted twice: \(twice.keys.prefix(5))")

        // Each user's session is the last the server acknowledged: it refreshes.
        for (index, user) in sessionUsers.enumerated() {
            do { try await user.refreshSession() } catch { Issue.record("session\(index) cannot refresh: \(error)") }
        }

        // The lockout held: no guesser heard more wrong PINs than the limit leaves (3: two
        // refusals, then the profile goes), and guessers were deregistered.
        let overLimit = record.guessers.filter { $0.refused > 2 }
        #expect(overLimit.isEmpty, "guessers told of more wrong PINs than allowed: \(overLimit)")
        #expect(record.guessers.contains { $0.deregistered }, "no guesser was deregistered")
    }

    private func summary(_ record: Record, _ routed: [ClusterBed.Routed]) -> String {
        var lines = [
            "cluster faults: \(record.registered.count) registrations, \(record.logins) logins, "
                + "\(record.refreshes) refreshes, \(record.approved.count) push approvals acknowledged; "
                + "\(record.failures.count) operations failed; \(routed.count) requests through HAProxy, "
                + Dictionary(grouping: routed, by: \.status).mapValues(\.count).sorted { $0.key < $1.key }
                .map { "\($0.value) × \($0.key)" }.joined(separator: ", ")
        ]
        for (index, fault) in record.faults.enumerated() {
            // Recovered when the last operation that failed after the fault began (and before the
            // next one) had failed.
            let next = record.faults.dropFirst(index + 1).first?.began
            let failures = record.failures.map(\.at).filter { failed in
                failed >= fault.began && (next.map { failed < $0 } ?? true)
            }
            let recovery = failures.max().map { "\($0 - fault.began)" } ?? "no failure"
            lines.append("  \(fault.name): \(failures.count) operations failed, the last \(recovery) after it began")
        }
        lines += record.failures.prefix(6).map { "  failed: \($0.what)" }
        return lines.joined(separator: "\n")
    }

    private static func makeClient(
        _ name: String,
        bed: ClusterBed,
        scratch: URL,
        plugins: LoadedPlugins
    ) throws
        -> UserClient
    {
        try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: scratch.appendingPathComponent("devices/\(name)"),
                transport: HTTPTransport(baseURL: bed.front, timeout: 60),
                appID: "faults",
                plugins: plugins
            )
        )
    }

    private static func clientPlugins() throws -> LoadedPlugins {
        let manifest = try ManifestLoader.jsonAndYAML.parse(
            Data(ClusterFaultTests.manifest.utf8),
            format: YAMLManifestFormat(),
            source: "faults.yaml",
            additionalSections: ["server"]
        )
        return try PluginRegistry.builtIn.load(manifest, environment: PluginEnvironment(), sides: .client)
    }
}

/// A user of the demo registration API: their address, then the code it "sent" (which it
/// returns in its reply), then the PIN.
private struct Demo: RegistrationDelegate, AuthenticationDelegate {
    var email = ""
    var pin = FaultLoad.pin

    func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse {
        guard challenge.step == .finish else { return .data(email) }
        // "Code sent to ann@example.com: 123456"
        let text = challenge.info?.data ?? ""
        return .data(String(text.suffix(6)))
    }
    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .pin(PIN(pin)) }
    func pin(_ challenge: PinChallenge) -> PinResponse { .pin(PIN(pin)) }
}

private struct Phone: MobileAuthRequestDelegate {
    var answer: MobileAuthConfirmationResponse
    func confirmation(_ challenge: MobileAuthConfirmationChallenge) -> MobileAuthConfirmationResponse { answer }
    func pin(_ challenge: PinChallenge, for request: MobileAuthRequest) -> PinResponse { .pin(PIN(FaultLoad.pin)) }
}

/// Whether `condition` holds within `seconds`, checked every 50 ms.
private func eventually(seconds: Double, _ condition: @Sendable () async throws -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if (try? await condition()) == true { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return (try? await condition()) == true
}
