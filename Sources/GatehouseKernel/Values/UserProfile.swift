/// A user registered on this device: the link between a user account and the app.
///
/// A device may hold several profiles; registering the same user again reuses its profile.
public struct UserProfile: Hashable, Sendable, Codable, CustomStringConvertible {
    /// A short, random identifier, unique on the device and on the server.
    public let id: String

    /// Makes the profile with identifier `id`, as the server assigned it.
    public init(id: String) { self.id = id }

    /// The identifier.
    public var description: String { id }
}

/// Failure counts a PIN challenge carries, so the app can warn before the last attempt.
public struct FailureCounts: Hashable, Sendable, Codable {
    /// Failures allowed before the profile is deregistered; 0 means unlimited.
    public var maximum: Int
    /// Failures so far on this device since the last success.
    public var previous: Int

    /// Makes the counts; `maximum` 0 means unlimited.
    public init(maximum: Int, previous: Int) {
        self.maximum = maximum
        self.previous = previous
    }

    /// Failures left; `nil` when unlimited.
    public var remaining: Int? { maximum == 0 ? nil : max(0, maximum - previous) }
}

/// What a custom API or a custom authenticator reports: a status code and optional data.
///
/// Status codes follow the seed server's ranges: 2000–2999 success, 4000–4999 failure the user
/// may retry, 5000–5999 failure after which the flow is cleaned up.
public struct CustomInfo: Hashable, Sendable, Codable {
    /// The status code: 2000–2999 success, 4000–4999 a failure the user may retry, 5000–5999 a
    /// final failure.
    public var status: Int
    /// What the API or the authenticator sent along for the app, if anything; the app interprets
    /// it.
    public var data: String?

    /// Makes an info of `status`, with optional `data`.
    public init(status: Int, data: String? = nil) {
        self.status = status
        self.data = data
    }

    /// Whether ``status`` is in 2000–2999.
    public var isSuccess: Bool { (2000..<3000).contains(status) }
    /// Whether ``status`` is in 4000–4999: the user may try again.
    public var isRetryableFailure: Bool { (4000..<5000).contains(status) }
    /// Whether ``status`` is in 5000–5999: the flow is cleaned up.
    public var isFinalFailure: Bool { (5000..<6000).contains(status) }
}
