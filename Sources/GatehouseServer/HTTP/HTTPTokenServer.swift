import Foundation
import GatehouseProtocol
import HTTPTypes
public import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
public import Prometheus
import ServiceLifecycle

/// The token server over HTTP (Hummingbird 2): every request goes to ``TokenServer/handle(_:)``,
/// so HTTP and in-process callers get the same answers.
public enum HTTPTokenServer {
    /// An application serving `server` at `host:port` (port 0 picks a free port, reported to
    /// `onRunning` once the socket listens), holding its clients to `limits`. With `metrics`, the
    /// registry the server's metrics factory writes to, `GET /metrics` exports it.
    public static func application(
        server: TokenServer,
        host: String = "127.0.0.1",
        port: Int,
        limits: HTTPServerLimits = HTTPServerLimits(),
        metrics: PrometheusCollectorRegistry? = nil,
        logger: Logger,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let limit = server.configuration.maxRequestBytes
        // Every method reaches the token server, which answers 405 with `Allow` for a known path
        // and 404 otherwise, so TRACE or OPTIONS get the same JSON refusals as the rest.
        let responder = CallbackResponder<AddressedRequestContext> { request, context in
            if let metrics, request.uri.path == Endpoint.metrics, request.method == .get {
                await server.sampleRuntimeMetrics()
                var fields = HTTPFields()
                fields[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
                fields[.cacheControl] = "no-store"
                return Response(
                    status: .ok,
                    headers: fields,
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer()))
                )
            }
            var request = request
            let body: ByteBuffer
            do {
                body = try await request.collectBody(upTo: limit)
            } catch is NIOTooManyBytesError {
                // Refused before the token server sees it: counted here, with the same labels.
                server.metrics.request(
                    endpoint: server.endpointLabel(request.uri.path),
                    method: request.method.rawValue,
                    status: 413,
                    duration: .zero
                )
                return response(
                    ServerError(413, "invalid_request", "The request body is larger than \(limit) bytes.").response,
                    connectionClosed: nil
                )
            }
            // A field sent twice is one comma-separated value (RFC 9110 §5.3): two DPoP proofs or
            // two Authorization headers then fail as the malformed values they are.
            var headers: [String: String] = [:]
            for field in request.headers {
                headers[field.name.canonicalName] =
                    headers[field.name.canonicalName].map { $0 + ", " + field.value }
                    ?? field.value
            }
            let wire = WireRequest(
                method: request.method.rawValue,
                path: request.uri.query.map { "\(request.uri.path)?\($0)" } ?? request.uri.path,
                headers: headers,
                body: Data(body.readableBytesView),
                clientAddress: context.remoteAddress?.ipAddress
            )
            return response(await server.handle(wire), connectionClosed: context.connectionClosed)
        }
        // Events channels never take more than half the connection slots: the rest stay for
        // everything else, `/health` included.
        server.limitEventChannels(to: max(1, limits.effectiveMaxConnections / 2))
        let ledger = ConnectionLedger(limit: limits.effectiveMaxConnectionsPerAddress)
        let requestTimeout = limits.requestTimeout
        return Application(
            responder: responder,
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [ConnectionGuardHandler(requestTimeout: requestTimeout, ledger: ledger)]
                )
            ),
            configuration: .init(
                address: .hostname(host, port: port),
                serverName: "gatehouse",
                availableConnectionsDelegate: MaximumAvailableConnections(limits.effectiveMaxConnections)
            ),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                server.served(at: "http://\(host.contains(":") ? "[\(host)]" : host):\(bound)")
                await onRunning(bound)
            },
            logger: logger
        )
    }

    private static func response(_ wire: WireResponse, connectionClosed: EventLoopFuture<Void>?) -> Response {
        var fields = HTTPFields()
        for (name, value) in wire.headers {
            guard let fieldName = HTTPField.Name(name) else { continue }
            // Several cookies travel as one value, a cookie a line (no header value holds a line
            // break), and go out as a header each (RFC 6265 §3: they cannot be folded).
            if fieldName == .setCookie {
                for cookie in value.split(separator: "\n") {
                    fields.append(HTTPField(name: .setCookie, value: String(cookie)))
                }
            } else {
                fields[fieldName] = value
            }
        }
        guard let stream = wire.stream else {
            return Response(
                status: HTTPResponse.Status(code: wire.status),
                headers: fields,
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: wire.body))
            )
        }
        // Server-sent events: each chunk goes out as it comes; a write to a closed connection
        // throws, which ends the loop and, with it, the stream.
        return Response(
            status: HTTPResponse.Status(code: wire.status),
            headers: fields,
            body: ResponseBody { writer in
                // A graceful shutdown ends open streams, so it need not wait for their clients.
                let (relay, continuation) = AsyncStream<Data>.makeStream()
                let pump = Task {
                    for await chunk in stream { continuation.yield(chunk) }
                    continuation.finish()
                }
                defer { pump.cancel() }
                // A client that went away ends its stream now, not at the next write that fails
                // (ConnectionGuardHandler closes a streaming connection its client closed).
                connectionClosed?.whenComplete { _ in continuation.finish() }
                try await withGracefulShutdownHandler {
                    for await chunk in relay { try await writer.write(ByteBuffer(bytes: chunk)) }
                } onGracefulShutdown: {
                    continuation.finish()
                }
                try await writer.finish(nil)
            }
        )
    }
}

/// A request context that keeps the connection's peer address, for limits per client.
struct AddressedRequestContext: RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    /// Completed when the connection closes, whoever closes it.
    let connectionClosed: EventLoopFuture<Void>

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        connectionClosed = source.channel.closeFuture
    }
}
