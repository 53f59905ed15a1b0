public import Foundation

/// What a push about a mobile authentication carries: the transaction, the profile, the short
/// message and the expiry — nothing else, since a push travels through third parties.
public struct PushNotification: Codable, Sendable, Hashable {
    /// The transaction's id, the `{id}` the device fetches the sealed payload with.
    public var transactionID: String
    /// The profile on the device the transaction is for.
    public var profileID: String
    /// The short message to show, at most 155 characters; never the secure message.
    public var message: String
    /// Seconds since 1970.
    public var createdAt: Double
    /// Seconds from `createdAt` until the transaction expires.
    public var timeToLive: Int

    /// Creates a push's content.
    public init(transactionID: String, profileID: String, message: String, createdAt: Double, timeToLive: Int) {
        self.transactionID = transactionID
        self.profileID = profileID
        self.message = message
        self.createdAt = createdAt
        self.timeToLive = timeToLive
    }

    /// The custom keys, every value a string (FCM data messages allow strings only).
    public static let transactionKey = "gh_transaction_id"
    /// The custom key of ``profileID``.
    public static let profileKey = "gh_profile_id"
    /// The custom key of ``message``.
    public static let messageKey = "gh_message"
    /// The custom key of ``createdAt``.
    public static let createdKey = "gh_created_at"
    /// The custom key of ``timeToLive``.
    public static let timeToLiveKey = "gh_time_to_live"

    /// The custom keys as a flat dictionary of strings.
    public var userInfo: [String: String] {
        [
            Self.transactionKey: transactionID,
            Self.profileKey: profileID,
            Self.messageKey: message,
            Self.createdKey: String(createdAt),
            Self.timeToLiveKey: String(timeToLive),
        ]
    }

    /// Reads the custom keys back; nil when any is missing or malformed (a push not meant for
    /// Gatehouse). Accepts the keys at the top level (APNs) or under `data` / `message.data` (FCM).
    public init?(userInfo: [String: Any]) {
        let fields: [String: Any]
        if userInfo[Self.transactionKey] != nil {
            fields = userInfo
        } else if let data = userInfo["data"] as? [String: Any] {
            fields = data
        } else if let message = userInfo["message"] as? [String: Any], let data = message["data"] as? [String: Any] {
            fields = data
        } else {
            return nil
        }
        guard let transaction = fields[Self.transactionKey] as? String, (16...64).contains(transaction.utf8.count),
            let profile = fields[Self.profileKey] as? String, (1...64).contains(profile.utf8.count),
            let message = fields[Self.messageKey] as? String, message.count <= 155,
            let created = (fields[Self.createdKey] as? String).flatMap(Double.init), created.isFinite,
            let timeToLive = (fields[Self.timeToLiveKey] as? String).flatMap(Int.init), timeToLive > 0
        else { return nil }
        self.init(
            transactionID: transaction,
            profileID: profile,
            message: message,
            createdAt: created,
            timeToLive: timeToLive
        )
    }

    /// The APNs payload (Apple's "Generating a remote notification"): an `aps` dictionary with the
    /// alert the lock screen shows, plus the custom keys at the top level.
    public func apnsPayload() throws -> Data {
        var payload: [String: Any] = userInfo
        payload["aps"] = [
            "alert": ["title": "Approve sign-in?", "body": message],
            "sound": "default",
            "category": "GATEHOUSE_MOBILE_AUTH",
            "mutable-content": 1,
        ]
        return try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])
    }

    /// The HTTP headers APNs expects with ``apnsPayload()``: an alert push that expires with the
    /// transaction and replaces an older push about the same transaction.
    public func apnsHeaders(topic: String) -> [String: String] {
        [
            "apns-push-type": "alert",
            "apns-priority": "10",
            "apns-topic": topic,
            "apns-expiration": String(Int(createdAt) + timeToLive),
            "apns-collapse-id": String(transactionID.prefix(64)),
        ]
    }

    /// The FCM HTTP v1 `messages:send` body: `message.token`, a `notification` for the tray, and
    /// the custom keys as `data` (strings only), with an Android TTL of what is left of the
    /// transaction's life at `now` (seconds since 1970; its whole life without it), so a message
    /// sent again later does not outlive its transaction.
    public func fcmMessage(token: String, now: Double? = nil) throws -> Data {
        let left = now.map { Int((createdAt + Double(timeToLive) - $0).rounded(.up)) } ?? timeToLive
        let message: [String: Any] = [
            "token": token,
            "notification": ["title": "Approve sign-in?", "body": message],
            "data": userInfo,
            "android": ["priority": "high", "ttl": "\(min(max(left, 1), timeToLive))s", "collapse_key": transactionID],
            "apns": ["headers": apnsHeaders(topic: "").filter { $0.key != "apns-topic" }],
        ]
        return try JSONSerialization.data(withJSONObject: ["message": message], options: [.sortedKeys])
    }
}

/// One event of the events channel: the request as a push announces it, with its payload sealed
/// for the device — the channel is the device's own, so the payload can ride along and spare the
/// device a request.
public struct MobileAuthEvent: Codable, Sendable, Hashable {
    /// The request as a push would announce it.
    public var request: PushNotification
    /// The request's ``MobileAuthPayload``, sealed for the device; `nil` when the stored one could not be read (the
    /// device then fetches it).
    public var sealed: SealedBox?

    /// Creates an event.
    public init(request: PushNotification, sealed: SealedBox?) {
        self.request = request
        self.sealed = sealed
    }
}
