import Foundation
import GatehouseOutbound
import HTTPTypes
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@Suite("The server side's own HTTP calls")
struct OutboundHTTPTests {
    @Test(
        "a redirect is an answer, never followed; a slow head or a slow body ends at the deadline; a long answer is refused",
        .timeLimit(.minutes(3))
    )
    func boundaries() async throws {
        let reached = Mutex(0)
        let router = Router()
        router.post("/moved") { _, _ -> Response in
            Response(status: .temporaryRedirect, headers: [.location: "/target"])
        }
        router.post("/target") { _, _ -> Response in
            reached.withLock { $0 += 1 }
            return Response(status: .noContent)
        }
        // Answers only when the test lets it, after the call under test has given up: without a
        // deadline the call would wait until the test's time limit.
        let (release, releasing) = AsyncStream.makeStream(of: Void.self)
        router.post("/slow") { _, _ -> Response in
            for await _ in release { break }
            return Response(status: .noContent)
        }
        // The head at once, then a byte every 100 ms for 3 s: a deadline that ended with the head
        // would let this answer through whole.
        router.post("/trickle") { _, _ -> Response in
            Response(
                status: .ok,
                body: ResponseBody { writer in
                    for _ in 0..<30 {
                        try await writer.write(ByteBuffer(string: "x"))
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    try await writer.finish(nil)
                }
            )
        }
        router.post("/long") { _, _ -> String in String(repeating: "x", count: 10_000) }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let application = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }
        )
        let group = ServiceGroup(configuration: .init(services: [application], logger: .init(label: "target")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            func url(_ path: String) throws -> OutboundURL { try OutboundURL("http://127.0.0.1:\(port)\(path)") }

            // Generous: a loaded machine once took over 5 s for the first loopback call, and in
            // two CI runs more than 10 s: the first call is tried three times before it counts as
            // a failure.
            var moved = OutboundHTTP.Response?.none
            for attempt in 1...3 where moved == nil {
                do {
                    moved = try await OutboundHTTP.post(
                        try url("/moved"),
                        headers: [],
                        body: Data("{}".utf8),
                        timeout: .seconds(30)
                    )
                } catch  where attempt < 3 {
                    continue
                }
            }
            let answer = try #require(moved)
            #expect(answer.status == 307)
            #expect(reached.withLock { $0 } == 0)

            // Ended by the call's own deadline: said by the error itself, since a loaded machine
            // makes any bound on the time a guess.
            let slow = await #expect(throws: OutboundHTTP.Failure.self) {
                _ = try await OutboundHTTP.post(
                    try url("/slow"),
                    headers: [],
                    body: Data(),
                    timeout: .milliseconds(500)
                )
            }
            #expect(slow?.reason == "no whole answer within 500 ms", "\(String(describing: slow))")
            releasing.finish()

            let trickled = await #expect(throws: OutboundHTTP.Failure.self) {
                _ = try await OutboundHTTP.post(
                    try url("/trickle"),
                    headers: [],
                    body: Data(),
                    timeout: .seconds(1)
                )
            }
            #expect(trickled?.reason == "no whole answer within 1000 ms", "\(String(describing: trickled))")

            await #expect(throws: OutboundHTTP.Failure.self) {
                _ = try await OutboundHTTP.post(
                    try url("/long"),
                    headers: [],
                    body: Data(),
                    timeout: .seconds(30),
                    maxResponseBytes: 1000
                )
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}
