import Foundation
import GatehouseProtocol

// App-to-web single sign-on: one-time login tokens and the browser sessions they open. Both name
// the app session (token family) they came from and live no longer than it.

/// The user a login token or a web session is for.
struct WebUser: Sendable {
    var subject: String
    var identityProvider: String
}

extension ServerStore {
    /// Joined with `families` and `profiles`: the app session is still on — not revoked (logout,
    /// refresh-token reuse), its refresh token not expired, its registration current. Takes
    /// `now` twice.
    private static let appSessionLive = """
        families.revoked = FALSE AND (profiles.expires_at IS NULL OR profiles.expires_at > ?)
        AND EXISTS (SELECT 1 FROM tokens WHERE tokens.family = families.id AND tokens.kind = 'refresh'
            AND tokens.revoked = FALSE AND tokens.expires_at > ?)
        """

    /// Issues a login token for the session's user and the target `target` returns for the
    /// session's application (or throws to refuse); the access token is checked, the target
    /// decided and the proof recorded in one transaction.
    func issueWebLogin(
        accessToken: String,
        proof: ProofUse,
        lifetime: Double,
        target decide: @escaping @Sendable (_ appID: String?) throws -> String
    ) async throws -> String {
        try await write { db in
            let session = try self.accessSession(accessToken, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            let appID = try String.fetchOne(
                db,
                sql:
                    "SELECT clients.app_id FROM profiles JOIN clients ON clients.id = profiles.client_id WHERE profiles.id = ?",
                arguments: [session.profileID]
            )
            let target = try decide(appID)
            try self.record(proof, db)
            let token = Data.random(count: 32).base64URLEncodedString
            try db.execute(
                sql: """
                    INSERT INTO web_login_tokens (hash, profile_id, family, target, expires_at) VALUES (?, ?, ?, ?, ?)
                    """,
                arguments: [Self.tokenHash(token), session.profileID, session.family, target, proof.now + lifetime]
            )
            return token
        }
    }

    /// The user a live login token would sign in, without spending it: for the page that asks the
    /// browser's user to continue as them.
    func webLoginUser(_ token: String, now: Double) async throws -> WebUser? {
        try await liveUser(in: "web_login_tokens", hash: Self.tokenHash(token), now: now)
    }

    /// Spends a login token (once, before it expires, while its app session is on) and opens a
    /// web session for its user, tied to the same app session. Returns the target and the
    /// session's secret, or nil when the token is not valid.
    func redeemWebLogin(
        _ token: String,
        now: Double,
        sessionLifetime: Double
    ) async throws -> (
        target: String, session: String
    )? {
        try await write { db in
            guard
                let row = try SQLRow.fetchOne(
                    db,
                    sql: "DELETE FROM web_login_tokens WHERE hash = ? RETURNING profile_id, family, target, expires_at",
                    arguments: [Self.tokenHash(token)]
                ), (row["expires_at"] as Double) > now,
                try Bool.fetchOne(
                    db,
                    sql: """
                        SELECT 1 FROM families JOIN profiles ON profiles.id = families.profile_id
                        WHERE families.id = ? AND \(Self.appSessionLive)
                        """,
                    arguments: [row["family"] as String, now, now]
                ) == true
            else { return nil }
            let session = Data.random(count: 32).base64URLEncodedString
            try db.execute(
                sql: "INSERT INTO web_sessions (hash, profile_id, family, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [
                    Self.tokenHash(session), row["profile_id"] as String, row["family"] as String,
                    now + sessionLifetime,
                ]
            )
            return (row["target"], session)
        }
    }

    /// The user of a live web session: checked on each use against the app session it came
    /// from, so it ends when that one is revoked or runs out.
    func webSessionUser(_ session: String, now: Double) async throws -> WebUser? {
        try await liveUser(in: "web_sessions", hash: Self.tokenHash(session), now: now)
    }

    /// The user of a live row of `table` (login tokens or web sessions), its app session still on.
    private func liveUser(in table: String, hash: Data, now: Double) async throws -> WebUser? {
        try await lookup { db in
            try SQLRow.fetchOne(
                db,
                sql: """
                    SELECT profiles.subject, profiles.identity_provider FROM \(table)
                    JOIN profiles ON profiles.id = \(table).profile_id
                    JOIN families ON families.id = \(table).family
                    WHERE \(table).hash = ? AND \(table).expires_at > ? AND \(Self.appSessionLive)
                    """,
                arguments: [hash, now, now, now]
            ).map { WebUser(subject: $0["subject"], identityProvider: $0["identity_provider"]) }
        }
    }
}
