import GatehouseProtocol
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How much of the server one client may hold: without these, idle or half-sent connections
/// (slowloris) pile up until the process runs out of file descriptors and `/health` stops answering.
public struct HTTPServerLimits: Sendable, Equatable {
    /// How long a connection may take to send a whole request, counted from the moment it is
    /// ready for one (accepted, or its last response sent). An idle keep-alive connection is
    /// closed after the same time.
    public var requestTimeout: Duration
    /// Open connections at most; more wait in the listen backlog. Lowered to what the process's
    /// file-descriptor limit leaves room for.
    public var maxConnections: Int
    /// Open connections from one IP address at most (0: no limit). Behind a reverse proxy every
    /// connection comes from the proxy: raise it or turn it off there.
    public var maxConnectionsPerAddress: Int

    /// Limits with the defaults: 10 seconds per request, 1024 connections, 128 from one address.
    public init(
        requestTimeout: Duration = .seconds(10),
        maxConnections: Int = 1024,
        maxConnectionsPerAddress: Int = 128
    ) {
        self.requestTimeout = requestTimeout
        self.maxConnections = maxConnections
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
    }

    /// `maxConnections`, lowered so that the database, logs and outgoing calls keep descriptors
    /// when every connection slot is taken.
    public var effectiveMaxConnections: Int {
        var limit = rlimit()
        // RLIM_INFINITY is all bits set: `Int(clamping:)` turns it into Int.max.
        #if os(Linux)
        let resource = Int32(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { return maxConnections }
        let room = Int(clamping: limit.rlim_cur) - Self.reservedDescriptors
        return max(1, min(maxConnections, room))
    }

    /// `maxConnectionsPerAddress` (0: none), lowered to half the effective connection slots, so
    /// one address never holds every slot when `maxConnections` is set low.
    public var effectiveMaxConnectionsPerAddress: Int {
        guard maxConnectionsPerAddress > 0 else { return 0 }
        return min(maxConnectionsPerAddress, max(1, effectiveMaxConnections / 2))
    }

    /// Descriptors kept back from connections.
    static let reservedDescriptors = 64
}

/// Open connections per remote address, shared by every connection of one server.
final class ConnectionLedger: Sendable {
    private let counts = Mutex<[String: Int]>([:])
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Counts a new connection from `address`; false (and not counted) when it is over the limit.
    func open(_ address: String) -> Bool {
        counts.withLock { counts in
            let open = counts[address, default: 0]
            guard limit == 0 || open < limit else { return false }
            counts[address] = open + 1
            return true
        }
    }

    func close(_ address: String) {
        counts.withLock { counts in
            let open = counts[address, default: 0] - 1
            counts[address] = open > 0 ? open : nil
        }
    }
}

/// Per connection: refuses one over its address's limit and closes one that does not deliver a
/// whole request within the request timeout. Sits after the HTTP decoder, so "a whole request"
/// is the end part; a connection that never completes a head is caught by the same timer.
final class ConnectionGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let requestTimeout: TimeAmount
    private let ledger: ConnectionLedger
    private var deadline: Scheduled<Void>?
    /// Requests read to their end and responses written to theirs: equal when the connection
    /// waits for its next request, the only time the timer runs.
    private var requestsRead = 0
    private var responsesWritten = 0
    /// Whether the response being written is an event stream (whose end may never come).
    private var streaming = false

    init(requestTimeout: Duration, ledger: ConnectionLedger) {
        self.requestTimeout = .nanoseconds(requestTimeout.nanoseconds)
        self.ledger = ledger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Keyed as the rate limits are: an IPv6 host by its /64, an IPv4-mapped address as IPv4.
        if let address = context.channel.remoteAddress?.ipAddress.map(RateLimiter.key(forAddress:)) {
            guard ledger.open(address) else {
                context.close(promise: nil)
                return
            }
            context.channel.closeFuture.whenComplete { [ledger] _ in ledger.close(address) }
        }
        arm(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) {
            requestsRead += 1
            deadline?.cancel()
            deadline = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            streaming = head.headerFields[.contentType]?.hasPrefix("text/event-stream") == true
        case .end:
            streaming = false
            responsesWritten += 1
            if responsesWritten >= requestsRead { arm(context) }
        case .body: break
        }
        context.write(data, promise: promise)
    }

    /// A client that closes its side while its event stream is being written has gone:
    /// nobody reads what follows, so the connection and its slot are given back now rather than
    /// at the next keep-alive write that fails. A client that half-closes after a whole request
    /// and waits for an ordinary answer still gets it.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if streaming, let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func arm(_ context: ChannelHandlerContext) {
        deadline?.cancel()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: requestTimeout) {
            channel.close(promise: nil)
        }
    }
}
