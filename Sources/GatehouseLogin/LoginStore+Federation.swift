import Foundation
import GatehouseProtocol
import GatehouseServer

// Federation's state: sign-ins waiting at an external provider (by their state, which is kept
// only as a hash, with the hash of a cookie that binds them to the browser that started them),
// and the mapping of each provider's users to Gatehouse subjects.

extension LoginStore {
    /// A sign-in waiting at an external provider.
    struct FederationRequest: Sendable {
        var browserHash: Data
        var authorizationID: String
        var provider: String
        var request: String
    }

    /// Keeps a sign-in sent to `provider` until `expiresAt`.
    func beginFederation(
        state: String,
        browser: String,
        authorizationID: String,
        provider: String,
        request: String,
        expiresAt: Double,
        now: Double
    ) async throws {
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_federation_requests WHERE expires_at < ?", arguments: [now])
            try db.execute(
                sql: """
                    INSERT INTO login_federation_requests (state_hash, browser_hash, authorization_id, provider, request,
                        expires_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [Self.hash(state), Self.hash(browser), authorizationID, provider, request, expiresAt]
            )
        }
    }

    /// Takes the sign-in whose state is `state` (once: a second callback finds nothing).
    func takeFederation(state: String, now: Double) async throws -> FederationRequest? {
        try await storage.write { db in
            try SQLRow.fetchOne(
                db,
                sql: """
                    DELETE FROM login_federation_requests WHERE state_hash = ?
                    RETURNING browser_hash, authorization_id, provider, request, expires_at
                    """,
                arguments: [Self.hash(state)]
            ).flatMap { row in
                guard (row["expires_at"] as Double) > now else { return nil }
                return FederationRequest(
                    browserHash: row["browser_hash"],
                    authorizationID: row["authorization_id"],
                    provider: row["provider"],
                    request: row["request"]
                )
            }
        }
    }

    /// The Gatehouse subject of `provider`'s user `upstream`: the one recorded at the first
    /// sign-in (`proposed` then), kept for good after.
    func federatedSubject(
        provider: String,
        upstream: String,
        email: String?,
        emailVerified: Bool,
        proposed: String,
        now: Double
    ) async throws -> String {
        try await storage.write { db in
            try String.fetchOne(
                db,
                sql: """
                    INSERT INTO login_federated_accounts (provider, upstream_subject, subject, email, email_verified,
                        created_at, last_seen_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (provider, upstream_subject) DO UPDATE SET email = excluded.email,
                        email_verified = excluded.email_verified, last_seen_at = excluded.last_seen_at
                    RETURNING subject
                    """,
                arguments: [provider, upstream, proposed, email, emailVerified, now, now]
            ) ?? proposed
        }
    }

    /// The e-mail address the provider last gave for federated subject `subject`, and whether it
    /// had verified it.
    func federatedEmail(of subject: String) async throws -> (email: String, verified: Bool)? {
        try await storage.read { db in
            try SQLRow.fetchOne(
                db,
                sql: """
                    SELECT email, email_verified FROM login_federated_accounts
                    WHERE subject = ? AND email IS NOT NULL ORDER BY last_seen_at DESC LIMIT 1
                    """,
                arguments: [subject]
            ).map { ($0["email"], $0["email_verified"]) }
        }
    }

    /// Whether the directory has `username`.
    func hasUser(_ username: String) async throws -> Bool {
        try await storage.read { db in
            try SQLRow.fetchOne(
                db,
                sql: "SELECT 1 FROM login_users WHERE username = ?",
                arguments: [Self.normalized(username)]
            ) != nil
        }
    }

    /// Gives the waiting authorization `id` a new CSRF token (the consent page after federation
    /// needs one the browser has); nil when it is gone.
    func renewCSRF(_ id: String, now: Double) async throws -> String? {
        let csrf = Data.random(count: 24).base64URLEncodedString
        let renewed = try await storage.write { db in
            try db.execute(
                sql: "UPDATE login_authorizations SET csrf_hash = ? WHERE id = ? AND expires_at > ?",
                arguments: [Self.hash(csrf), id, now]
            )
            return db.changesCount == 1
        }
        return renewed ? csrf : nil
    }
}
