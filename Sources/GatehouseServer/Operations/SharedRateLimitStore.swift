import Foundation
import GatehouseKernel
import GatehouseProtocol

/// A token bucket per client address that every instance on the database shares: `burst`
/// requests at once, then one every `interval` seconds, counted in the database, so three
/// instances behind a balancer allow together what the manifest says for one.
struct SharedRateLimit: Sendable {
    /// The limit's name in `rate_buckets`.
    var name: String
    var burst: Int
    /// Seconds a bucket takes to earn one request back; 0: no limit.
    var interval: Double

    /// `perMinute` requests a minute after a burst of `burst`; `perMinute` 0 turns it off.
    init(_ name: String, perMinute: Int, burst: Int) {
        self.name = name
        self.burst = max(1, burst)
        interval = perMinute > 0 ? 60 / Double(perMinute) : 0
    }
}

extension ServerStore {
    /// Takes one request from `limit`'s bucket for the client at `address` inside the caller's
    /// change (nil address, in-process: never limited). Throws ``StoreRefusal/rateLimited(seconds:)``
    /// when the bucket is empty. The bucket's row stays locked until the change ends, so takes
    /// at every instance are counted one after another; a change that is refused or rolled back
    /// takes nothing.
    /// Static, so an extension's change (``SharedRateLimiter``) takes the same way.
    static func take(_ limit: SharedRateLimit, forAddress address: String?, now: Double, _ db: any SQLSession) throws {
        if let seconds = try retryAfter(taking: limit, forAddress: address, now: now, db) {
            throw StoreRefusal.rateLimited(seconds: seconds)
        }
    }

    /// Takes one request from `limit`'s bucket for the client at `address` as ``take(_:forAddress:now:_:)``
    /// does, but answers a refusal with the whole seconds to wait instead of throwing, so the
    /// change can still commit what goes with the refusal. With `spending` false it only asks
    /// whether the bucket has a request left, and takes none.
    static func retryAfter(
        taking limit: SharedRateLimit,
        forAddress address: String?,
        now: Double,
        spending: Bool = true,
        _ db: any SQLSession
    ) throws -> Int? {
        guard limit.interval > 0, let address else { return nil }
        let key = RateLimiter.key(forAddress: address)
        let select = "SELECT tokens, updated_at FROM rate_buckets WHERE name = ? AND key = ? \(db.dialect.lockingRows)"
        guard spending else {
            // No row: the bucket is full.
            guard let found = try SQLRow.fetchOne(db, sql: select, arguments: [limit.name, key]) else { return nil }
            let tokens = limit.tokens(found, now: now)
            return tokens >= 1 ? nil : limit.wait(tokens)
        }
        // Full buckets of this limit go as buckets are taken from, a few at a time.
        try db.execute(
            sql: """
                DELETE FROM rate_buckets WHERE name = ? AND key IN
                    (SELECT key FROM rate_buckets WHERE name = ? AND full_at < ? AND key != ? LIMIT 8)
                """,
            arguments: [limit.name, limit.name, now - 60, key]
        )
        var found: SQLRow?
        // A bucket another change removed as full between the two statements is made again.
        for _ in 0..<3 where found == nil {
            try db.execute(
                sql: """
                    INSERT INTO rate_buckets (name, key, tokens, updated_at, full_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (name, key) DO NOTHING
                    """,
                arguments: [limit.name, key, Double(limit.burst), now, now]
            )
            found = try SQLRow.fetchOne(db, sql: select, arguments: [limit.name, key])
        }
        guard let found else { throw StoreRefusal.busy("The rate limit could not be read; try again.") }
        let tokens = limit.tokens(found, now: now)
        guard tokens >= 1 else { return limit.wait(tokens) }
        let left = tokens - 1
        try db.execute(
            sql: "UPDATE rate_buckets SET tokens = ?, updated_at = ?, full_at = ? WHERE name = ? AND key = ?",
            arguments: [left, now, now + (Double(limit.burst) - left) * limit.interval, limit.name, key]
        )
        return nil
    }
}

extension SharedRateLimit {
    /// The requests a bucket row holds at `now`, with what it earned back since it was written.
    fileprivate func tokens(_ row: SQLRow, now: Double) -> Double {
        let stored: Double = row["tokens"]
        let updated: Double = row["updated_at"]
        return min(Double(burst), stored + max(0, now - updated) / interval)
    }

    /// Whole seconds until a bucket holding `tokens` (less than one) has a request again.
    fileprivate func wait(_ tokens: Double) -> Int { max(1, Int(((1 - tokens) * interval).rounded(.up))) }
}

/// A rate limit per client address that every instance on the server's database shares, for an
/// extension on the server's storage (the hosted login's password checks, XignIn's anonymous
/// evaluations): `burst` requests at once, then `perMinute` a minute, counted in one row of
/// `rate_buckets` per address under its row lock, so N instances allow what one would.
///
/// Each take is a change of its own (a round trip or three): keep an in-memory `RateLimiter`
/// in front of it, with the same figures, for floods, and use this one where each request costs
/// more than a write anyway (a password hash, an OPRF evaluation).
public struct SharedRateLimiter: Sendable {
    private let limit: SharedRateLimit
    private let storage: ServerStorage

    /// The limit `name` (unique among the server's and its extensions': `login.password-checks`);
    /// `perMinute` 0 turns it off.
    public init(name: String, perMinute: Int, burst: Int, storage: ServerStorage) {
        limit = SharedRateLimit(name, perMinute: perMinute, burst: burst)
        self.storage = storage
    }

    /// Takes one request from the bucket of the client at `address` (nil in-process: never
    /// limited): nil when allowed, else the whole seconds to wait, for `Retry-After`.
    public func retryAfter(forAddress address: String?, now: Double) async throws -> Int? {
        // Off, or in-process: no change is written at all.
        guard limit.interval > 0, let address else { return nil }
        do {
            try await storage.write { [limit] db in try ServerStore.take(limit, forAddress: address, now: now, db) }
            return nil
        } catch StoreRefusal.rateLimited(let seconds) {
            return seconds
        }
    }
}
