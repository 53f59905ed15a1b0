import Synchronization

/// A token bucket per key (a client's address): `burst` requests at once, then one every
/// `interval` seconds. It limits what anyone may create without credentials (installations,
/// anonymous PIN evaluations, password checks), so a single source cannot grow the server's
/// state or run its hash function at will. In memory and per process: a restart forgets it, and
/// several instances each allow the rate (the token server also counts installations in its
/// database, for all instances together).
public final class RateLimiter: Sendable {
    /// How many requests one key may make at once, before the bucket runs dry.
    public let burst: Int
    /// Seconds the bucket takes to earn one request back.
    public let interval: Double
    private let maxKeys: Int
    private let buckets = Mutex<[String: Bucket]>([:])

    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    /// `perMinute` requests a minute after a burst of `burst`; `perMinute` 0 turns the limit off.
    public init(perMinute: Int, burst: Int, maxKeys: Int = 100_000) {
        self.burst = max(1, burst)
        interval = perMinute > 0 ? 60 / Double(perMinute) : 0
        self.maxKeys = maxKeys
    }

    /// Takes one request from `key`'s bucket: nil when allowed, else the seconds until the next
    /// one would be.
    public func take(_ key: String, now: Double) -> Double? {
        guard interval > 0 else { return nil }
        return buckets.withLock { buckets in
            if buckets.count >= maxKeys, buckets[key] == nil { forgetFull(&buckets, now: now) }
            var bucket = buckets[key] ?? Bucket(tokens: Double(burst), updated: now)
            bucket.tokens = min(Double(burst), bucket.tokens + max(0, now - bucket.updated) / interval)
            bucket.updated = now
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                return (1 - bucket.tokens) * interval
            }
            bucket.tokens -= 1
            buckets[key] = bucket
            return nil
        }
    }

    /// Takes one request from the bucket of the client at `address` (nil in-process: never
    /// limited): nil when allowed, else the whole seconds to wait, for `Retry-After`.
    public func retryAfter(forAddress address: String?, now: Double) -> Int? {
        guard let address, let wait = take(Self.key(forAddress: address), now: now) else { return nil }
        return Int(wait.rounded(.up))
    }

    /// Gives back the request last taken from the bucket of the client at `address`: for limits
    /// on failures, where every attempt takes one (so concurrent attempts cannot overshoot) and a
    /// success returns it.
    public func giveBack(forAddress address: String?) {
        guard interval > 0, let address else { return }
        let key = Self.key(forAddress: address)
        buckets.withLock { buckets in
            guard var bucket = buckets[key] else { return }
            bucket.tokens = min(Double(burst), bucket.tokens + 1)
            buckets[key] = bucket
        }
    }

    /// Drops the buckets that have refilled (they hold nothing a new bucket would not); if that
    /// frees too little, the oldest half.
    private func forgetFull(_ buckets: inout [String: Bucket], now: Double) {
        buckets = buckets.filter { _, bucket in
            bucket.tokens + max(0, now - bucket.updated) / interval < Double(burst)
        }
        guard buckets.count >= maxKeys / 2 else { return }
        let kept = buckets.sorted { $0.value.updated > $1.value.updated }.prefix(maxKeys / 2)
        buckets = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
    }

    /// The key for an address: an IPv6 address by its /64 prefix, since one host holds a whole
    /// /64; anything else as it is.
    public static func key(forAddress address: String) -> String {
        // An IPv4 client of a dual-stack listener arrives as ::ffff:a.b.c.d: it is that IPv4 host.
        let lowered = address.lowercased()
        if lowered.hasPrefix("::ffff:"), lowered.dropFirst(7).contains(".") { return String(lowered.dropFirst(7)) }
        guard address.contains(":") else { return address }
        var groups = address.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        if let gap = groups.firstIndex(of: ""), address.contains("::") {
            let present = groups.filter { !$0.isEmpty }.count
            groups.removeAll { $0.isEmpty }
            groups.insert(contentsOf: Array(repeating: "0", count: max(0, 8 - present)), at: min(gap, groups.count))
        }
        return groups.prefix(4).joined(separator: ":") + "::/64"
    }
}
