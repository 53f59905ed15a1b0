public import Foundation

/// The source of the current time, injected so expiry and lock-outs can be tested with a
/// manual clock.
public protocol WallClock: Sendable {
    /// The current time.
    var now: Date { get }
}

/// The system's clock.
public struct SystemWallClock: WallClock {
    /// Makes the clock.
    public init() {}
    /// The current time, `Date()`.
    public var now: Date { Date() }
}
