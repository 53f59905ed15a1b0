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
        public var status: Int
        public var body: Data
    }

    /// The call could not be made or did not finish in time.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var url: String
        public var reason: String
        public var description: String { "\(url): \(reason)" }

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

    /// POSTs `body` to `url` and waits at most `timeout` for the whole answer.
    public static func post(
        _ url: URL,
        headers: [(String, String)],
        body: Data,
        timeout: Duration,
        maxResponseBytes: Int = 64 * 1024
    ) async throws -> Response {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        do {
            let response = try await client.execute(request, timeout: .milliseconds(milliseconds))
            let collected = try await response.body.collect(upTo: maxResponseBytes)
            return Response(status: Int(response.status.code), body: Data(collected.readableBytesView))
        } catch let error as HTTPClientError {
            throw Failure(url: url.absoluteString, reason: "\(error)")
        } catch is NIOTooManyBytesError {
            throw Failure(url: url.absoluteString, reason: "the answer is longer than \(maxResponseBytes) bytes")
        }
    }
}
