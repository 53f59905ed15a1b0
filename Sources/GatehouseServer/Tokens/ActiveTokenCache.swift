import Foundation
import GatehouseProtocol
import Synchronization

/// Introspection answers of active tokens, in memory: a resource server checking a token in use
/// costs no database read.
///
/// Exact under revocation. Every change that can end a token (revocation, rotation, a new
/// registration of the profile, deregistration, a sweep) evicts it when its transaction commits,
/// which is before the change is acknowledged; an answer read from the database while such a
/// change committed is not kept, since the cache's version moved on meanwhile. Expiry (the
/// token's, and the registration's) is checked on every use. Only active answers are kept, so
/// unknown tokens cannot fill it; when full, it starts again empty.
final class ActiveTokenCache: Sendable {
    struct Entry: Sendable {
        var answer: IntrospectionResponse
        var expiresAt: Double
        var registrationEndsAt: Double?
        /// The session it belongs to; nil for a device token.
        var family: String?
        var profileID: String?
    }

    /// What a committed change ended.
    enum Eviction: Sendable {
        case token(hash: Data)
        case family(String)
        case profile(String)
        case all
    }

    private struct State {
        var entries: [Data: Entry] = [:]
        var byFamily: [String: [Data]] = [:]
        var version: UInt64 = 0
        /// False while evictions from other instances may be missed: nothing is kept then.
        var listening = true
    }

    private let state = Mutex(State())
    let capacity: Int

    init(capacity: Int = 100_000) { self.capacity = capacity }

    /// Whether answers are kept (not while evictions from other instances may be missed).
    var isKeeping: Bool { state.withLock { $0.listening } }

    /// Changes with every eviction: an answer read under an older version may be stale.
    var version: UInt64 { state.withLock { $0.version } }

    /// The answer for the token with this hash at `now`, if it is kept.
    func answer(forHash hash: Data, now: Double) -> IntrospectionResponse? {
        state.withLock { state in
            guard let entry = state.entries[hash] else { return nil }
            guard entry.expiresAt > now, entry.registrationEndsAt.map({ $0 > now }) ?? true else { return .inactive }
            return entry.answer
        }
    }

    /// Keeps an active answer read from the database at `version`, unless something was
    /// evicted since.
    func keep(_ entry: Entry, forHash hash: Data, readAt version: UInt64) {
        state.withLock { state in
            guard state.version == version, state.listening else { return }
            if state.entries.count >= capacity {
                state.entries.removeAll(keepingCapacity: true)
                state.byFamily.removeAll(keepingCapacity: true)
            }
            state.entries[hash] = entry
            if let family = entry.family { state.byFamily[family, default: []].append(hash) }
        }
    }

    func evict(_ eviction: Eviction) {
        state.withLock { state in
            state.version &+= 1
            switch eviction {
            case .token(let hash):
                if let family = state.entries.removeValue(forKey: hash)?.family {
                    state.byFamily[family]?.removeAll { $0 == hash }
                }
            case .family(let family):
                for hash in state.byFamily.removeValue(forKey: family) ?? [] { state.entries[hash] = nil }
            case .profile(let profileID):
                // Rare (deregistration, a new registration): a scan is fine.
                let ended = state.entries.filter { $0.value.profileID == profileID }
                for (hash, entry) in ended {
                    state.entries[hash] = nil
                    if let family = entry.family { state.byFamily[family] = nil }
                }
            case .all:
                state.entries.removeAll(keepingCapacity: true)
                state.byFamily.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Evicts on every instance once the transaction `db` is in commits: on this one before the
    /// change is acknowledged, on the others when they hear of it (PostgreSQL's NOTIFY, sent
    /// with the commit, delivered within milliseconds).
    func evictOnCommit(_ eviction: Eviction, _ db: any SQLSession) throws {
        try db.announce(eviction.announcement)
    }

    /// What an instance heard from the database: an eviction some instance committed, or that
    /// it may have missed some (nothing is kept meanwhile, so nothing stale can be answered).
    func hear(_ announcement: Announcement) {
        switch announcement {
        case .message(let message):
            guard let eviction = Eviction(announcement: message) else { return }
            evict(eviction)
        case .interrupted:
            state.withLock { $0.listening = false }
            evict(.all)
        case .resumed:
            evict(.all)
            state.withLock { $0.listening = true }
        }
    }
}

extension ActiveTokenCache.Eviction {
    private static let prefix = "token-cache "

    /// How instances tell each other: `token-cache token <hash, base64url>`, `… family <id>`,
    /// `… profile <id>`, `… all`.
    var announcement: String {
        switch self {
        case .token(let hash): Self.prefix + "token " + hash.base64URLEncodedString
        case .family(let family): Self.prefix + "family " + family
        case .profile(let profileID): Self.prefix + "profile " + profileID
        case .all: Self.prefix + "all"
        }
    }

    init?(announcement: String) {
        guard announcement.hasPrefix(Self.prefix) else { return nil }
        let words = announcement.dropFirst(Self.prefix.count).split(separator: " ", maxSplits: 1)
        switch (words.first, words.count == 2 ? String(words[1]) : nil) {
        case ("token", let hash?):
            guard let data = Data(base64URLEncoded: hash) else { return nil }
            self = .token(hash: data)
        case ("family", let family?): self = .family(family)
        case ("profile", let profileID?): self = .profile(profileID)
        case ("all", nil): self = .all
        default: return nil
        }
    }
}
