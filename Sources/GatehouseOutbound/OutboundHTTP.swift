import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1

/// The server side's own HTTP calls — portal callbacks, linked-service webhooks, token
/// introspection — through AsyncHTTPClient on the process's event loops: a connect timeout, a
/// deadline for the whole call, a bounded answer, and no redirects (a call goes to the address
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
        configuration: HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(3), read: .seconds(10))
        )
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
        // Bounded before the conversion to milliseconds, which would overflow for a huge Duration.
        let bounded = min(max(timeout, .zero), .seconds(600))
        let milliseconds = bounded.components.seconds * 1000 + bounded.components.attoseconds / 1_000_000_000_000_000
        do {
            let response = try await client.execute(request, timeout: .milliseconds(milliseconds))
            let collected = try await response.body.collect(upTo: max(0, maxResponseBytes))
            return Response(status: Int(response.status.code), body: Data(collected.readableBytesView))
        } catch is NIOTooManyBytesError {
            throw Failure(url: url.text, reason: "the answer is longer than \(maxResponseBytes) bytes")
        } catch {
            throw Failure(url: url.text, reason: "\(error)")
        }
    }
}
