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
    /// Remembered credentials before the memory starts again empty (unknown ones never enter).
    static let capacity = 10_000

    private struct Verified: Hashable {
        var address: String
        var credential: Data
    }

    private struct State {
        var verified: [Verified: Double] = [:]
        var lockedUntil: [String: Double] = [:]
        var listening = true
    }

    private let state = Mutex(State())

    /// Whether the credential with this digest passed at `address` (a rate-limit key) lately,
    /// and may pass again without the shared bucket.
    func trusts(_ credential: Data, at address: String, now: Double) -> Bool {
        state.withLock { state in
            guard state.listening, let until = state.verified[Verified(address: address, credential: credential)] else {
                return false
            }
            return until > now
        }
    }

    func remember(_ credential: Data, at address: String, now: Double) {
        state.withLock { state in
            guard state.listening else { return }
            if state.verified.count >= Self.capacity { state.verified.removeAll(keepingCapacity: true) }
            state.verified[Verified(address: address, credential: credential)] = now + Self.verifiedFor
        }
    }

    /// The whole seconds `address` stays locked, or nil.
    func lockedSeconds(_ address: String, now: Double) -> Int? {
        state.withLock { state in
            guard let until = state.lockedUntil[address] else { return nil }
            guard until > now else {
                state.lockedUntil[address] = nil
                return nil
            }
            return max(1, Int((until - now).rounded(.up)))
        }
    }

    /// Locks `address` here until `until`; false when it already was, for as long.
    @discardableResult
    func lock(_ address: String, until: Double) -> Bool {
        state.withLock { state in
            if let known = state.lockedUntil[address], known >= until { return false }
            if state.lockedUntil.count >= Self.capacity {
                // A lock lasts at most a minute (one request's wait at one a minute or more):
                // those older are over. A flood of addresses cannot unlock the live ones.
                state.lockedUntil = state.lockedUntil.filter { $0.value > until - 60 }
            }
            state.lockedUntil[address] = until
            state.verified = state.verified.filter { $0.key.address != address }
            return true
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
            }
        case .resumed:
            state.withLock { $0.listening = true }
        }
    }

    // MARK: Announcements

    private static let prefix = "client-auth-lockout "

    /// `client-auth-lockout <until, seconds since 1970> <address key>`.
    static func lockoutAnnouncement(_ address: String, until: Double) -> String {
        prefix + String(Int(until.rounded(.up))) + " " + address
    }

    static func lockout(from message: String) -> (address: String, until: Double)? {
        guard message.hasPrefix(prefix) else { return nil }
        let words = message.dropFirst(prefix.count).split(separator: " ", maxSplits: 1)
        guard words.count == 2, let until = Double(words[0]), !words[1].isEmpty, words[1].utf8.count <= 64 else {
            return nil
        }
        return (String(words[1]), until)
    }
}
