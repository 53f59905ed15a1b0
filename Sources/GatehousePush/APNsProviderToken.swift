import Crypto
import Foundation
import GatehouseKernel
import Synchronization

/// The provider authentication token APNs wants in every request's `authorization`: a JWT
/// signed with ES256 by the team's `.p8` key, header `alg` and `kid` (the key id), claims `iss`
/// (the team id) and `iat`. Apple refuses a token older than an hour, and more than one new token
/// in twenty minutes: one is made, reused for every push, and replaced after
/// ``renewalAge`` — or at once when APNs calls it expired or invalid.
final class APNsProviderToken: Sendable {
    private struct Claims: Encodable {
        var iss: String
        var iat: Int
    }

    private let key: P256.Signing.PrivateKey
    private let keyID: String
    private let teamID: String
    private let clock: any WallClock
    private let current = Mutex<(token: String, issuedAt: Double)?>(nil)

    /// How old a token is used: well within Apple's hour, and well past its twenty minutes.
    static let renewalAge: Double = 50 * 60

    init(key: P256.Signing.PrivateKey, keyID: String, teamID: String, clock: any WallClock) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
        self.clock = clock
    }

    /// The token to send now: the one made before while it is young enough, else a new one.
    func token() throws -> String {
        let now = clock.now.timeIntervalSince1970
        return try current.withLock { current in
            // A clock set back makes a token "from the future": APNs refuses those too.
            if let made = current, now - made.issuedAt < Self.renewalAge, now >= made.issuedAt - 60 {
                return made.token
            }
            let token = try make(now)
            current = (token, now)
            return token
        }
    }

    /// A new token in place of `rejected`, which APNs called expired or invalid; when another
    /// push replaced it already, that replacement.
    func renew(rejected: String) throws -> String {
        try current.withLock { current in
            if let made = current, made.token != rejected { return made.token }
            let now = clock.now.timeIntervalSince1970
            let token = try make(now)
            current = (token, now)
            return token
        }
    }

    private func make(_ now: Double) throws -> String {
        try CompactJWS.make(
            header: ["alg": "ES256", "kid": keyID],
            claims: Claims(iss: teamID, iat: Int(now))
        ) { input in
            try key.signature(for: input).rawRepresentation
        }
    }
}
