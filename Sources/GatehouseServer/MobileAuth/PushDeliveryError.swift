/// Why a push service did not take a push, in the terms the token server acts on: a dead device
/// token disenrols the device, a temporary refusal is tried again later, anything else is logged.
/// A ``PushTransport`` throws it; any other error counts as `temporary` (the
/// service could not be reached).
public struct PushDeliveryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the token server does about a refused push. An open set: match with `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as logs show it.
        public let name: String

        /// A code named `name`.
        public init(_ name: String) { self.name = name }

        /// The device token is dead (APNs 410 `Unregistered`; FCM `UNREGISTERED`): the server
        /// disenrols the device, and does not try again.
        public static let unregistered = Code("unregistered")
        /// Worth another try later (APNs 429 and 5xx; FCM 429, 500, 502, 503 and 504; no answer): tried
        /// again after a while, a few times, within the transaction's lifetime.
        public static let temporary = Code("temporary")
        /// Refused for good (any other answer): logged, not tried again.
        public static let rejected = Code("rejected")

        /// The name.
        public var description: String { name }
    }

    /// What the server does about it.
    public var code: Code
    /// What the service answered, e.g. `410 Unregistered`: a status and the service's reason,
    /// never a device token or a credential.
    public var reason: String
    /// How long the service asked the sender to wait before trying again (`Retry-After`).
    public var retryAfter: Duration?

    /// An error with `code`, the service's `reason`, and how long it asked to wait, if it did.
    public init(_ code: Code, reason: String, retryAfter: Duration? = nil) {
        self.code = code
        self.reason = reason
        self.retryAfter = retryAfter
    }

    /// The code and the reason.
    public var description: String { "\(code): \(reason)" }
}
