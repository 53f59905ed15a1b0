import Crypto
import Foundation
import GatehouseKernel
import GatehouseOutbound
import GatehouseProtocol
import Logging
import Synchronization
import Tracing

/// Sends the portal's callbacks from the store's outbox: a signed POST when a transaction ends
/// (approved, denied, expired), tried again with doubling delays. The outbox is in the database,
/// so callbacks due when the server stopped are sent after it starts again.
///
/// The signature: `Gatehouse-Signature: t=<unix time>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`
/// with the API client's secret, so the portal can check the sender and refuse old replays.
final class CallbackDispatcher: Sendable {
    private let store: ServerStore
    private let clients: [String: MobileAuthConfiguration.APIClient]
    private let maxAttempts: Int
    private let clock: any WallClock
    private let logger: Logger
    private let signal: AsyncStream<Void>.Continuation
    private let signals: AsyncStream<Void>
    private let loop = Mutex<Task<Void, Never>?>(nil)
    /// Callbacks claimed and not yet tried to the end.
    private let inFlight = Mutex(0)
    /// Callbacks sent at once at most; more wait, claimed by nobody, for the next look.
    static let maxInFlight = 256
    /// The trace of the request that ended each transaction, while its callback is to be made.
    private let causes = CallbackCauses()

    init(store: ServerStore, configuration: MobileAuthConfiguration, clock: any WallClock, logger: Logger) {
        self.store = store
        clients = Dictionary(configuration.apiClients.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        maxAttempts = configuration.callbackAttempts
        self.clock = clock
        self.logger = logger
        (signals, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    deinit {
        signal.finish()
        loop.withLock { $0?.cancel() }
    }

    /// Something may be due: look now. Starts the sending loop the first time. In a traced
    /// request that ended the transaction `endedBy`, its callback's span continues that trace.
    func wake(endedBy transactionID: String? = nil) {
        if let transactionID, let context = ServiceContext.current { causes.remember(context, for: transactionID) }
        loop.withLock { task in
            if task == nil {
                // Each look claims what is due and starts sending it, without waiting for the
                // sends of earlier looks: a slow portal delays only its own callbacks.
                task = Task { [weak self, signals] in
                    await withDiscardingTaskGroup { group in
                        for await _ in signals {
                            guard let due = await self?.claimDue() else { return }
                            for callback in due { group.addTask { [weak self] in await self?.send(callback) } }
                            await self?.scheduleNextLook(claimed: due.count)
                        }
                    }
                }
                // Look once at start-up too: a restarted server may have callbacks due.
                signal.yield()
            }
        }
        signal.yield()
    }

    /// Claims what is due, while fewer than ``maxInFlight`` are being sent.
    private func claimDue() async -> [ServerStore.DueCallback] {
        guard inFlight.withLock({ $0 }) < Self.maxInFlight else { return [] }
        do {
            let due = try await store.dueCallbacks(now: clock.now.timeIntervalSince1970, maxAttempts: maxAttempts)
            inFlight.withLock { $0 += due.count }
            return due
        } catch {
            logger.error("Callback outbox failed", metadata: ["error": "\(String(reflecting: error))"])
            return []
        }
    }

    /// After a claim of `claimed` callbacks: looks again at once when the claim may have left
    /// some due, else when the next is due or a pending transaction lapses.
    private func scheduleNextLook(claimed: Int) async {
        if claimed == ServerStore.callbacksClaimedAtOnce {
            signal.yield()
            return
        }
        do {
            if let next = try await store.nextCallbackWork() { look(at: next) }
        } catch {
            logger.error("Callback outbox failed", metadata: ["error": "\(String(reflecting: error))"])
        }
    }

    /// Looks again at `time` (seconds since 1970), 50 ms from now at the soonest, 30 s at the latest.
    private func look(at time: Double) {
        let delay = max(0.05, min(30, time - clock.now.timeIntervalSince1970))
        Task { [weak self] in
            try? await Task.sleep(for: .seconds(delay))
            self?.signal.yield()
        }
    }

    /// Sends `callback` in a `mobile_auth.callback` span, the child of the request that ended its
    /// transaction when this instance served it (else the start of a trace of its own).
    private func send(_ callback: ServerStore.DueCallback) async {
        let cause = causes.cause(of: callback.transactionID)
        let finished = await ServerTracing.span("mobile_auth.callback", continuing: cause) { span in
            span?.attributes["gatehouse.mobile_auth.callback.attempt"] = callback.attempts
            span?.attributes["gatehouse.mobile_auth.status"] = callback.status.rawValue
            return await sendTraced(callback)
        }
        if finished { causes.forget(callback.transactionID) }
        let wasFull = inFlight.withLock { count in
            count -= 1
            return count == Self.maxInFlight - 1
        }
        if wasFull { signal.yield() }
    }

    /// Sends `callback` and records how it went; true when it will not be tried again.
    private func sendTraced(_ callback: ServerStore.DueCallback) async -> Bool {
        // The stored URI is checked again before anything is sent: a row written by an older
        // version, or by hand, that no longer passes is failed, never handed to the HTTP client.
        guard let client = clients[callback.apiClient], let url = try? client.callbackTarget(callback.uri),
            let body = try? WireCoding.encode(
                PortalCallback(
                    transactionID: callback.transactionID,
                    status: callback.status,
                    callbackURI: url.text
                )
            )
        else {
            logger.warning(
                "Callback failed: its API client or URI is no longer allowed",
                metadata: ["transaction": "\(callback.transactionID)"]
            )
            try? await store.callbackTried(callback.transactionID, delivered: false, retryAt: nil)
            return true
        }
        let time = Int(clock.now.timeIntervalSince1970)
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data("\(time).".utf8) + body,
            using: SymmetricKey(data: Data(client.secret.utf8))
        )
        // No redirects are followed: a callback goes where the prefixes allowed, nowhere else.
        let signature = "t=\(time),v1=\(mac.map { String(format: "%02x", $0) }.joined())"
        let answer = try? await OutboundHTTP.post(
            url,
            headers: [("Content-Type", "application/json"), ("Gatehouse-Signature", signature)],
            body: body,
            timeout: .seconds(5),
            maxResponseBytes: 4096
        )
        let delivered = answer.map { (200..<300).contains($0.status) } ?? false
        // The claim counted this try already.
        let attempt = callback.attempts
        let retryAt =
            attempt < maxAttempts ? clock.now.timeIntervalSince1970 + pow(2, Double(max(0, attempt - 1))) : nil
        if !delivered {
            logger.info(
                "Callback not delivered",
                metadata: ["transaction": "\(callback.transactionID)", "attempt": "\(attempt)"]
            )
        }
        try? await store.callbackTried(callback.transactionID, delivered: delivered, retryAt: delivered ? nil : retryAt)
        if !delivered, let retryAt { look(at: retryAt) }
        return delivered || retryAt == nil
    }
}

/// The trace contexts of the requests that ended transactions whose callbacks are not made yet,
/// by transaction id (a transaction without a callback leaves one too, until it is pushed out).
/// At most ``limit``: past it the older half is forgotten (those callbacks then start traces of
/// their own). Kept in memory: a callback another instance, or a restarted one, sends has no parent.
final class CallbackCauses: Sendable {
    /// The contexts, and the ids in the order they came (some perhaps forgotten already).
    private let state = Mutex<(contexts: [String: ServiceContext], order: [String])>(([:], []))
    static let limit = 1024

    func remember(_ context: ServiceContext, for transactionID: String) {
        state.withLock { state in
            if state.contexts.updateValue(context, forKey: transactionID) == nil { state.order.append(transactionID) }
            guard state.order.count > Self.limit else { return }
            for id in state.order.prefix(Self.limit / 2) { state.contexts[id] = nil }
            state.order.removeFirst(Self.limit / 2)
        }
    }

    func cause(of transactionID: String) -> ServiceContext? { state.withLock { $0.contexts[transactionID] } }

    func forget(_ transactionID: String) { _ = state.withLock { $0.contexts.removeValue(forKey: transactionID) } }
}
