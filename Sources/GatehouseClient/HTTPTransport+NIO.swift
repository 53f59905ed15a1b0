#if canImport(FoundationNetworking)
// On Linux, URLSession is libcurl underneath, and libcurl re-sends a request whose reused
// keep-alive connection turns out closed (a balancer ending an instance's sessions, an idle
// timeout racing the request): with its head, but without its body, which swift-corelibs-
// foundation cannot rewind. The server then waits for a body that never comes until its own
// request timeout, about 10 s, and the request fails anyway (docs/CLUSTER.md). Requests go
// through AsyncHTTPClient (SwiftNIO) there instead, as the events channel already does: a
// request on a connection that closed under it fails at once, as a lost answer, and nothing is
// sent twice behind the SDK's back.
import AsyncHTTPClient
import Foundation
import GatehouseKernel
import GatehouseProtocol
import NIOCore
import NIOPosix
import NIOSSL
import NIOHTTP1
import Synchronization

extension HTTPTransport {
    /// The largest answer read: the token server's are a few kilobytes; an admin export is paged.
    static let maximumAnswerBytes = 64 << 20

    /// Sends `request` to `url` and reads the whole answer within ``timeout``.
    func sendThroughNIO(_ request: WireRequest, to url: String) async throws -> WireResponse {
        // Refused before anything is sent, as the request's own fault (not the server's absence).
        for (name, value) in request.headers where !Self.isFieldName(name) || !Self.isFieldValue(value) {
            throw GenericError(
                .configurationInvalid,
                message: "The header \(Self.isFieldName(name) ? name : "name") holds characters HTTP does not allow."
            )
        }
        var outgoing = HTTPClientRequest(url: url)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.replaceOrAdd(name: name, value: value) }
        if !request.body.isEmpty { outgoing.body = .bytes(ByteBuffer(bytes: request.body)) }
        // One deadline for the head and the body alike: an event-loop timer cancels the call.
        let call = Task { () async throws -> WireResponse in
            let response = try await Self.requestClient.execute(outgoing, deadline: .distantFuture)
            let body = try await response.body.collect(upTo: Self.maximumAnswerBytes)
            var headers: [String: String] = [:]
            for header in response.headers {
                headers[header.name] = headers[header.name].map { $0 + ", " + header.value } ?? header.value
            }
            return WireResponse(status: Int(response.status.code), headers: headers, body: Data(body.readableBytesView))
        }
        let expired = Atomic(false)
        let limit = TimeAmount.milliseconds(Int64(max(0, min(timeout, 86_400)) * 1000))
        let timer = Self.requestClient.eventLoopGroup.any().scheduleTask(in: limit) {
            expired.store(true, ordering: .relaxed)
            call.cancel()
        }
        defer { timer.cancel() }
        let outcome = await withTaskCancellationHandler {
            await call.result
        } onCancel: {
            call.cancel()
        }
        switch outcome {
        case .success(let response):
            return response
        case .failure where expired.load(ordering: .relaxed):
            throw unreachable("no answer in time", underlying: nil)
        case .failure(let error) where Task.isCancelled:
            throw unreachable("the request was cancelled", underlying: error)
        case .failure(let error):
            throw failure(error)
        }
    }

    /// RFC 9110's token: the characters a field name may hold.
    private static func isFieldName(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
            }
    }

    /// A field value: visible characters, spaces and tabs; no control character (NUL, CR, LF).
    private static func isFieldValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }

    /// What a failure below HTTP means to the SDK, in the words ``reason(_:)`` gives URLSession's.
    private func failure(_ error: any Error) -> GenericError {
        switch error {
        case let error as NIOConnectionError:
            if error.dnsAError != nil || error.dnsAAAAError != nil, error.connectionErrors.isEmpty {
                return unreachable("the host name is unknown", underlying: error)
            }
            let codes = error.connectionErrors.compactMap { ($0.error as? IOError)?.errnoCode }
            return connectFailure(codes, underlying: error)
        case let error as IOError:
            return connectFailure([error.errnoCode], underlying: error)
        case let error as HTTPClientError:
            switch error {
            case .connectTimeout, .readTimeout, .deadlineExceeded, .getConnectionFromPoolTimeout:
                return unreachable("no answer in time", underlying: error)
            case .remoteConnectionClosed:
                // As URLSession's "network connection lost": the request may have been done.
                return connectionLost(error)
            case .tlsHandshakeTimeout:
                return unreachable("the TLS connection failed (no handshake in time)", underlying: error)
            case .invalidURL, .emptyHost, .emptyScheme:
                return unreachable("the URL is not usable", underlying: error)

            default:
                return unreachable("\(error)", underlying: error)
            }
        case let error as ChannelError:
            if case .connectTimeout = error { return unreachable("no answer in time", underlying: error) }
            return connectionLost(error)
        case is NIOSSLError, is BoringSSLError:
            return unreachable("the TLS connection failed (\(error))", underlying: error)
        case is HTTPParserError:
            return unreachable("the answer was not HTTP (is it the right port?)", underlying: error)
        case is NIOTooManyBytesError:
            return unreachable("the answer is longer than \(Self.maximumAnswerBytes) bytes", underlying: error)
        default:
            return unreachable("\(error)", underlying: error)
        }
    }

    private func connectFailure(_ codes: [CInt], underlying: any Error) -> GenericError {
        if codes.contains(ECONNREFUSED) {
            return unreachable(
                "the connection was refused (is the server running on that port?)",
                underlying: underlying
            )
        }
        if codes.contains(where: { [ENETUNREACH, ENETDOWN, EHOSTUNREACH].contains($0) }) {
            return GenericError(.networkConnectivityFailure, underlying: underlying)
        }
        if codes.contains(where: { [ECONNRESET, EPIPE].contains($0) }) { return connectionLost(underlying) }
        if let code = codes.first {
            return unreachable(String(cString: strerror(code)).lowercased(), underlying: underlying)
        }
        return unreachable("the connection failed", underlying: underlying)
    }

    /// The connection closed under the request: it may have been done; its answer is lost.
    private func connectionLost(_ underlying: any Error) -> GenericError {
        GenericError(
            .networkConnectivityFailure,
            message: "The connection to the token server at \(baseURL) closed before the answer came.",
            underlying: underlying
        )
    }

    private func unreachable(_ reason: String, underlying: (any Error)?) -> GenericError {
        GenericError(
            .serverNotReachable,
            message: "The token server at \(baseURL) could not be reached: \(reason).",
            underlying: underlying
        )
    }

    /// The requests' HTTP client: no redirects followed, no cookies kept, and a connection that
    /// cannot be made fails the request at once instead of being tried again until its deadline.
    private static let requestClient: HTTPClient = {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: HTTPClient.Configuration.Timeout(connect: .seconds(15))
        )
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()
}
#endif
