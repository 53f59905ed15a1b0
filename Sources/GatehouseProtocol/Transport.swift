public import Foundation

// How wire messages move: requests and responses as the server core sees them, the transports
// that carry them (in-process or HTTP), and the JSON conventions of the wire.

/// A request as the server core sees it, whichever transport carried it.
public struct WireRequest: Sendable {
    /// The HTTP method in upper case, such as `POST`.
    public var method: String
    /// The request target as sent: the path, with its query when there is one.
    public var path: String
    /// The request's headers, keys lowercased; read them with ``header(_:)``.
    public var headers: [String: String]
    /// The request body as received; empty for none.
    public var body: Data
    /// The IP address the request came from, as the transport saw it (nil in-process). Never
    /// taken from a header, which the client writes.
    public var clientAddress: String?

    /// `headers` keys are matched case-insensitively.
    public init(
        method: String,
        path: String,
        headers: [String: String] = [:],
        body: Data = Data(),
        clientAddress: String? = nil
    ) {
        self.method = method
        self.path = path
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }) { first, _ in first }
        self.body = body
        self.clientAddress = clientAddress
    }

    /// The value of the header `name`, whatever its case; `nil` when the request has none.
    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// Sets a header; names are kept lowercased, as `header(_:)` looks them up.
    public mutating func setHeader(_ name: String, _ value: String?) { headers[name.lowercased()] = value }
}

/// A response as the server core produces it.
public struct WireResponse: Sendable {
    /// The HTTP status code, such as 200 or 400.
    public var status: Int
    /// The response's headers; the transport writes them as given, except `Set-Cookie`, which
    /// holds one cookie a line and goes out as one header a cookie.
    public var headers: [String: String]
    /// The response body: JSON for the API, HTML for the hosted web pages.
    public var body: Data
    /// A body that goes on after the headers (server-sent events), chunk by chunk; `body` is
    /// then empty. The stream ends when the server closes it; the reader ends it by dropping it.
    public var stream: AsyncStream<Data>?

    /// Creates a response; `stream`, when given, follows the headers in place of `body`.
    public init(status: Int, headers: [String: String] = [:], body: Data, stream: AsyncStream<Data>? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.stream = stream
    }

    /// A header's value, whatever the case of its name.
    public func header(_ name: String) -> String? {
        if let exact = headers[name] { return exact }
        let lowered = name.lowercased()
        return headers.first { $0.key.lowercased() == lowered }?.value
    }
}

/// Moves wire requests to a token server: in-process (embedded) or over HTTP.
public protocol TokenServerTransport: Sendable {
    /// The URL the server is reached at, for DPoP proofs (`htu`).
    var baseURL: String { get }
    func send(_ request: WireRequest) async throws -> WireResponse
    /// Sends a request whose answer streams (server-sent events): the status and headers, and
    /// the body's chunks as they come. An error answer has its whole body in the response.
    func open(_ request: WireRequest) async throws -> (WireResponse, AsyncThrowingStream<Data, any Error>)
}

extension TokenServerTransport {
    /// In-process transports hand the server's own stream through.
    public func open(_ request: WireRequest) async throws -> (WireResponse, AsyncThrowingStream<Data, any Error>) {
        let response = try await send(request)
        let chunks = AsyncThrowingStream<Data, any Error> { continuation in
            let task = Task {
                if let stream = response.stream {
                    for await chunk in stream { continuation.yield(chunk) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        return (response, chunks)
    }
}

/// JSON coding with the wire's conventions.
public enum WireCoding {
    // Made once: set-up is per-request work that need not be (both are safe to share).
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()
    private static let decoder = JSONDecoder()

    /// Encodes a wire message as JSON with sorted keys, so equal messages give equal bytes.
    public static func encode(_ value: some Encodable) throws -> Data { try encoder.encode(value) }

    /// Decodes a wire message from JSON; throws `DecodingError` when it does not match the type.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try decoder.decode(type, from: data)
    }
}
