public import Foundation
public import GatehouseKernel
import InMemoryLogging
public import Logging
import Synchronization

/// A `KeyValueStore` in memory, for testing a plugin without the client's database.
public actor InMemoryKeyValueStore: KeyValueStore {
    /// Every value stored, by key, for assertions on what a plugin kept.
    public private(set) var values: [String: Data]

    /// Makes a store holding `values`, empty by default.
    public init(_ values: [String: Data] = [:]) { self.values = values }

    /// The value stored under `key`; `nil` when there is none.
    public func value(forKey key: String) -> Data? { values[key] }
    /// Stores `value` under `key`, replacing any older one.
    public func setValue(_ value: Data, forKey key: String) { values[key] = value }
    /// Removes the value under `key`, if any.
    public func removeValue(forKey key: String) { values[key] = nil }
    /// Removes every value.
    public func removeAll() { values.removeAll() }
}

/// A clock that moves only when told to, for expiry and lock-out tests.
public final class ManualClock: WallClock {
    private let current: Mutex<Date>

    /// A clock standing at `start` (by default a fixed, round date).
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(start) }

    /// The time the clock stands at.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock forward by `interval` seconds (back, if negative).
    public func advance(by interval: TimeInterval) { current.withLock { $0 += interval } }
    /// Sets the clock to `date`.
    public func set(to date: Date) { current.withLock { $0 = date } }
}

/// A logger whose every line is kept, to check what was — and what was not — logged.
public struct RecordingLogger: Sendable {
    private let handler: InMemoryLogHandler
    /// The logger to hand the code under test; every line it logs is kept.
    public let logger: Logger

    /// Makes a logger labelled `label` that keeps every line at `level` and above (all of them by
    /// default).
    public init(label: String = "test", level: Logger.Level = .trace) {
        var handler = InMemoryLogHandler()
        handler.logLevel = level
        self.handler = handler
        self.logger = Logger(label: label) { _ in handler }
    }

    /// Every line logged so far, with its metadata, as text.
    public var lines: [String] {
        handler.entries.map { entry in
            let metadata = entry.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return ([entry.level.rawValue, "\(entry.message)"] + metadata).joined(separator: " ")
        }
    }
}

extension PluginEnvironment {
    /// An environment for tests: a recording logger and a manual clock.
    public static func testing(
        logger: RecordingLogger = RecordingLogger(),
        clock: ManualClock = ManualClock()
    )
        -> PluginEnvironment
    {
        PluginEnvironment(logger: logger.logger, clock: clock)
    }
}
