public import Foundation
import GatehouseKernel
public import GatehouseProtocol
import Synchronization

#if canImport(FoundationNetworking)
// On Linux, URLSession (swift-corelibs-foundation over libcurl) spins while a streaming response
// is idle: its write source on the socket fires without end and each firing polls the socket,
// about half a core and thousands of system calls a second for an events channel that waits for
// hours. The channel goes through AsyncHTTPClient (SwiftNIO) there instead, whose event loop
// sleeps in epoll until the server sends something.
import AsyncHTTPClient
import NIOCore
import NIOHTTP1

extension HTTPTransport {
    /// Opens a streaming request (server-sent events): the head once it arrives, then the body's
    /// chunks as they come. Dropping the stream closes the connection. The head must come within
    /// the transport's `timeout`; after it, a connection silent for a minute ends the stream with
    /// an error (the token server sends a comment every 15 seconds), so a caller can reconnect.
    public func open(_ request: WireRequest) async throws -> (WireResponse, AsyncThrowingStream<Data, any Error>) {
        try Self.checkBaseURL(baseURL)
        var outgoing = HTTPClientRequest(url: baseURL + request.path)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.replaceOrAdd(name: name, value: value) }
        if !request.body.isEmpty { outgoing.body = .bytes(ByteBuffer(bytes: request.body)) }
        let response: HTTPClientResponse
        do {
            response = try await Self.streamingClient.execute(outgoing, timeout: .milliseconds(Int64(timeout * 1000)))
        } catch {
            throw GenericError(
                .serverNotReachable,
                message: "The token server at \(baseURL) could not be reached for the event channel.",
                underlying: error
            )
        }
        var headers: [String: String] = [:]
        for header in response.headers { headers[header.name] = header.value }
        let status = Int(response.status.code)
        guard (200..<300).contains(status) else {
            // An error answer: its body is short; read it whole.
            let body = try await response.body.collect(upTo: 1 << 20)
            let empty = AsyncThrowingStream<Data, any Error> { $0.finish() }
            return (WireResponse(status: status, headers: headers, body: Data(body.readableBytesView)), empty)
        }
        let (chunks, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        // Ending the reader (the stream dropped, the caller cancelled) cancels the request, which
        // closes the connection.
        let reader = Task {
            do {
                for try await buffer in response.body { continuation.yield(Data(buffer.readableBytesView)) }
                continuation.finish()
            } catch {
                continuation.finish(
                    throwing: GenericError(.serverNotReachable, message: "The event channel closed.", underlying: error)
                )
            }
        }
        continuation.onTermination = { _ in reader.cancel() }
        return (WireResponse(status: status, headers: headers, body: Data()), chunks)
    }

    /// The event channels' HTTP client: no redirects, no cookies, a minute of silence at most.
    private static let streamingClient = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: HTTPClient.Configuration.Timeout(connect: .seconds(15), read: .seconds(60))
        )
    )
}

#else

extension HTTPTransport {
    /// Opens a streaming request (server-sent events): the head once it arrives, then the body's
    /// chunks as they come. Dropping the stream closes the connection.
    public func open(_ request: WireRequest) async throws -> (WireResponse, AsyncThrowingStream<Data, any Error>) {
        guard let url = URL(string: baseURL + request.path) else {
            throw GenericError(.configurationInvalid, message: "The server URL \(baseURL) is not valid.")
        }
        var urlRequest = URLRequest(url: url, timeoutInterval: 24 * 3600)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        let (chunks, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        let receiver = StreamReceiver(continuation: continuation)
        let session = URLSession(configuration: .ephemeral, delegate: receiver, delegateQueue: nil)
        let task = session.dataTask(with: urlRequest)
        continuation.onTermination = { _ in
            task.cancel()
            session.invalidateAndCancel()
        }
        task.resume()
        // Cancelling the caller cancels the connection, which ends the wait for the head.
        let head = try await withTaskCancellationHandler {
            try await receiver.head()
        } onCancel: {
            task.cancel()
        }
        guard (200..<300).contains(head.status) else {
            // An error answer: its body is short; read it whole.
            var body = Data()
            for try await chunk in chunks { body.append(chunk) }
            return (WireResponse(status: head.status, headers: head.headers, body: body), chunks)
        }
        return (WireResponse(status: head.status, headers: head.headers, body: Data()), chunks)
    }
}

/// Hands a streaming response's head and chunks from URLSession's delegate calls to async code.
private final class StreamReceiver: NSObject, URLSessionDataDelegate, Sendable {
    struct Head: Sendable {
        var status: Int
        var headers: [String: String]
    }

    private let continuation: AsyncThrowingStream<Data, any Error>.Continuation
    private let state = Mutex<(head: Head?, waiter: CheckedContinuation<Head, any Error>?, failure: (any Error)?)>(
        (nil, nil, nil)
    )

    init(continuation: AsyncThrowingStream<Data, any Error>.Continuation) {
        self.continuation = continuation
    }

    func head() async throws -> Head {
        try await withCheckedThrowingContinuation { waiter in
            let ready: Result<Head, any Error>? = state.withLock { state in
                if let head = state.head { return .success(head) }
                if let failure = state.failure { return .failure(failure) }
                state.waiter = waiter
                return nil
            }
            if let ready { waiter.resume(with: ready) }
        }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        var headers: [String: String] = [:]
        let http = response as? HTTPURLResponse
        for (name, value) in http?.allHeaderFields ?? [:] {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        let head = Head(status: http?.statusCode ?? 0, headers: headers)
        let waiter = state.withLock { state in
            state.head = head
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: head)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        continuation.yield(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let failure: any Error = GenericError(
            .serverNotReachable,
            message: "The event channel closed.",
            underlying: error
        )
        let waiter = state.withLock { state in
            if state.head == nil { state.failure = failure }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(throwing: failure)
        if let error { continuation.finish(throwing: GenericError(.serverNotReachable, underlying: error)) }
        continuation.finish()
        session.finishTasksAndInvalidate()
    }
}

#endif
