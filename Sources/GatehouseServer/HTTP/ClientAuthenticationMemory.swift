import Foundation
import GatehouseProtocol
import Synchronization

/// What an instance remembers of HTTP Basic client authentication, so a client that keeps
/// presenting its right secret (a resource server introspecting, a portal) costs no database work
/// per request, while every other presentation is counted in the cluster's shared bucket.
///
/// - A credential that passed at an address is remembered there for ``verifiedFor`` seconds; a
///   request from that address with those exact bytes skips the shared bucket.
/// - An address whose shared bucket is empty is locked until it has a request again, here and, by
///   an announcement, at every other instance; a locked address is refused without a look at the
///   database, remembered credentials included (answering them would tell a guesser sharing the
///   address that it had found the secret).
/// - While announcements may be missed, nothing remembered is trusted: every request goes to the
///   shared bucket, which is exact on its own.
final class ClientAuthenticationMemory: Sendable {
    /// How long a credential that passed is taken on trust at its address.
    static let verifiedFor: Double = 60
    /// The longest a lock lasts: one request's wait, at one a minute or more.
    static let longestLock: Double = 60
    /// Remembered credentials, and locked addresses, at most: past either, the memory trusts
    /// nothing rather than grow (the shared bucket is exact on its own).
    static let capacity = 10_000

    private struct State {
        /// By address, each credential that passed there and until when it is trusted.
        var verified: [String: [Data: Double]] = [:]
        var verifiedCount = 0
        var lockedUntil: [String: Double] = [:]
        /// While more addresses are locked than fit: nothing is trusted until then.
        var trustSuspendedUntil: Double = 0
        var listening = true
    }

    private let state = Mutex(State())
    /// The server's clock, in seconds since 1970.
    private let now: @Sendable () -> Double

    init(now: @escaping @Sendable () -> Double) { self.now = now }

    /// Whether the credential with this digest passed at `address` (a rate-limit key) lately,
    /// and may pass again without the shared bucket.
    func trusts(_ credential: Data, at address: String) -> Bool {
        let now = now()
        return state.withLock { state in
            guard state.listening, now >= state.trustSuspendedUntil,
                let until = state.verified[address]?[credential]
            else { return false }
            return until > now
        }
    }

    func remember(_ credential: Data, at address: String) {
        let now = now()
        state.withLock { state in
            guard state.listening, now >= state.trustSuspendedUntil else { return }
            if state.verifiedCount >= Self.capacity {
                state.verified.removeAll(keepingCapacity: true)
                state.verifiedCount = 0
            }
            if state.verified[address, default: [:]].updateValue(now + Self.verifiedFor, forKey: credential) == nil {
                state.verifiedCount += 1
            }
        }
    }

    /// The whole seconds `address` stays locked, or nil.
    func lockedSeconds(_ address: String) -> Int? {
        let now = now()
        return state.withLock { state in
            guard let until = state.lockedUntil[address] else { return nil }
            guard until > now else {
                state.lockedUntil[address] = nil
                return nil
            }
            return max(1, Int((until - now).rounded(.up)))
        }
    }

    /// Locks `address` here until `until` (at most ``longestLock`` from now), forgetting what it
    /// proved.
    func lock(_ address: String, until: Double) {
        let now = now()
        guard until.isFinite, until > now else { return }
        let until = min(until, now + Self.longestLock)
        state.withLock { state in
            if let known = state.lockedUntil[address], known >= until { return }
            if state.lockedUntil[address] == nil, state.lockedUntil.count >= Self.capacity {
                state.lockedUntil = state.lockedUntil.filter { $0.value > now }
                if state.lockedUntil.count >= Self.capacity {
                    // Too many to follow: trust nothing meanwhile, and let the bucket refuse.
                    state.trustSuspendedUntil = max(state.trustSuspendedUntil, until)
                    state.verified.removeAll()
                    state.verifiedCount = 0
                    return
                }
            }
            state.lockedUntil[address] = until
            state.verifiedCount -= state.verified.removeValue(forKey: address)?.count ?? 0
        }
    }

    func hear(_ announcement: Announcement) {
        switch announcement {
        case .message(let message):
            guard let (address, until) = Self.lockout(from: message) else { return }
            lock(address, until: until)
        case .interrupted:
            state.withLock { state in
                state.listening = false
                state.verified.removeAll()
                state.verifiedCount = 0
            }
        case .resumed:
            state.withLock { $0.listening = true }
        }
    }

    // MARK: Announcements

    private static let prefix = "client-auth-lockout "

    /// `client-auth-lockout <until, whole seconds since 1970> <address key>`.
    static func lockoutAnnouncement(_ address: String, until: Double) -> String {
        prefix + String(Int(until.rounded(.up))) + " " + address
    }

    static func lockout(from message: String) -> (address: String, until: Double)? {
        guard message.hasPrefix(prefix) else { return nil }
        let words = message.dropFirst(prefix.count).split(separator: " ", maxSplits: 1)
        // Whole seconds only: no `inf`, no `nan`, no exponent.
        guard words.count == 2, words[0].utf8.count <= 12, words[0].allSatisfy(\.isASCIIDigit),
            let until = Double(words[0]), !words[1].isEmpty, words[1].utf8.count <= 64
        else { return nil }
        return (String(words[1]), until)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
