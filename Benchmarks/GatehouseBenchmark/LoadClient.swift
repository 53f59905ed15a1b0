import Foundation
import Histogram
import NIOCore
import NIOHTTP1
import NIOPosix

// The load generator: one keep-alive HTTP/1.1 connection per simulated client, every one driven
// by callbacks on a single event-loop thread (no task hops, no locks, no per-request set-up), so
// what it costs the machine stays small and is measured (its own CPU time is reported).

/// A request made before the timed window wherever the protocol allows: already in its HTTP/1.1
/// bytes, so sending it is one write.
struct PreparedRequest {
    var method: HTTPMethod
    var bytes: ByteBuffer

    init(_ method: HTTPMethod, _ uri: String, headers: [(String, String)], body: ByteBuffer? = nil) {
        self.method = method
        var text = "\(method.rawValue) \(uri) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "Content-Length: \(body?.readableBytes ?? 0)\r\n\r\n"
        var bytes = ByteBuffer(string: text)
        if var body { bytes.writeBuffer(&body) }
        self.bytes = bytes
    }
}

extension PreparedRequest {
    /// Writes the request on `context`: a head that tells the response decoder which method it
    /// answers, then the prepared bytes as they are (``PreparedRequestWriter``).
    func write(to context: ChannelHandlerContext) {
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: "/")
        context.write(NIOAny(HTTPClientRequestPart.head(head)), promise: nil)
        context.writeAndFlush(NIOAny(HTTPClientRequestPart.body(.byteBuffer(bytes))), promise: nil)
    }
}

/// A response put together from its parts as they arrive.
struct ResponseAssembler {
    private var status: UInt = 0
    private var body: ByteBuffer?

    /// Takes the next part; the whole response once its end has arrived.
    mutating func read(_ part: HTTPClientResponsePart) -> Answer? {
        switch part {
        case .head(let head):
            status = head.status.code
            body = nil
        case .body(var bytes):
            if body == nil { body = bytes } else { body?.writeBuffer(&bytes) }
        case .end:
            return Answer(status: status, body: body ?? ByteBuffer())
        }
        return nil
    }
}

/// Sends prepared requests as they are: the head the pipeline sees only tells the response
/// decoder which method it answers; the bytes go out unchanged.
final class PreparedRequestWriter: ChannelOutboundHandler, RemovableChannelHandler, Sendable {
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = ByteBuffer

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .body(.byteBuffer(let bytes)):
            context.write(wrapOutboundOut(bytes), promise: promise)
        case .head, .body, .end:
            promise?.succeed()
        }
    }
}

/// A response as the workload checks it.
struct Answer {
    var status: UInt
    var body: ByteBuffer

    /// Whether the body contains `needle` (a fixed string the right answer must hold).
    func contains(_ needle: [UInt8]) -> Bool {
        // A plain scan over the bytes: Foundation's generic firstRange(of:) was a third of the
        // load generator's time.
        body.withUnsafeReadableBytes { haystack in
            guard let first = needle.first, haystack.count >= needle.count else { return needle.isEmpty }
            var start = 0
            while start <= haystack.count - needle.count {
                if haystack[start] == first {
                    var matched = 1
                    while matched < needle.count, haystack[start + matched] == needle[matched] { matched += 1 }
                    if matched == needle.count { return true }
                }
                start += 1
            }
            return false
        }
    }

    var text: String { String(buffer: body) }
}

/// What comes after a response: the operation's next request, its end, or a wrong answer.
enum Next {
    case send(PreparedRequest)
    case finished
    case failed(String)
}

/// One simulated client's operations, used on its connection's event loop only.
protocol Workload: AnyObject, Sendable {
    /// The first request of a new operation.
    func begin() -> PreparedRequest
    /// What follows `answer` within the current operation.
    func next(after answer: Answer) -> Next
    /// Whether another operation can follow a failed one (a broken refresh chain cannot).
    var canContinueAfterFailure: Bool { get }
    /// Proofs or requests made in the timed window because their prepared stock ran out.
    var madeLive: Int { get }
}

/// What one connection measured.
struct ConnectionFigures: Sendable {
    var operations = 0
    var errors = 0
    var firstError: String?
    /// Operation latencies in microseconds.
    var latencies = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    /// For operations of several stages: nanoseconds from each operation's start to the end of
    /// each stage, summed over the operations.
    var stageNanoseconds: [UInt64] = []
}

/// Drives a workload over one connection until the deadline, then reports.
/// Used on its connection's event loop only (`@unchecked Sendable` hands it there).
final class WorkloadDriver: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart

    private let workload: any Workload
    private let deadline: UInt64
    private let done: EventLoopPromise<ConnectionFigures>
    private var figures = ConnectionFigures()
    private var operationStarted: UInt64 = 0
    private var response = ResponseAssembler()
    private var finished = false

    init(workload: any Workload, deadline: UInt64, done: EventLoopPromise<ConnectionFigures>) {
        self.workload = workload
        self.deadline = deadline
        self.done = done
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    func start(_ context: ChannelHandlerContext) {
        operationStarted = Self.now()
        send(workload.begin(), context)
    }

    private func send(_ request: PreparedRequest, _ context: ChannelHandlerContext) { request.write(to: context) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let answer = response.read(unwrapInboundIn(data)) {
            switch workload.next(after: answer) {
            case .send(let request):
                send(request, context)
            case .finished:
                let now = Self.now()
                figures.operations += 1
                _ = figures.latencies.record((now - operationStarted) / 1000)
                nextOperation(context, now: now)
            case .failed(let reason):
                figures.errors += 1
                if figures.firstError == nil { figures.firstError = reason }
                guard workload.canContinueAfterFailure else { return finish(context) }
                nextOperation(context, now: Self.now())
            }
        }
    }

    private func nextOperation(_ context: ChannelHandlerContext, now: UInt64) {
        guard now < deadline else { return finish(context) }
        operationStarted = now
        send(workload.begin(), context)
    }

    private func finish(_ context: ChannelHandlerContext) {
        guard !finished else { return }
        finished = true
        done.succeed(figures)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !finished {
            finished = true
            done.fail(BenchmarkError("the server closed a connection (\(figures.operations) operations done)"))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !finished {
            finished = true
            done.fail(error)
        }
        context.close(promise: nil)
    }
}

/// Runs `workloads` (one connection each) against the server until `seconds` have passed.
func drive(
    _ workloads: [any Workload],
    ports: [Int],
    seconds: Double,
    group: MultiThreadedEventLoopGroup
) async throws -> [ConnectionFigures] {
    // Connect everyone first, so connection set-up is outside the timed window.
    // Connections spread over the ports in turn, as a balancer would.
    var channels: [(any Channel, any Workload)] = []
    for (index, workload) in workloads.enumerated() {
        channels.append((try await connectHTTPClient(group: group, port: ports[index % ports.count]), workload))
    }
    let deadline = WorkloadDriver.now() + UInt64(seconds * 1e9)
    var results: [EventLoopFuture<ConnectionFigures>] = []
    for (channel, workload) in channels {
        let promise = channel.eventLoop.makePromise(of: ConnectionFigures.self)
        let driver = WorkloadDriver(workload: workload, deadline: deadline, done: promise)
        results.append(promise.futureResult)
        try await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.addHandler(driver)
            if let context = try? channel.pipeline.syncOperations.context(handler: driver) { driver.start(context) }
        }.get()
    }
    var figures: [ConnectionFigures] = []
    for result in results { figures.append(try await result.get()) }
    for (channel, _) in channels { try? await channel.close().get() }
    return figures
}

/// A keep-alive HTTP/1.1 connection to the server on `port` that sends prepared requests as they
/// are; `handler`, if any, ends its pipeline.
func connectHTTPClient(
    group: MultiThreadedEventLoopGroup,
    port: Int,
    handler: (any ChannelHandler & Sendable)? = nil
) async throws -> any Channel {
    try await ClientBootstrap(group: group)
        .channelOption(.socketOption(.tcp_nodelay), value: 1)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(PreparedRequestWriter())
                try channel.pipeline.syncOperations.addHandler(
                    ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes))
                )
                if let handler { try channel.pipeline.syncOperations.addHandler(handler) }
            }
        }
        .connect(host: "127.0.0.1", port: port)
        .get()
}
