import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Tracing

/// The server side's own HTTP calls — portal callbacks, linked-service webhooks, token
/// introspection — through AsyncHTTPClient on the process's event loops: a connect timeout, a
/// deadline for the whole call (head and body), a bounded answer, and no redirects (a call goes to the address
/// its configuration allows and nowhere else; a 3xx is an answer like any other).
public enum OutboundHTTP {
    /// What came back: the status and at most `maxResponseBytes` of the body.
    public struct Response: Sendable {
        /// The HTTP status code, 3xx included (redirects are not followed).
        public var status: Int
        /// The whole body, at most `maxResponseBytes`; a longer answer is a ``Failure`` instead.
        public var body: Data
    }

    /// The call could not be made or did not finish in time.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// The URL the call was for.
        public var url: String
        /// What went wrong, in words: no connection, a timeout, an answer too long.
        public var reason: String
        /// The URL and the reason, as a log line carries them.
        public var description: String { "\(url): \(reason)" }

        /// A failure of the call to `url`, for this reason.
        public init(url: String, reason: String) {
            self.url = url
            self.reason = reason
        }
    }

    /// One client for the process, never shut down: it lives as long as the server does.
    private static let client = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: {
            var configuration = HTTPClient.Configuration(
                redirectConfiguration: .disallow,
                timeout: .init(connect: .seconds(3))
            )
            // The calls' spans are made here (``traced(_:_:_:_:)``), without the URL's path or
            // query, which may carry a portal's secrets; the client's own would name the whole URL.
            configuration.tracing.tracer = nil
            return configuration
        }()
    )

    /// POSTs `body` to `url` and waits at most `timeout` (at most ten minutes) for the whole
    /// answer. Only an ``OutboundURL`` gets here, so AsyncHTTPClient never parses a URL that was not
    /// checked; whatever goes wrong below is a `Failure`, never anything else.
    public static func post(
        _ url: OutboundURL,
        headers: [(String, String)],
        body: Data,
        timeout: Duration,
        maxResponseBytes: Int = 64 * 1024
    ) async throws(Failure) -> Response {
        var request = HTTPClientRequest(url: url.text)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        return try await execute(request, url, timeout: timeout, maxResponseBytes: maxResponseBytes)
    }

    /// GETs `url` and waits at most `timeout` (at most ten minutes) for the whole answer, with the
    /// same guarantees as ``post(_:headers:body:timeout:maxResponseBytes:)``: only a checked
    /// ``OutboundURL``, no redirects followed, at most `maxResponseBytes` read, and whatever goes
    /// wrong below is a `Failure`.
    public static func get(
        _ url: OutboundURL,
        headers: [(String, String)],
        timeout: Duration,
        maxResponseBytes: Int = 64 * 1024
    ) async throws(Failure) -> Response {
        var request = HTTPClientRequest(url: url.text)
        request.method = .GET
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        return try await execute(request, url, timeout: timeout, maxResponseBytes: maxResponseBytes)
    }

    private static func execute(
        _ request: HTTPClientRequest,
        _ url: OutboundURL,
        timeout: Duration,
        maxResponseBytes: Int
    ) async throws(Failure) -> Response {
        let tracer = InstrumentationSystem.tracer
        guard !(tracer is NoOpTracer) else {
            return try await send(request, url, timeout: timeout, maxResponseBytes: maxResponseBytes)
        }
        return try await traced(tracer, request, url) { request async -> Result<Response, Failure> in
            do throws(Failure) {
                return .success(try await send(request, url, timeout: timeout, maxResponseBytes: maxResponseBytes))
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// Runs `send` in a client span, the child of the span in effect, with the span's W3C
    /// `traceparent` added to the request. The span names the method, the scheme, host and port,
    /// and the status: never the path, the query, a header or the body.
    private static func traced(
        _ tracer: some Tracer,
        _ request: HTTPClientRequest,
        _ url: OutboundURL,
        _ send: (HTTPClientRequest) async -> Result<Response, Failure>
    ) async -> Result<Response, Failure> {
        await tracer.withSpan(request.method.rawValue, ofKind: .client) { span in
            span.attributes["http.request.method"] = request.method.rawValue
            span.attributes["url.scheme"] = url.scheme
            span.attributes["server.address"] = url.host
            span.attributes["server.port"] = url.port ?? (url.scheme == "https" ? 443 : 80)
            var request = request
            tracer.inject(span.context, into: &request.headers, using: TraceHeaderInjector())
            let result = await send(request)
            switch result {
            case .success(let response):
                span.attributes["http.response.status_code"] = response.status
                if response.status >= 400 {
                    span.attributes["error.type"] = String(response.status)
                    span.setStatus(SpanStatus(code: .error))
                }
            case .failure:
                // Not the failure's text: it names the URL.
                span.attributes["error.type"] = "request_failed"
                span.setStatus(SpanStatus(code: .error))
            }
            return result
        }
    }

    private static func send(
        _ request: HTTPClientRequest,
        _ url: OutboundURL,
        timeout: Duration,
        maxResponseBytes: Int
    ) async throws(Failure) -> Response {
        // Bounded before the conversion to milliseconds, which would overflow for a huge Duration.
        let bounded = min(max(timeout, .zero), .seconds(600))
        let milliseconds = bounded.components.seconds * 1000 + bounded.components.attoseconds / 1_000_000_000_000_000
        let late = "no whole answer within \(milliseconds) ms"
        let deadline = NIODeadline.now() + .milliseconds(milliseconds)
        // AsyncHTTPClient's deadline ends when the head arrives: the body has its own, here, so a
        // peer that sends its head and then one byte now and then is cut off at `timeout` too. An
        // event-loop timer cancels the call at the deadline (a timer task on Swift's pool would
        // wait for a thread when the process is busy), and there is no read timeout besides: the
        // call's one bound is `timeout`, whichever part of the answer is slow.
        let call = Task { () async throws -> Response in
            // The timer below is the one deadline, for the head and the body alike.
            let response = try await client.execute(request, deadline: .distantFuture)
            let collected = try await response.body.collect(upTo: max(0, maxResponseBytes))
            return Response(status: Int(response.status.code), body: Data(collected.readableBytesView))
        }
        let expired = Atomic(false)
        let timer = client.eventLoopGroup.any().scheduleTask(deadline: deadline) {
            expired.store(true, ordering: .relaxed)
            call.cancel()
        }
        defer { timer.cancel() }
        let outcome = await withTaskCancellationHandler {
            await call.result
        } onCancel: {
            call.cancel()
        }
        // A cancelled call fails (its body's iterator throws CancellationError), so a success is
        // the whole answer even when the timer fired just after it.
        switch outcome {
        case .success(let response):
            return response
        case .failure where expired.load(ordering: .relaxed):
            throw Failure(url: url.text, reason: late)
        case .failure where Task.isCancelled:
            throw Failure(url: url.text, reason: "the call was cancelled")
        case .failure(let error) where error is NIOTooManyBytesError:
            throw Failure(url: url.text, reason: "the answer is longer than \(maxResponseBytes) bytes")
        case .failure(let error):
            throw Failure(url: url.text, reason: "\(error)")
        }
    }
}

/// Writes a trace header into an outgoing request's headers.
private struct TraceHeaderInjector: Injector {
    func inject(_ value: String, forKey name: String, into headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: name, value: value)
    }
}
