import Crypto
import Foundation
import GatehouseKernel
import GatehouseOutbound
import GatehouseProtocol
import Logging
import Synchronization

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

    /// Something may be due: look now. Starts the sending loop the first time.
    func wake() {
        loop.withLock { task in
            if task == nil {
                task = Task { [weak self, signals] in
                    for await _ in signals {
                        guard let self else { return }
                        await self.sendDue()
                    }
                }
                // Look once at start-up too: a restarted server may have callbacks due.
                signal.yield()
            }
        }
        signal.yield()
    }

    /// Sends what is due, then schedules the next look.
    private func sendDue() async {
        do {
            let due = try await store.dueCallbacks(now: clock.now.timeIntervalSince1970, maxAttempts: maxAttempts)
            await withTaskGroup(of: Void.self) { group in
                for callback in due { group.addTask { await self.send(callback) } }
            }
            if let next = try await store.nextCallbackWork() {
                let delay = max(0.05, min(30, next - clock.now.timeIntervalSince1970))
                Task { [weak self] in
                    try? await Task.sleep(for: .seconds(delay))
                    self?.signal.yield()
                }
            }
        } catch {
            logger.error("Callback outbox failed", metadata: ["error": "\(String(reflecting: error))"])
        }
    }

    private func send(_ callback: ServerStore.DueCallback) async {
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
            return
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
    }
}
