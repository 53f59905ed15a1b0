import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// A request as an HTTP/2 stream brought it: the pseudo-headers (`:method`, `:scheme`, `:path`,
/// `:authority`) as sent, the other headers in lower case, and the body.
struct HTTP2Request: Sendable {
    var method: String
    var scheme: String
    var path: String
    var authority: String
    var headers: [String: String]
    var body: Data

    /// The body as a form (`application/x-www-form-urlencoded`).
    var form: [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }
}

/// What the server answers a request with.
struct HTTP2Answer: Sendable {
    var status: Int
    var headers: [String: String] = [:]
    var body: Data = Data()

    /// `status` with `object` as its JSON body.
    static func json(_ status: Int, _ object: [String: Any], headers: [String: String] = [:]) -> HTTP2Answer {
        let body = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return HTTP2Answer(
            status: status,
            headers: headers.merging(["content-type": "application/json"]) { $1 },
            body: body
        )
    }
}

/// A TLS server on 127.0.0.1 that speaks HTTP/2 only (ALPN `h2`, HTTP/2 framing from the first
/// byte): a client that fell back to HTTP/1.1 gets no answer at all. Each stream's request goes to
/// `answer`, on the server's event loop; its reply ends the stream.
final class LoopbackHTTP2Server: Sendable {
    let port: Int
    private let channel: any Channel

    private init(port: Int, channel: any Channel) {
        self.port = port
        self.channel = channel
    }

    /// `https://127.0.0.1:<port>`.
    var url: String { "https://127.0.0.1:\(port)" }

    /// Starts a server with the certificate `authority` issued for 127.0.0.1.
    static func start(
        authority: TestCertificateAuthority,
        answer: @escaping @Sendable (HTTP2Request) -> HTTP2Answer
    ) async throws -> LoopbackHTTP2Server {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [
                .certificate(try NIOSSLCertificate(bytes: Array(authority.serverCertificatePEM.utf8), format: .pem))
            ],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(authority.serverKeyPEM.utf8), format: .pem))
        )
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }
                .flatMap {
                    channel.configureHTTP2Pipeline(mode: .server) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandler(StreamHandler(answer: answer))
                        }
                    }
                    .map { _ in }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else { throw ChannelError.unknownLocalAddress }
        return LoopbackHTTP2Server(port: port, channel: channel)
    }

    /// Stops listening.
    func stop() async {
        try? await channel.close()
    }
}

/// One stream: collects the request's headers and body, then writes `answer`'s reply.
private final class StreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let answer: @Sendable (HTTP2Request) -> HTTP2Answer
    private var head: HPACKHeaders?
    private var body = Data()

    init(answer: @escaping @Sendable (HTTP2Request) -> HTTP2Answer) {
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            if head == nil { head = headers.headers }
            if headers.endStream { respond(context) }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data { body.append(contentsOf: buffer.readableBytesView) }
            if frame.endStream { respond(context) }
        default:
            break
        }
    }

    private func respond(_ context: ChannelHandlerContext) {
        guard let head else { return }
        var headers: [String: String] = [:]
        for (name, value, _) in head where !name.hasPrefix(":") { headers[name.lowercased()] = value }
        let request = HTTP2Request(
            method: head.first(name: ":method") ?? "",
            scheme: head.first(name: ":scheme") ?? "",
            path: head.first(name: ":path") ?? "",
            authority: head.first(name: ":authority") ?? "",
            headers: headers,
            body: body
        )
        let reply = answer(request)
        var replyHeaders = HPACKHeaders([(":status", String(reply.status))])
        for (name, value) in reply.headers { replyHeaders.add(name: name, value: value) }
        context.write(
            wrapOutboundOut(.headers(.init(headers: replyHeaders, endStream: reply.body.isEmpty))),
            promise: nil
        )
        if !reply.body.isEmpty {
            let frame = HTTP2Frame.FramePayload.Data(data: .byteBuffer(ByteBuffer(bytes: reply.body)), endStream: true)
            context.write(wrapOutboundOut(.data(frame)), promise: nil)
        }
        context.flush()
    }
}
