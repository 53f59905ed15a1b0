import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import Histogram
import NIOCore
import NIOHTTP1
import NIOPosix

// The push round trip below the SDK, on the load generator's one event-loop thread: the portal
// starts a transaction (HTTP Basic, number matching, a callback URI) → the device hears of it on
// its events channel, the payload sealed for it riding along → the device opens the payload,
// "types" the portal's number and posts the answer, sealed for the server and DPoP-signed → the
// server approves and its outbox posts the signed callback → the portal's callback endpoint, a
// server of the generator's own on the same thread, checks the signature. A transaction is done
// when both the answer's acknowledgement and the approved callback have arrived.
//
// The portal's request is the same bytes every time (prepared once). The answer depends on the
// payload's nonce and names the transaction in its URL, so it is sealed and its proof signed when
// the event arrives: that work is the device's, and counts in the generator's share.

/// A wire device enrolled for mobile authentication, its pushes on the events channel.
struct PushDevice: Sendable {
    var wire: WireDevice
    /// The device's HPKE key for this profile: the payloads are sealed for it.
    var agreementKey: Curve25519.KeyAgreement.PrivateKey
    /// The server's HPKE key for this enrolment: the answers are sealed for it.
    var serverKey: Curve25519.KeyAgreement.PublicKey
}

extension SetupCalls {
    /// Enrols `device`'s profile for mobile authentication, its pushes on the events channel.
    func enrolForPush(_ device: WireDevice, pushToken: String) async throws -> PushDevice {
        let key = Curve25519.KeyAgreement.PrivateKey()
        let enrolment: MobileAuthEnrolmentResponse = try await call(
            "POST",
            Endpoint.mobileAuthEnrolment,
            body: MobileAuthEnrolmentRequest(publicKey: key.publicKey.rawRepresentation),
            key: device.profileKey,
            accessToken: device.accessToken
        )
        guard let serverKey = Curve25519.KeyAgreement.PublicKey(wire: enrolment.serverPublicKey) else {
            throw BenchmarkError("the server's mobile-auth key is malformed")
        }
        let _: MobileAuthEnrolmentStatus = try await call(
            "POST",
            Endpoint.pushEnrolment,
            body: PushEnrolmentRequest(pushToken: pushToken, platform: .events),
            key: device.profileKey,
            accessToken: device.accessToken
        )
        return PushDevice(wire: device, agreementKey: key, serverKey: serverKey)
    }
}

/// The transactions in flight, by id, so the callback endpoint finds whose it is.
/// Used on the generator's event loop only.
final class PushTransactions: @unchecked Sendable {
    var waiting: [String: PushClient] = [:]
}

/// One device and the portal user it stands for: a portal connection, an answers connection and
/// the events channel. Used on the generator's event loop only.
final class PushClient: @unchecked Sendable {
    let device: PushDevice
    let baseURL: String
    let transactions: PushTransactions
    let start: PreparedRequest
    /// The portal's and the answers' connections: new for each run (an idle keep-alive connection
    /// is closed by the server after its request timeout).
    private(set) var portal = RequestConnection()
    private(set) var answers = RequestConnection()
    let events = EventStreamConnection()
    private let encoder = JSONEncoder()
    private let decoder = JSONDecoder()

    // The current run.
    private var deadline: UInt64 = 0
    private var done: EventLoopPromise<ConnectionFigures>?
    private var figures = ConnectionFigures()
    // The current transaction.
    private var began: UInt64 = 0
    private var transactionID: String?
    private var number: Int?
    /// An event that arrived before the portal heard its transaction's id.
    private var early: MobileAuthEvent?
    private var acknowledged = false
    private var calledBack = false
    /// When this transaction's stages ended (``PushStage``), in uptime nanoseconds.
    private var stageEnds = [UInt64](repeating: 0, count: PushStage.allCases.count)

    init(device: PushDevice, baseURL: String, callbackURI: String, transactions: PushTransactions) throws {
        self.device = device
        self.baseURL = baseURL
        self.transactions = transactions
        let credentials = Data("portal:example-portal-secret-change-me".utf8).base64EncodedString()
        start = PreparedRequest(
            .POST,
            Endpoint.portalMobileAuth,
            headers: [
                ("Content-Type", "application/json"), ("Accept", "application/json"),
                ("Authorization", "Basic \(credentials)"),
            ],
            body: ByteBuffer(
                bytes: try WireCoding.encode(
                    PortalMobileAuthRequest(userID: device.wire.subject, type: "login", callbackURI: callbackURI)
                )
            )
        )
        events.onEvent = { [weak self] in self?.eventArrived($0) }
        events.onClose = { [weak self] in self?.fail("the server closed the events channel") }
    }

    /// New portal and answers connections' handlers, for the next run.
    func renewConnections() -> (portal: RequestConnection, answers: RequestConnection) {
        portal = RequestConnection()
        answers = RequestConnection()
        portal.onAnswer = { [weak self] in self?.portalAnswered($0) }
        answers.onAnswer = { [weak self] in self?.answerAcknowledged($0) }
        for connection in [portal, answers] {
            connection.onClose = { [weak self] in self?.fail("the server closed a connection") }
        }
        return (portal, answers)
    }

    /// The events channel's request: opened once, before the first run, kept for all of them.
    var eventsRequest: PreparedRequest {
        get throws {
            let path = Endpoint.mobileAuthEvents + "?profile=" + device.wire.profileID
            return PreparedRequest(
                .GET,
                path,
                headers: [
                    ("Accept", "text/event-stream"),
                    (
                        "DPoP",
                        try DPoP.proof(method: "GET", url: baseURL + path, key: device.wire.profileKey, now: Date())
                    ),
                ]
            )
        }
    }

    /// Runs transactions back to back until `deadline`; `done` gets what they measured.
    func run(until deadline: UInt64, done: EventLoopPromise<ConnectionFigures>) {
        self.deadline = deadline
        self.done = done
        figures = ConnectionFigures()
        figures.stageNanoseconds = [UInt64](repeating: 0, count: PushStage.allCases.count)
        begin(now: WorkloadDriver.now())
    }

    private func begin(now: UInt64) {
        began = now
        transactionID = nil
        number = nil
        early = nil
        acknowledged = false
        calledBack = false
        portal.send(start)
    }

    private func portalAnswered(_ answer: Answer) {
        guard answer.status == 201,
            let started = try? decoder.decode(PortalMobileAuthResponse.self, from: Data(answer.body.readableBytesView)),
            let number = started.number
        else { return fail("the portal's start: HTTP \(answer.status) \(answer.text.prefix(300))") }
        stageEnds[PushStage.started.rawValue] = WorkloadDriver.now()
        transactionID = started.transactionID
        self.number = number
        transactions.waiting[started.transactionID] = self
        if let early {
            self.early = nil
            eventArrived(early)
        }
    }

    private func eventArrived(_ event: MobileAuthEvent) {
        guard done != nil else { return }
        if stageEnds[PushStage.notified.rawValue] < began {
            stageEnds[PushStage.notified.rawValue] = WorkloadDriver.now()
        }
        guard let transactionID else {
            early = event
            return
        }
        guard event.request.transactionID == transactionID else {
            return fail("an event for another transaction (\(event.request.transactionID))")
        }
        guard let sealed = event.sealed,
            let plaintext = try? sealed.open(
                with: device.agreementKey,
                purpose: .payload,
                transactionID: transactionID
            ),
            let payload = try? decoder.decode(MobileAuthPayload.self, from: plaintext),
            payload.transactionID == transactionID, payload.profileID == device.wire.profileID
        else { return fail("the event's payload could not be opened") }
        let path = Endpoint.mobileAuthAnswer(transactionID, profile: device.wire.profileID)
        guard
            let answer = try? encoder.encode(
                MobileAuthAnswer(
                    transactionID: transactionID,
                    nonce: payload.nonce.data,
                    decision: .accept,
                    number: number
                )
            ),
            let sealedAnswer = try? SealedBox.seal(
                answer,
                for: device.serverKey,
                purpose: .answer,
                transactionID: transactionID
            ),
            let body = try? encoder.encode(MobileAuthAnswerRequest(sealed: sealedAnswer)),
            let proof = try? DPoP.proof(method: "POST", url: baseURL + path, key: device.wire.profileKey, now: Date())
        else { return fail("the answer could not be sealed or signed") }
        answers.send(
            PreparedRequest(
                .POST,
                path,
                headers: [("Content-Type", "application/json"), ("Accept", "application/json"), ("DPoP", proof)],
                body: ByteBuffer(bytes: body)
            )
        )
    }

    private func answerAcknowledged(_ answer: Answer) {
        guard answer.status == 200,
            let response = try? decoder.decode(
                MobileAuthAnswerResponse.self,
                from: Data(answer.body.readableBytesView)
            ),
            response.status == .approved, response.flow == nil
        else { return fail("the answer: HTTP \(answer.status) \(answer.text.prefix(300))") }
        stageEnds[PushStage.acknowledged.rawValue] = WorkloadDriver.now()
        acknowledged = true
        finishIfDone()
    }

    /// The portal's callback for this client's transaction arrived (its signature checked).
    func calledBack(_ callback: PortalCallback) {
        guard callback.status == .approved else { return fail("the callback says \(callback.status.rawValue)") }
        stageEnds[PushStage.calledBack.rawValue] = WorkloadDriver.now()
        calledBack = true
        finishIfDone()
    }

    private func finishIfDone() {
        guard acknowledged, calledBack, let transactionID else { return }
        transactions.waiting[transactionID] = nil
        let now = WorkloadDriver.now()
        figures.operations += 1
        _ = figures.latencies.record((now - began) / 1000)
        for stage in PushStage.allCases {
            figures.stageNanoseconds[stage.rawValue] += stageEnds[stage.rawValue] - began
        }
        guard now < deadline else { return finish() }
        begin(now: now)
    }

    /// A wrong or missing answer: counted, and this client stops (what is still on the way for
    /// its transaction must not be taken for the next one's).
    func fail(_ reason: String) {
        guard done != nil else { return }
        figures.errors += 1
        if figures.firstError == nil { figures.firstError = reason }
        finish()
    }

    private func finish() {
        if let transactionID { transactions.waiting[transactionID] = nil }
        let promise = done
        done = nil
        promise?.succeed(figures)
    }
}

/// The stages of a push round trip, in the order they usually end.
enum PushStage: Int, CaseIterable {
    /// The portal has the transaction's id and number.
    case started
    /// The device's events channel brought the request.
    case notified
    /// The server acknowledged the device's answer.
    case acknowledged
    /// The portal's callback endpoint has the signed callback.
    case calledBack

    var name: String {
        switch self {
        case .started: "started"
        case .notified: "event"
        case .acknowledged: "answer acknowledged"
        case .calledBack: "callback"
        }
    }

    /// Each stage's mean end, in milliseconds after the portal's start.
    static func summary(_ connections: [ConnectionFigures]) -> String {
        let operations = connections.reduce(0) { $0 + $1.operations }
        guard operations > 0 else { return "" }
        return allCases.map { stage in
            let total = connections.reduce(0) { $0 + ($1.stageNanoseconds.dropFirst(stage.rawValue).first ?? 0) }
            return String(format: "%@ %.2f", stage.name, Double(total) / 1e6 / Double(operations))
        }.joined(separator: ", ")
    }
}

// MARK: - Connections

/// A keep-alive HTTP/1.1 connection that sends prepared requests and hands each whole response
/// to `onAnswer`. Used on its channel's event loop only.
final class RequestConnection: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart

    var onAnswer: (Answer) -> Void = { _ in }
    var onClose: () -> Void = {}
    private var context: ChannelHandlerContext?
    private var response = ResponseAssembler()

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func send(_ request: PreparedRequest) {
        guard let context else { return onClose() }
        request.write(to: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let answer = response.read(unwrapInboundIn(data)) { onAnswer(answer) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.context = nil
        onClose()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
}

/// The device's events channel: one GET whose response never ends, read as server-sent events
/// (`id:`, `event:`, `data:` lines, a blank line after each; `: keep-alive` comments between).
/// Used on its channel's event loop only.
final class EventStreamConnection: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart

    var onEvent: (MobileAuthEvent) -> Void = { _ in }
    var onClose: () -> Void = {}
    /// Succeeds when the server answered 200, fails with what it answered instead.
    var opened: EventLoopPromise<Void>?
    private var context: ChannelHandlerContext?
    private var pending = ByteBuffer()
    private var refusal: ByteBuffer?
    private let decoder = JSONDecoder()

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func open(_ request: PreparedRequest, opened: EventLoopPromise<Void>) {
        guard let context else { return opened.fail(BenchmarkError("the events channel is not connected")) }
        self.opened = opened
        request.write(to: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if head.status == .ok {
                opened?.succeed()
                opened = nil
            } else {
                refusal = ByteBuffer(string: "HTTP \(head.status.code) ")
            }
        case .body(var part):
            if refusal != nil {
                refusal?.writeBuffer(&part)
                return
            }
            pending.writeBuffer(&part)
            readEvents()
        case .end:
            opened?.fail(BenchmarkError("the events channel was refused: \(refusal.map(String.init(buffer:)) ?? "")"))
            opened = nil
            onClose()
        }
    }

    /// Hands on every whole `mobile-auth` event in what has arrived; keeps a partial one.
    private func readEvents() {
        while let end = pending.readableBytesView.firstRange(of: [UInt8(ascii: "\n"), UInt8(ascii: "\n")]) {
            let length = end.upperBound - pending.readerIndex
            guard let block = pending.readString(length: length) else { return }
            var name = "message"
            var data = ""
            for line in block.split(separator: "\n") {
                if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
            }
            if name == "mobile-auth", let event = try? decoder.decode(MobileAuthEvent.self, from: Data(data.utf8)) {
                onEvent(event)
            }
        }
        pending.discardReadBytes()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.context = nil
        opened?.fail(BenchmarkError("the server closed the events channel"))
        opened = nil
        onClose()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
}

/// The portal's callback endpoint: an HTTP/1.1 server on the generator's event loop that checks
/// each callback's `Gatehouse-Signature` (HMAC-SHA256 with the portal's secret over "<t>.<body>")
/// and hands it to the client whose transaction it ends.
final class CallbackEndpoint: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let transactions: PushTransactions
    private let secret: SymmetricKey
    private var signature: String?
    private var body = ByteBuffer()
    private let decoder = JSONDecoder()

    init(transactions: PushTransactions, secret: String) {
        self.transactions = transactions
        self.secret = SymmetricKey(data: Data(secret.utf8))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            signature = head.headers.first(name: "Gatehouse-Signature")
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            let bytes = Data(body.readableBytesView)
            let callback = try? decoder.decode(PortalCallback.self, from: bytes)
            if let callback, let client = transactions.waiting[callback.transactionID] {
                if verified(bytes) {
                    client.calledBack(callback)
                } else {
                    client.fail("a callback's signature did not verify")
                }
            }
            let head = HTTPResponseHead(
                version: .http1_1,
                status: .noContent,
                headers: ["Content-Length": "0"]
            )
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    /// Whether the signature is the portal secret's MAC over "<t>.<body>".
    private func verified(_ bytes: Data) -> Bool {
        guard let signature else { return false }
        var time: Substring?
        var mac: Substring?
        for part in signature.split(separator: ",") {
            if part.hasPrefix("t=") { time = part.dropFirst(2) }
            if part.hasPrefix("v1=") { mac = part.dropFirst(3) }
        }
        guard let time, let mac else { return false }
        let expected = HMAC<SHA256>.authenticationCode(for: Data("\(time).".utf8) + bytes, using: secret)
        let hex = expected.map { String(format: "%02x", $0) }.joined()
        return constantTimeEquals(Data(hex.utf8), Data(mac.utf8))
    }
}

// MARK: - Running it

/// Push round trips ready to run: the callback endpoint listening, every client's events channel
/// open (the portal's and the answers' connections are made for each run). The generator's group
/// has one thread, so every connection's handlers run on it.
struct PushRoundTrips: Sendable {
    private let clients: [PushClient]
    private let channels: [any Channel]
    private let group: MultiThreadedEventLoopGroup
    private let ports: [Int]

    /// Starts the portal's callback endpoint and opens every device's events channel.
    init(devices: [PushDevice], baseURL: String, ports: [Int], group: MultiThreadedEventLoopGroup) async throws {
        self.group = group
        self.ports = ports
        let transactions = PushTransactions()
        let callbacks = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMapThrowing {
                    try channel.pipeline.syncOperations.addHandler(
                        CallbackEndpoint(transactions: transactions, secret: "example-portal-secret-change-me")
                    )
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        var channels: [any Channel] = [callbacks]
        guard let callbackPort = callbacks.localAddress?.port else { throw BenchmarkError("no callback port") }
        let callbackURI = "http://127.0.0.1:\(callbackPort)/callback"
        var clients: [PushClient] = []
        for (index, device) in devices.enumerated() {
            let client = try PushClient(
                device: device,
                baseURL: baseURL,
                callbackURI: callbackURI,
                transactions: transactions
            )
            // On several instances the events channel is held by the next one: each event crosses
            // instances (the database's announcement wakes the channel).
            let events = try await connectHTTPClient(
                group: group,
                port: ports[(index + 1) % ports.count],
                handler: client.events
            )
            channels.append(events)
            let request = try client.eventsRequest
            let opened = events.eventLoop.makePromise(of: Void.self)
            events.eventLoop.execute { client.events.open(request, opened: opened) }
            try await opened.futureResult.get()
            clients.append(client)
        }
        self.clients = clients
        self.channels = channels
    }

    /// Runs the first `level` clients' transactions back to back for `seconds`.
    func run(level: Int, seconds: Double) async throws -> [ConnectionFigures] {
        let running = clients.prefix(level)
        var connections: [any Channel] = []
        defer { for channel in connections { channel.close(promise: nil) } }
        for (index, client) in running.enumerated() {
            let port = ports[index % ports.count]
            let (portal, answers) = try await group.next().submit { client.renewConnections() }.get()
            connections.append(try await connectHTTPClient(group: group, port: port, handler: portal))
            connections.append(try await connectHTTPClient(group: group, port: port, handler: answers))
        }
        let loop = group.next()
        let deadline = WorkloadDriver.now() + UInt64(seconds * 1e9)
        let results = try await loop.submit {
            running.map { client in
                let promise = loop.makePromise(of: ConnectionFigures.self)
                client.run(until: deadline, done: promise)
                return promise.futureResult
            }
        }.get()
        // A transaction still open 20 s after the deadline lost its event or its callback.
        let watchdog = loop.scheduleTask(in: .seconds(Int64(seconds) + 20)) {
            for client in running { client.fail("no callback or answer within 20 s of the deadline") }
        }
        defer { watchdog.cancel() }
        var figures: [ConnectionFigures] = []
        for result in results { figures.append(try await result.get()) }
        return figures
    }

    func close() async {
        for channel in channels { try? await channel.close().get() }
    }
}
