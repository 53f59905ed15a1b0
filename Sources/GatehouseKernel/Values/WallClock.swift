public import Foundation

/// The source of the current time, injected so expiry and lock-outs can be tested with a
/// manual clock.
public protocol WallClock: Sendable {
    var now: Date { get }
}

/// The system's clock.
public struct SystemWallClock: WallClock {
    public init() {}
    public var now: Date { Date() }
}
