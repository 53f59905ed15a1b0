import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import HTTPTypes
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import GatehouseServer

@Suite("The callback outbox: what may be stored, what is sent, how often", .serialized)
struct CallbackOutboxTests {
    @Test("a callback URI that is not one exact, valid URL is refused at the portal API, nothing stored")
    func refusedAtThePortalAPI() async throws {
        try await withFixture(.http) { fixture in
            _ = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)
            let before = try await fixture.snapshotMobileAuth()
            for uri in [
                // The port that trapped inside the HTTP client, under the any-port prefix `http://127.0.0.1:`.
                "http://127.0.0.1:65536/cb", "http://127.0.0.1:4294967377/cb", "http://127.0.0.1:0/cb",
                // Dot segments and their encodings.
                "http://127.0.0.1:9000/cb/../admin", "http://127.0.0.1:9000/cb/%2e%2e/admin",
                "http://127.0.0.1:9000/cb/..%2fadmin", "http://127.0.0.1:9000/cb/.%2E/admin",
                // Stored as written, sent normalised: encoded or full-width hosts, CR/LF, spaces.
                "http://%31%32%37.0.0.1:9000/cb", "http://１２７.0.0.1:9000/cb", "http://127.0.0.1:9000/cb\r\nX: 1",
                "http://127.0.0.1:9000/c b", "http://127.0.0.1:9000/cb\\admin",
            ] {
                let response = try await portal.start(
                    PortalMobileAuthRequest(userID: "jane@example.com", type: "login", callbackURI: uri)
                )
                #expect(response.status == 400, "\(uri.debugDescription)")
                let body = try WireCoding.decode(ErrorBody.self, from: response.body)
                #expect(body.errorDescription.contains("callback_uri"), "\(uri.debugDescription)")
            }
            #expect(try await fixture.snapshotMobileAuth() == before)
        }
    }

    @Test("a stored callback URI that no longer passes is failed, never sent, and the server goes on")
    func storedBadURIIsFailed() async throws {
        try await withPortalListener { port, received in
            try await withFixture(.http) { fixture in
                _ = try await enrolledDevice(fixture)
                let portal = Portal(fixture: fixture)
                let started = try await portal.started("login", callbackURI: "http://127.0.0.1:\(port)/cb")
                // Written behind the server's back, as a row from an older version or a hand-edit would be.
                for (index, bad) in [
                    "http://127.0.0.1:65536/cb", "http://127.0.0.1:\(port)/cb/../admin", "http://127.0.0.1:\(port)/c b",
                ]
                .enumerated() {
                    let id = index == 0 ? started.transactionID : try await portal.started("login").transactionID
                    try await fixture.write { db in
                        try db.execute(
                            sql: "UPDATE mobile_transactions SET callback_uri = ? WHERE id = ?",
                            arguments: [bad, id]
                        )
                    }
                    // The next request for the same user supersedes it: its callback is due at once.
                    let next = try await portal.started("login")
                    #expect(
                        await eventually {
                            try await transactionRow(fixture, id)?["callback_state"] == "failed"
                        },
                        "\(bad)"
                    )
                    #expect(try await transactionRow(fixture, id)?["callback_attempts"] == 1)
                    // Still serving.
                    #expect(try await portal.result(next.transactionID).status == .pending)
                }
                #expect(received.withLock { $0.isEmpty })
            }
        }
    }

    @Test("a portal that never answers holds up no other callback: each is sent as it falls due")
    func hangingPortalDelaysNoOther() async throws {
        try await withPortalListener { port, received in
            try await withFixture(.http) { fixture in
                _ = try await enrolledDevice(fixture)
                let portal = Portal(fixture: fixture)
                // Each login supersedes the user's pending one, whose callback then falls due.
                _ = try await portal.started("login", callbackURI: "http://127.0.0.1:\(port)/hang")
                _ = try await portal.started("login", callbackURI: "http://127.0.0.1:\(port)/cb")
                #expect(await eventually { received.withLock { $0.contains("/hang") } })
                let hangingSince = ContinuousClock.now
                _ = try await portal.started("login")
                // The hanging send gives up after 5 s; the other callback does not wait for it.
                #expect(await eventually(seconds: 4.5) { received.withLock { $0.contains("/cb") } })
                #expect(ContinuousClock.now - hangingSince < .seconds(4.5))
            }
        }
    }

    @Test("a try is counted when it is claimed; a callback whose tries were all claimed is never sent again")
    func attemptsCountedAtClaim() async throws {
        try await withPortalListener { port, received in
            try await withFixture(.http) { fixture in
                _ = try await enrolledDevice(fixture)
                let portal = Portal(fixture: fixture)
                // A portal that accepts the request and never answers: the try is counted while it hangs.
                let hanging = try await portal.started("login", callbackURI: "http://127.0.0.1:\(port)/hang")
                _ = try await portal.started("login")
                #expect(await eventually { received.withLock { $0.contains("/hang") } })
                let row = try #require(try await transactionRow(fixture, hanging.transactionID))
                #expect(row["callback_state"] == "due")
                #expect(row["callback_attempts"] == 1)

                // A callback claimed as often as `callbackAttempts` (5) by instances that died while
                // sending: due once more when the last claim lapses, it is failed, not sent a sixth time.
                let crashed = try await portal.started("login", callbackURI: "http://127.0.0.1:\(port)/cb")
                try await fixture.write { db in
                    try db.execute(
                        sql: """
                            UPDATE mobile_transactions SET status = 'denied', reason = 'superseded', answered_at = ?,
                                callback_state = 'due', callback_attempts = 5, callback_next_at = 0
                            WHERE id = ?
                            """,
                        arguments: [fixture.clock.now.timeIntervalSince1970, crashed.transactionID]
                    )
                }
                _ = try await portal.started("login")  // wakes the outbox
                #expect(
                    await eventually(seconds: 12) {
                        try await transactionRow(fixture, crashed.transactionID)?["callback_state"] == "failed"
                    }
                )
                #expect(try await transactionRow(fixture, crashed.transactionID)?["callback_attempts"] == 5)
                #expect(!received.withLock { $0.contains("/cb") })
            }
        }
    }
}

/// The paths a test portal was called at.
private final class ReceivedPaths: Sendable {
    private let paths = Mutex<[String]>([])
    func withLock<T: Sendable>(_ body: (inout [String]) -> T) -> T { paths.withLock { body(&$0) } }
}

/// A portal on a loopback port that records the path of every POST: `/hang` is never answered
/// (until the test ends), anything else gets 204.
private func withPortalListener(
    _ body: (_ port: Int, _ received: ReceivedPaths) async throws -> Void
) async throws {
    let received = ReceivedPaths()
    let (release, releasing) = AsyncStream.makeStream(of: Void.self)
    let router = Router()
    router.post("**") { request, _ -> Response in
        received.withLock { $0.append(request.uri.path) }
        if request.uri.path == "/hang" {
            for await _ in release { break }
        }
        return Response(status: .noContent)
    }
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let application = Application(
        router: router,
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }
    )
    let group = ServiceGroup(configuration: .init(services: [application], logger: .init(label: "portal")))
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        let port = try #require(await iterator.next())
        do {
            try await body(port, received)
        } catch {
            releasing.finish()
            await group.triggerGracefulShutdown()
            throw error
        }
        releasing.finish()
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
    }
}
