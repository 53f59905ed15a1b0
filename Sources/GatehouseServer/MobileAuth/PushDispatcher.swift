import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging
import Synchronization

/// Sends pushes through the transports the server was given, each in a task of its own: the
/// request that started the transaction waits for the first try only, and at most a moment;
/// a temporary refusal is tried again in the background (``PushRetryPolicy``), never after the
/// transaction expires or stops wanting the push; a push service that calls the device token
/// dead disenrols the device. ``shutdown()`` cancels whatever is still running.
final class PushDispatcher: Sendable {
    /// One push to one device.
    struct Push: Sendable {
        var notification: PushNotification
        var token: String
        var platform: PushPlatform

        /// When the transaction expires, in seconds since 1970.
        var expiresAt: Double { notification.createdAt + Double(notification.timeToLive) }
    }

    private struct State {
        var running: [UUID: Task<Void, Never>] = [:]
        var stopped = false
    }

    private let transports: [PushPlatform: any PushTransport]
    private let store: ServerStore
    private let clock: any WallClock
    private let logger: Logger
    private let audit: Logger
    private let policy: PushRetryPolicy
    /// Told after a disenrolment ended transactions (their callbacks are due).
    private let disenrolled: @Sendable () -> Void
    private let state = Mutex(State())

    init(
        transports: [PushPlatform: any PushTransport],
        store: ServerStore,
        clock: any WallClock,
        logger: Logger,
        audit: Logger,
        policy: PushRetryPolicy,
        disenrolled: @escaping @Sendable () -> Void
    ) {
        self.transports = transports
        self.store = store
        self.clock = clock
        self.logger = logger
        self.audit = audit
        self.policy = policy
        self.disenrolled = disenrolled
    }

    /// Pushes still being tried (a first try, or a wait before the next).
    var runningCount: Int { state.withLock { $0.running.count } }

    /// Starts sending `push` and returns once its first try has ended or `wait` has passed,
    /// whichever comes first; the tries go on in the background either way. Nothing happens for
    /// a platform without a transport, or after ``shutdown()``.
    func send(_ push: Push, waitingAtMost wait: Duration) async {
        guard let transport = transports[push.platform] else { return }
        let (firstTry, ended) = AsyncStream<Void>.makeStream()
        let id = UUID()
        let started = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.running[id] = Task {
                await self.run(push, through: transport) { ended.finish() }
                ended.finish()
                self.state.withLock { _ = $0.running.removeValue(forKey: id) }
            }
            return true
        }
        guard started else { return }
        await withTaskGroup(of: Void.self) { race in
            race.addTask { for await _ in firstTry {} }
            race.addTask { try? await Task.sleep(for: wait) }
            await race.next()
            race.cancelAll()
        }
    }

    /// Cancels every push still being tried and waits until each has stopped.
    func shutdown() async {
        let running = state.withLock { state in
            state.stopped = true
            defer { state.running = [:] }
            return Array(state.running.values)
        }
        for task in running { task.cancel() }
        for task in running { await task.value }
    }

    private func run(_ push: Push, through transport: any PushTransport, firstTryEnded: () -> Void) async {
        var attempt = 1
        while !Task.isCancelled {
            let failure: PushDeliveryError
            do {
                try await transport.deliver(push.notification, token: push.token, platform: push.platform)
                if attempt > 1 { logger.info("Push delivered", metadata: metadata(push, attempt)) }
                return
            } catch let error as PushDeliveryError {
                failure = error
            } catch {
                // Not the service's answer: it could not be reached, or the host's transport failed.
                failure = PushDeliveryError(.temporary, reason: String(describing: error))
            }
            firstTryEnded()
            if Task.isCancelled { return }
            var details = metadata(push, attempt)
            details["error"] = "\(failure)"
            switch failure.code {
            case .unregistered:
                await disenrol(push, failure)
                return
            case .temporary:
                break
            default:
                logger.warning("Push refused", metadata: details)
                return
            }
            guard attempt < policy.attempts else {
                logger.warning("Push failed; no tries left", metadata: details)
                return
            }
            let delay = policy.delay(after: attempt, retryAfter: failure.retryAfter)
            guard clock.now.timeIntervalSince1970 + delay.inSeconds < push.expiresAt else {
                logger.warning("Push failed; the transaction expires before another try", metadata: details)
                return
            }
            details["retry_in_ms"] = "\(Int(delay.milliseconds))"
            logger.notice("Push failed; trying again", metadata: details)
            do {
                try await Task.sleep(for: delay)
            } catch {
                return
            }
            let now = clock.now.timeIntervalSince1970
            let wanted = try? await store.pushStillWanted(
                push.notification.transactionID,
                profileID: push.notification.profileID,
                pushToken: push.token,
                now: now
            )
            // Answered, ended, expired, or the device moved on: nothing left to announce.
            guard wanted == true else { return }
            attempt += 1
        }
    }

    private func disenrol(_ push: Push, _ failure: PushDeliveryError) async {
        do {
            guard
                try await store.disenrolDeadPushToken(
                    push.notification.profileID,
                    pushToken: push.token,
                    platform: push.platform,
                    answer: failure.reason,
                    now: clock.now.timeIntervalSince1970
                )
            else { return }
            audit.notice(
                "Device disenrolled: its push service calls its push token dead",
                metadata: [
                    "event": "\(AuditEvent.deviceDisenrolled.rawValue)", "profile": "\(push.notification.profileID)",
                    "actor": "\(AdminActor.server)", "platform": "\(push.platform.rawValue)",
                    "reason": "\(failure.reason)",
                ]
            )
            disenrolled()
        } catch {
            logger.error(
                "Disenrolling a device whose push token is dead failed",
                metadata: ["platform": "\(push.platform.rawValue)", "error": "\(String(reflecting: error))"]
            )
        }
    }

    private func metadata(_ push: Push, _ attempt: Int) -> Logger.Metadata {
        [
            "platform": "\(push.platform.rawValue)", "transaction": "\(push.notification.transactionID)",
            "attempt": "\(attempt)",
        ]
    }
}

/// How often, and after how long, a push is tried again after a temporary refusal: at most
/// `attempts` tries in all; before try n + 1 the service's `Retry-After` when it gave one, else
/// `firstDelay` doubled n − 1 times, at most `longestDelay`, times a random factor from ½ to 1
/// (so devices refused at once do not come back at once).
struct PushRetryPolicy: Sendable {
    var attempts: Int
    var firstDelay: Duration = .seconds(1)
    var longestDelay: Duration = .seconds(30)

    /// The wait after try `attempt` failed; `random` in 0..<1 draws the jitter.
    func delay(after attempt: Int, retryAfter: Duration?, random: Double = Double.random(in: 0..<1)) -> Duration {
        if let retryAfter { return max(retryAfter, .zero) }
        let doubled = firstDelay.inSeconds * pow(2, Double(min(max(attempt - 1, 0), 16)))
        let ceiling = min(doubled, longestDelay.inSeconds)
        return .milliseconds(Int64((ceiling * (0.5 + random / 2) * 1000).rounded()))
    }
}

extension Duration {
    /// The duration in seconds, fractions included.
    fileprivate var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
