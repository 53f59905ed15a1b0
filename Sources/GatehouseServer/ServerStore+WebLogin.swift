import Foundation
import GatehouseProtocol

// App-to-web single sign-on: one-time login tokens and the browser sessions they open.

extension ServerStore {
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
                sql: "INSERT INTO web_login_tokens (hash, profile_id, target, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [Self.tokenHash(token), session.profileID, target, proof.now + lifetime]
            )
            return token
        }
    }

    /// Spends a login token (once, before it expires) and opens a web session for its user.
    /// Returns the target and the session's secret, or nil when the token is not valid.
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
                    sql: "DELETE FROM web_login_tokens WHERE hash = ? RETURNING profile_id, target, expires_at",
                    arguments: [Self.tokenHash(token)]
                ), (row["expires_at"] as Double) > now
            else { return nil }
            let session = Data.random(count: 32).base64URLEncodedString
            try db.execute(
                sql: "INSERT INTO web_sessions (hash, profile_id, expires_at) VALUES (?, ?, ?)",
                arguments: [Self.tokenHash(session), row["profile_id"] as String, now + sessionLifetime]
            )
            return (row["target"], session)
        }
    }

    /// The user of a live web session.
    func webSessionUser(_ session: String, now: Double) async throws -> (subject: String, identityProvider: String)? {
        try await lookup { db in
            try SQLRow.fetchOne(
                db,
                sql: """
                    SELECT profiles.subject, profiles.identity_provider FROM web_sessions
                    JOIN profiles ON profiles.id = web_sessions.profile_id
                    WHERE web_sessions.hash = ? AND web_sessions.expires_at > ?
                    """,
                arguments: [Self.tokenHash(session), now]
            ).map { ($0["subject"], $0["identity_provider"]) }
        }
    }
}
