import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseServer

/// Events channels are streaming answers, exempt from the request timeout: what keeps them from
/// holding the server's connection slots.
@Suite("Events channels: a server-wide cap, the end of their profile, a client that left")
struct EventChannelTests {
    @Test("the server keeps at most its cap of channels open, whatever the profiles", arguments: Mode.allCases)
    func serverWideCap(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            fixture.server.limitEventChannels(to: 2)
            var statuses: [Int] = []
            var streams: [AsyncThrowingStream<Data, any Error>] = []
            for _ in 0..<3 {
                let (head, stream) = try await open(client, profile, fixture)
                statuses.append(head.status)
                streams.append(stream)
                if head.status != 200 { #expect(head.headers["Retry-After"] == "30") }
            }
            // Below the profile's own limit of 4: the third is refused for the server's sake.
            #expect(statuses == [200, 200, 503])
            #expect(fixture.server.hub.listenerCount == 2)
            #expect(try await fixture.send("GET", Endpoint.health).status == 200)
        }
    }

    @Test("a channel ends when its profile is deregistered", arguments: Mode.allCases)
    func endsWithItsProfile(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            let (head, stream) = try await open(client, profile, fixture)
            #expect(head.status == 200)
            let ended = EndFlag()
            let reader = Task {
                do { for try await _ in stream {} } catch {}
                ended.mark()
            }
            defer { reader.cancel() }
            try await Task.sleep(for: .milliseconds(200))
            #expect(!ended.isMarked)
            try await client.deregisterUser(profile)
            // Before the next keep-alive (15 s) would have found out, with room for a loaded machine.
            #expect(await eventually(seconds: 10) { ended.isMarked })
            #expect(await eventually { fixture.server.hub.listenerCount == 0 })
        }
    }

    @Test(
        "a client that closes its connection, or its sending side, gives its channel back at once",
        arguments: [false, true]
    )
    func closedClientFreesItsSlot(halfClose: Bool) async throws {
        try await withFixture(.http) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            let base = try #require(URL(string: fixture.transport.baseURL))
            let proof = try await client.dpopProof(
                method: "GET",
                url: fixture.transport.baseURL + Endpoint.mobileAuthEvents
            )
            let socket = try LoopbackConnection(port: try #require(base.port))
            try socket.send(
                "GET \(Endpoint.mobileAuthEvents)?profile=\(profile.id) HTTP/1.1\r\nHost: \(base.host ?? "")\r\n"
                    + "DPoP: \(proof)\r\n\r\n"
            )
            #expect(try await socket.receive().hasPrefix("HTTP/1.1 200"))
            #expect(await eventually { fixture.server.hub.listenerCount == 1 })
            // Not at the next keep-alive (15 s), whose write would fail.
            if halfClose { socket.closeSendingSide() } else { socket.closeBothSides() }
            #expect(await eventually { fixture.server.hub.listenerCount == 0 })
        }
    }

    @Test(
        "a profile's slots held by an instance that stopped renewing them free up when their leases lapse; renewed ones do not",
        arguments: Mode.allCases
    )
    func leasesLapse(mode: Mode) async throws {
        let clock = ManualClock(Date())
        try await withFixture(mode, clock: clock) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            let now = clock.now.timeIntervalSince1970
            // Another instance's channels hold every slot; then it dies and renews nothing.
            try await fixture.write { db in
                for slot in 0..<EventChannelHub.maxChannelsPerProfile {
                    try db.execute(
                        sql: "INSERT INTO event_channels (profile_id, slot, id, lease_until) VALUES (?, ?, ?, ?)",
                        arguments: [profile.id, slot, "dead-\(slot)", now + ServerStore.eventChannelLease]
                    )
                }
            }
            let refused = try await open(client, profile, fixture).0
            #expect(refused.status == 429)
            #expect(fixture.server.hub.listenerCount == 0)
            clock.advance(by: ServerStore.eventChannelLease + 1)
            let (head, stream) = try await open(client, profile, fixture)
            #expect(head.status == 200)
            _ = stream
            #expect(try await fixture.count("event_channels") == 1)
            // This instance's keep-alive renews its open channels, all in one write.
            let due = try #require(fixture.server.hub.leasesDue(now: clock.now.timeIntervalSince1970))
            #expect(due.count == 1)
            #expect(fixture.server.hub.leasesDue(now: clock.now.timeIntervalSince1970) == nil)
            #expect(
                try await fixture.server.store.renewEventChannels(due, now: clock.now.timeIntervalSince1970) == Set(due)
            )
            clock.advance(by: ServerStore.eventChannelLease - 1)
            let until = try await fixture.read { db in
                try Double.fetchOne(db, sql: "SELECT lease_until FROM event_channels WHERE id = ?", arguments: [due[0]])
            }
            #expect(try #require(until) > clock.now.timeIntervalSince1970)
            // The janitor takes only lapsed leases.
            let report = try await fixture.server.store.removeExpiredState(
                now: clock.now.timeIntervalSince1970,
                limit: 100,
                idleInstallationLifetime: 1e9,
                auditRetention: 1e9
            )
            #expect(report.eventChannels == 0)
            #expect(try await fixture.count("event_channels") == 1)
        }
    }

    private func open(
        _ client: UserClient,
        _ profile: UserProfile,
        _ fixture: Fixture
    ) async throws -> (WireResponse, AsyncThrowingStream<Data, any Error>) {
        let proof = try await client.dpopProof(
            method: "GET",
            url: fixture.transport.baseURL + Endpoint.mobileAuthEvents
        )
        return try await fixture.transport.open(
            WireRequest(
                method: "GET",
                path: Endpoint.mobileAuthEvents + "?profile=" + profile.id,
                headers: ["DPoP": proof],
                body: Data()
            )
        )
    }
}

/// Set once, read from anywhere.
final class EndFlag: Sendable {
    private let value = Atomic(false)
    func mark() { value.store(true, ordering: .relaxed) }
    var isMarked: Bool { value.load(ordering: .relaxed) }
}
