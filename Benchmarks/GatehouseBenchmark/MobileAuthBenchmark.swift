import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import HTTPTypes
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

// The push round trip: portal start → device notified (events channel) → sealed payload
// fetched → sealed answer → verdict → signed callback received by the portal.

/// The server's CPU time (user + system) so far, from /proc: what the server itself spent,
/// whatever the load generator on the same cores did.
func serverCPUSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    // After "pid (comm) ", field 3 is the state; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The number on the `name:` line of a /proc file (`VmRSS:` in status, `write_bytes:` in io).
func procField(_ name: String, in path: String) -> Double? {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") })
    else { return nil }
    return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap { Double($0) }
}

/// Bytes the server has had written to storage so far (its own accounting, /proc/<pid>/io):
/// what durability costs per operation. The log, the database file and their fsyncs.
func serverWrittenBytes(_ pid: Int32) -> Double { procField("write_bytes", in: "/proc/\(pid)/io") ?? 0 }

/// Where the portal waits for its callbacks: a loopback HTTP server that records when each
/// transaction's callback arrived and wakes whoever waits for it.
final class CallbackReceiver: Sendable {
    private let waiting = Mutex<[String: CheckedContinuation<Void, Never>]>([:])
    private let early = Mutex<Set<String>>([])

    func arrived(_ transactionID: String) {
        let waiter = waiting.withLock { $0.removeValue(forKey: transactionID) }
        if let waiter { waiter.resume() } else { _ = early.withLock { $0.insert(transactionID) } }
    }

    /// Returns once the callback for `transactionID` has arrived.
    func wait(for transactionID: String) async {
        await withCheckedContinuation { continuation in
            let already = waiting.withLock { waiting in
                if early.withLock({ $0.remove(transactionID) }) != nil { return true }
                waiting[transactionID] = continuation
                return false
            }
            if already { continuation.resume() }
        }
    }

    /// Serves `POST /callback` on a free loopback port; returns the port and the service to run.
    func application() -> (some Service, AsyncStream<Int>) {
        let router = Router()
        router.post("/callback") { request, _ -> Response in
            var request = request
            let body = try await request.collectBody(upTo: 4096)
            if let callback = try? WireCoding.decode(PortalCallback.self, from: Data(body.readableBytesView)) {
                self.arrived(callback.transactionID)
            }
            return Response(status: .noContent)
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "gatehouse.bench.portal")
        logger.logLevel = .error
        let application = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) },
            logger: logger
        )
        return (application, ports)
    }
}

/// The numbers the portal shows, by transaction: how the benchmark's "user" reads them.
final class NumberBoard: Sendable {
    private let numbers = Mutex<[String: Int]>([:])
    func show(_ number: Int?, for transactionID: String) { numbers.withLock { $0[transactionID] = number } }
    func number(for transactionID: String) -> Int? { numbers.withLock { $0[transactionID] } }
    func forget(_ transactionID: String) { numbers.withLock { _ = $0.removeValue(forKey: transactionID) } }
}

/// The phone's side: types the number the portal shows (the benchmark passes it along).
struct BenchmarkPhone: MobileAuthRequestDelegate {
    let numbers: NumberBoard

    func confirmation(_ challenge: MobileAuthConfirmationChallenge) async -> MobileAuthConfirmationResponse {
        // The push can beat the portal's response with the number by a few microseconds.
        for _ in 0..<2000 {
            if let number = numbers.number(for: challenge.request.transactionID) {
                return .accept(number: number)
            }
            try? await Task.sleep(for: .microseconds(50))
        }
        return .deny(.notAccepted)
    }
}

/// Runs the push round trip at each level and prints transactions per second, round-trip
/// latency and the server's CPU time per transaction.
func benchmarkPushRoundTrip(
    devices: [(UserClient, UserProfile, String)],
    baseURL: String,
    serverPID: Int32,
    levels: [Int],
    seconds: Double
) async throws {
    let receiver = CallbackReceiver()
    let (application, ports) = receiver.application()
    let group = ServiceGroup(
        configuration: .init(services: [application], logger: Logger(label: "gatehouse.bench.services"))
    )
    let services = Task { try await group.run() }
    var iterator = ports.makeAsyncIterator()
    guard let port = await iterator.next() else { return }
    let callbackURI = "http://127.0.0.1:\(port)/callback"
    let portal = PortalClient(
        transport: HTTPTransport(baseURL: baseURL),
        clientID: "portal",
        secret: "example-portal-secret-change-me"
    )
    let numbers = NumberBoard()
    let phone = BenchmarkPhone(numbers: numbers)
    // Each device listens on its events channel and answers what arrives.
    let listeners = devices.map { client, profile, _ in
        Task {
            for try await request in client.mobileAuthRequests(for: profile, reconnectDelay: .milliseconds(50)) {
                await client.handlePushMobileAuthRequest(request, delegate: phone)
            }
        }
    }
    defer { for listener in listeners { listener.cancel() } }
    try await Task.sleep(for: .milliseconds(300))

    print("\nPush round trips (portal start → event → sealed payload → sealed answer → verdict → signed callback)")
    print("transactions    tx/s   median ms    p99 ms   server CPU ms/tx")
    for level in levels {
        let deadline = Date().addingTimeInterval(seconds)
        let cpuBefore = serverCPUSeconds(serverPID)
        let start = Date()
        let samples = try await withThrowingTaskGroup(of: [Double].self) { tasks in
            for (_, _, user) in devices.prefix(level) {
                tasks.addTask {
                    var latencies: [Double] = []
                    while Date() < deadline {
                        let began = DispatchTime.now().uptimeNanoseconds
                        let started = try await portal.start(
                            PortalMobileAuthRequest(userID: user, type: "login", callbackURI: callbackURI)
                        )
                        numbers.show(started.number, for: started.transactionID)
                        await receiver.wait(for: started.transactionID)
                        latencies.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1e6)
                        numbers.forget(started.transactionID)
                    }
                    return latencies
                }
            }
            var all: [Double] = []
            for try await latencies in tasks { all += latencies }
            return all
        }
        let elapsed = Date().timeIntervalSince(start)
        let cpu = serverCPUSeconds(serverPID) - cpuBefore
        let sorted = samples.sorted()
        func percentile(_ p: Double) -> Double {
            sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
        }
        print(
            String(
                format: "%12d %7.1f %11.2f %9.2f   %.2f",
                level,
                Double(samples.count) / elapsed,
                percentile(0.5),
                percentile(0.99),
                samples.isEmpty ? 0 : cpu * 1000 / Double(samples.count)
            )
        )
    }
    await group.triggerGracefulShutdown()
    _ = try? await services.value
}
