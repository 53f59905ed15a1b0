public import Foundation
public import GatehouseProtocol
import Synchronization

/// Delivers a push about a mobile authentication to one device. The token server calls the
/// transport configured for the device's platform; the events channel it serves itself.
public protocol PushTransport: Sendable {
    /// Sends `notification` to the device with push token `token` on `platform`; throws when the
    /// push service refused it or could not be reached — a ``PushDeliveryError`` says what the
    /// server should do about it: disenrol the device (`unregistered`), try again later
    /// (`temporary`, also any other error) or give up (`rejected`). The portal's request waits
    /// for the first try two seconds at most; further tries go on in the background. The
    /// transaction stays pending either way, and the device still finds it on its events channel
    /// or in its pending list.
    func deliver(_ notification: PushNotification, token: String, platform: PushPlatform) async throws
}

/// Pushes within one process: what an embedded server and its app (or a test) use. Each
/// listener of a device token gets the pushes sent to it from then on; ``delivered(to:)`` keeps
/// every push sent, for tests and for an app that starts listening late.
public final class InProcessPushTransport: PushTransport {
    private struct State {
        var history: [String: [PushNotification]] = [:]
        var listeners: [String: [UUID: AsyncStream<PushNotification>.Continuation]] = [:]
    }

    private let state = Mutex(State())

    /// A transport with no listeners and no pushes sent yet.
    public init() {}

    /// The pushes sent to `token` from now on.
    public func notifications(for token: String) -> AsyncStream<PushNotification> {
        let id = UUID()
        let (stream, continuation) = AsyncStream<PushNotification>.makeStream(bufferingPolicy: .bufferingNewest(256))
        state.withLock { $0.listeners[token, default: [:]][id] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.listeners[token]?.removeValue(forKey: id) }
        }
        return stream
    }

    /// Every push sent to `token` so far, oldest first.
    public func delivered(to token: String) -> [PushNotification] {
        state.withLock { $0.history[token] ?? [] }
    }

    /// Records `notification` for `token` (the last 1000 are kept) and hands it to the token's
    /// listeners. Never throws; `platform` is ignored.
    public func deliver(_ notification: PushNotification, token: String, platform: PushPlatform) async throws {
        let listeners = state.withLock { state in
            state.history[token, default: []].append(notification)
            // A record for tests and late listeners, not an archive.
            if state.history[token, default: []].count > 1000 { state.history[token]?.removeFirst() }
            return Array((state.listeners[token] ?? [:]).values)
        }
        for listener in listeners { listener.yield(notification) }
    }
}

/// An HTTP request to a push service, for a host that holds the service's credentials.
/// The transports build it; the host's `send` adds the authorization header and posts it.
public struct PushServiceRequest: Sendable, Equatable {
    /// The URL to `POST` to.
    public var url: String
    /// The headers to send, lowercase names; the host adds `authorization`.
    public var headers: [String: String]
    /// The JSON body.
    public var body: Data
}

/// Encodes pushes for Apple Push Notification service (HTTP/2 API, `POST /3/device/{token}`) and
/// hands each request to `send`, which adds the provider token and sends it.
public struct APNsPushTransport: PushTransport {
    /// The APNs base URL: `https://api.push.apple.com`, or `https://api.sandbox.push.apple.com`
    /// for development builds of the app.
    public var host: String
    /// The `apns-topic`: the app's bundle id.
    public var topic: String
    /// Adds `authorization: bearer <provider JWT>`, posts the request over HTTP/2 and throws when
    /// APNs does not answer 200.
    public var send: @Sendable (PushServiceRequest) async throws -> Void

    /// `host`: `https://api.push.apple.com` or the sandbox; `topic`: the app's bundle id.
    public init(host: String, topic: String, send: @escaping @Sendable (PushServiceRequest) async throws -> Void) {
        self.host = host
        self.topic = topic
        self.send = send
    }

    /// The request for `notification` to the device `token`: `POST <host>/3/device/<token>` with
    /// an alert payload and the headers `apns-push-type: alert`, `apns-priority: 10`, `apns-topic`,
    /// `apns-expiration` (when the transaction expires) and `apns-collapse-id` (the transaction's
    /// id, so a later push about it replaces this one). Throws when the payload cannot be encoded.
    public func request(for notification: PushNotification, token: String) throws -> PushServiceRequest {
        PushServiceRequest(
            url: "\(host)/3/device/\(token)",
            headers: notification.apnsHeaders(topic: topic).merging(["content-type": "application/json"]) { $1 },
            body: try notification.apnsPayload()
        )
    }

    /// Builds the request (``request(for:token:)``) and hands it to ``send``; throws what either
    /// throws. `platform` is ignored.
    public func deliver(_ notification: PushNotification, token: String, platform: PushPlatform) async throws {
        try await send(try request(for: notification, token: token))
    }
}

/// Encodes pushes for Firebase Cloud Messaging (HTTP v1 `messages:send`) and hands each request
/// to `send`, which adds the OAuth access token and sends it.
public struct FCMPushTransport: PushTransport {
    /// The Firebase project's id, part of the `messages:send` URL.
    public var projectID: String
    /// Adds `authorization: Bearer <OAuth 2 access token>` (scope
    /// `https://www.googleapis.com/auth/firebase.messaging`), posts the request and throws when
    /// FCM does not answer 200.
    public var send: @Sendable (PushServiceRequest) async throws -> Void

    /// A transport for the Firebase project `projectID` that hands each request to `send`.
    public init(projectID: String, send: @escaping @Sendable (PushServiceRequest) async throws -> Void) {
        self.projectID = projectID
        self.send = send
    }

    /// The request for `notification` to the device `token`:
    /// `POST https://fcm.googleapis.com/v1/projects/<projectID>/messages:send` with a JSON
    /// `message` naming the token, a tray notification, the custom keys as `data`, a high Android
    /// priority and a TTL and collapse key of the transaction's. Throws when the message cannot
    /// be encoded.
    public func request(for notification: PushNotification, token: String) throws -> PushServiceRequest {
        PushServiceRequest(
            url: "https://fcm.googleapis.com/v1/projects/\(projectID)/messages:send",
            headers: ["content-type": "application/json"],
            body: try notification.fcmMessage(token: token)
        )
    }

    /// Builds the request (``request(for:token:)``) and hands it to ``send``; throws what either
    /// throws. `platform` is ignored: FCM reaches Android and Apple devices alike.
    public func deliver(_ notification: PushNotification, token: String, platform: PushPlatform) async throws {
        try await send(try request(for: notification, token: token))
    }
}

/// Wakes the event channels the devices keep open. A wake-up carries nothing: each channel reads
/// what it has not sent yet from the store, so a channel that reconnects (with `Last-Event-ID`)
/// misses nothing and a wake-up lost in a race costs nothing.
final class EventChannelHub: Sendable {
    private let listeners = Mutex<(byProfile: [String: [String: AsyncStream<Void>.Continuation]], count: Int)>(([:], 0))
    /// Channels open at once, all profiles together: streaming answers are exempt from the
    /// request timeout, so without a cap they could take every connection slot.
    private let maxChannels: Atomic<Int>

    /// Open channels one profile may have: a device needs one, a few for its reconnects.
    static let maxChannelsPerProfile = 4

    /// Why a channel was not opened.
    enum Refusal: Error {
        case profileFull
        case serverFull
    }

    init(maxChannels: Int) {
        self.maxChannels = Atomic(maxChannels)
    }

    /// Lowers the cap (never raises it).
    func limit(to channels: Int) {
        _ = maxChannels.min(channels, ordering: .relaxed)
    }

    /// One open channel: its id (its lease's in `event_channels`) and the wake-ups for it.
    struct Channel: Sendable {
        var id: String
        var profileID: String
        var wakes: AsyncStream<Void>
    }

    /// A channel that yields whenever `profileID` may have something new, within this instance's
    /// caps; the caller then leases its slot for the whole cluster (``ServerStore/leaseEventChannel(_:profileID:slots:now:)``).
    func listen(_ profileID: String) throws(Refusal) -> Channel {
        let id = UUID().uuidString
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let cap = maxChannels.load(ordering: .relaxed)
        let refusal = listeners.withLock { listeners -> Refusal? in
            guard listeners.count < cap else { return .serverFull }
            guard (listeners.byProfile[profileID]?.count ?? 0) < Self.maxChannelsPerProfile else { return .profileFull }
            listeners.byProfile[profileID, default: [:]][id] = continuation
            listeners.count += 1
            return nil
        }
        if let refusal { throw refusal }
        continuation.onTermination = { [weak self] _ in
            self?.listeners.withLock { listeners in
                guard listeners.byProfile[profileID]?.removeValue(forKey: id) != nil else { return }
                listeners.count -= 1
                if listeners.byProfile[profileID]?.isEmpty == true { listeners.byProfile[profileID] = nil }
            }
        }
        continuation.yield()
        return Channel(id: id, profileID: profileID, wakes: stream)
    }

    /// Ends a channel that will not be served (its lease was refused).
    func close(_ channel: Channel) {
        let continuation = listeners.withLock { $0.byProfile[channel.profileID]?[channel.id] }
        continuation?.finish()
    }

    /// The ids of every open channel when their leases are due for renewal (a channel's
    /// keep-alive asks; the first to ask after ``renewalInterval`` renews them all at once), else
    /// nil: one write an interval for the instance, however many channels it holds.
    func leasesDue(now: Double) -> [String]? {
        let due = lastRenewal.withLock { last -> Bool in
            guard now - last >= Self.renewalInterval else { return false }
            last = now
            return true
        }
        guard due else { return nil }
        return listeners.withLock { $0.byProfile.values.flatMap(\.keys) }
    }

    /// After a renewal: the channels among `due` whose lease was not found end (their devices
    /// open new ones, within the cap); `renewed` nil, the renewal failed and is tried again at the
    /// next keep-alive.
    func renewed(_ renewed: Set<String>?, of due: [String]) {
        guard let renewed else {
            lastRenewal.withLock { $0 = 0 }
            return
        }
        let lost = Set(due).subtracting(renewed)
        guard !lost.isEmpty else { return }
        let ending = listeners.withLock { listeners in
            listeners.byProfile.values.flatMap { $0.filter { lost.contains($0.key) }.values }
        }
        for continuation in ending { continuation.finish() }
    }

    /// A lease lasts three of these (``ServerStore/eventChannelLease``).
    static let renewalInterval: Double = 14
    private let lastRenewal = Mutex<Double>(0)

    func wake(_ profileID: String) {
        let waiting = listeners.withLock { Array(($0.byProfile[profileID] ?? [:]).values) }
        for continuation in waiting { continuation.yield() }
    }

    private static let wakePrefix = "event-channel wake "

    /// What a change announces when `profileID` has something new: every instance wakes the
    /// channels it holds for it.
    static func wakeAnnouncement(_ profileID: String) -> String { wakePrefix + profileID }

    /// Wakes on an announcement; after announcements were missed, every channel looks.
    func hear(_ announcement: Announcement) {
        switch announcement {
        case .message(let message):
            guard message.hasPrefix(Self.wakePrefix) else { return }
            wake(String(message.dropFirst(Self.wakePrefix.count)))
        case .resumed:
            let waiting = listeners.withLock { $0.byProfile.values.flatMap(\.values) }
            for continuation in waiting { continuation.yield() }
        case .interrupted:
            break
        }
    }

    var listenerCount: Int { listeners.withLock { $0.count } }
}
