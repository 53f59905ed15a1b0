import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

// The OpenID provider's state: browser sessions and the clients that took part in them,
// remembered consents, web clients' access and refresh tokens, and back-channel logouts waiting
// to be delivered. Cookies and tokens are kept only as SHA-256 hashes. As in the rest of the
// store, what a change decides from a row it decides in the statement that changes the row.

/// What an authorization or a grant carries for OpenID Connect beyond OAuth's fields.
struct GrantDetails: Codable, Sendable, Equatable {
    /// The client's nonce, for the ID token of the code's exchange only.
    var nonce: String?
    /// When the user authenticated, seconds since 1970.
    var authTime: Double
    /// The browser session the grant came from (`sid`).
    var sessionID: String?
    /// How the user authenticated (RFC 8176 values).
    var amr: [String]
    /// The authentication context class.
    var acr: String

    var json: String { (try? String(decoding: JSONEncoder().encode(self), as: UTF8.self)) ?? "{}" }
    static func read(_ text: String?) -> GrantDetails? {
        text.flatMap { try? JSONDecoder().decode(GrantDetails.self, from: Data($0.utf8)) }
    }
}

/// A live browser session at the login.
struct LoginSession: Sendable, Equatable {
    /// The public session id (`sid`); not the cookie.
    var id: String
    var subject: String
    var authTime: Double
    var amr: [String]
    var acr: String
}

extension LoginStore {
    // MARK: - Sessions

    /// Starts a browser session for `subject`; returns it and the cookie value that names it.
    /// The session the browser had (`replacing`), if any, ends: one browser, one session.
    func startSession(
        subject: String,
        amr: [String],
        acr: String,
        expiresAt: Double,
        now: Double
    ) async throws -> (session: LoginSession, cookie: String) {
        let cookie = Data.random(count: 32).base64URLEncodedString
        let session = LoginSession(
            id: Data.random(count: 18).base64URLEncodedString,
            subject: subject,
            authTime: now,
            amr: amr,
            acr: acr
        )
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_sessions WHERE expires_at < ?", arguments: [now - 86400])
            try db.execute(
                sql: """
                    INSERT INTO login_sessions (id, cookie_hash, subject, auth_time, amr, acr, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    session.id, Self.hash(cookie), subject, now, amr.joined(separator: " "), acr, expiresAt,
                ]
            )
        }
        return (session, cookie)
    }

    /// The live session a browser's cookie names.
    func session(cookie: String, now: Double) async throws -> LoginSession? {
        try await storage.read { db in
            try SQLRow.fetchOne(
                db,
                sql: """
                    SELECT id, subject, auth_time, amr, acr FROM login_sessions
                    WHERE cookie_hash = ? AND expires_at > ? AND ended_at IS NULL
                    """,
                arguments: [Self.hash(cookie), now]
            ).map(Self.session)
        }
    }

    private static func session(_ row: SQLRow) -> LoginSession {
        LoginSession(
            id: row["id"],
            subject: row["subject"],
            authTime: row["auth_time"],
            amr: (row["amr"] as String).split(separator: " ").map(String.init),
            acr: row["acr"]
        )
    }

    /// A logout owed to a client that took part in an ending session.
    struct OwedLogout: Sendable {
        var clientID: String
        var uri: String
        var subject: String
        /// The session id as the client knows it.
        var sessionID: String
    }

    /// Ends session `id` (once: nil if it had ended): revokes the tokens issued in it and queues
    /// the back-channel logouts `owed` says the clients that took part in it get, in the same
    /// transaction, so a crash after it loses none of them.
    func endSession(
        _ id: String,
        now: Double,
        owed: @escaping @Sendable (_ subject: String, _ clients: [String]) -> [OwedLogout]
    ) async throws -> (subject: String, clients: [String])? {
        try await storage.write { db in
            guard
                let subject = try String.fetchOne(
                    db,
                    sql: "UPDATE login_sessions SET ended_at = ? WHERE id = ? AND ended_at IS NULL RETURNING subject",
                    arguments: [now, id]
                )
            else { return nil }
            let clients = try String.fetchAll(
                db,
                sql: "SELECT client_id FROM login_session_clients WHERE session_id = ? ORDER BY client_id",
                arguments: [id]
            )
            try db.execute(
                sql: "UPDATE login_tokens SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL",
                arguments: [now, id]
            )
            try db.execute(sql: "DELETE FROM login_session_clients WHERE session_id = ?", arguments: [id])
            for logout in owed(subject, clients) {
                try db.execute(
                    sql: """
                        INSERT INTO login_logout_deliveries (id, client_id, uri, subject, session_id, attempts,
                            next_attempt_at, created_at)
                        VALUES (?, ?, ?, ?, ?, 0, ?, ?)
                        """,
                    arguments: [
                        Data.random(count: 12).base64URLEncodedString, logout.clientID, logout.uri, logout.subject,
                        logout.sessionID, now, now,
                    ]
                )
            }
            return (subject, clients)
        }
    }

    // MARK: - Consents

    /// Whether `subject` allowed `clientID` every scope of `scope` before.
    func hasConsent(subject: String, clientID: String, scope: String) async throws -> Bool {
        let granted = try await storage.read { db in
            try String.fetchOne(
                db,
                sql: "SELECT scope FROM login_consents WHERE subject = ? AND client_id = ?",
                arguments: [subject, clientID]
            )
        }
        guard let granted else { return false }
        let have = Set(granted.split(separator: " "))
        return scope.split(separator: " ").allSatisfy(have.contains)
    }

    /// Remembers that `subject` allowed `clientID` the scopes of `scope` (added to earlier ones).
    func grantConsent(subject: String, clientID: String, scope: String, now: Double) async throws {
        try await storage.write { db in
            let earlier =
                try String.fetchOne(
                    db,
                    sql:
                        "SELECT scope FROM login_consents WHERE subject = ? AND client_id = ? \(db.dialect.lockingRows)",
                    arguments: [subject, clientID]
                ) ?? ""
            let all = Set(earlier.split(separator: " ").map(String.init) + scope.split(separator: " ").map(String.init))
            try db.execute(
                sql: """
                    INSERT INTO login_consents (subject, client_id, scope, granted_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (subject, client_id) DO UPDATE SET scope = excluded.scope, granted_at = excluded.granted_at
                    """,
                arguments: [subject, clientID, all.sorted().joined(separator: " "), now]
            )
        }
    }

    // MARK: - Tokens

    /// What a web client's token stands for.
    struct TokenGrant: Sendable, Equatable {
        var grantID: String
        var clientID: String
        var subject: String
        var scope: String
        var details: GrantDetails
    }

    /// Issues an access token (for `accessScope`, else the grant's) and a refresh token (for the
    /// grant's whole scope, when `refreshExpiresAt` is set) for `grant`, unless the grant was
    /// revoked or its session ended meanwhile; nil then.
    func issueTokens(
        _ grant: TokenGrant,
        accessExpiresAt: Double,
        refreshExpiresAt: Double?,
        accessScope: String? = nil,
        now: Double
    ) async throws -> (access: String, refresh: String?)? {
        let access = Data.random(count: 32).base64URLEncodedString
        let refresh = refreshExpiresAt.map { _ in Data.random(count: 32).base64URLEncodedString }
        let issued: Bool = try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_tokens WHERE expires_at < ?", arguments: [now - 86400])
            try db.execute(sql: "DELETE FROM login_grants WHERE expires_at < ?", arguments: [now - 86400])
            // The grant's row locked until this commits: a replay or reuse revoking the grant now
            // waits for us and then revokes these tokens too, or revoked it first and we issue none.
            let revoked = try SQLRow.fetchOne(
                db,
                sql: "SELECT revoked_at FROM login_grants WHERE grant_id = ? \(db.dialect.lockingRows)",
                arguments: [grant.grantID]
            )
            guard let revoked, (revoked["revoked_at"] as Double?) == nil else { return false }
            let lastExpiry = max(accessExpiresAt, refreshExpiresAt ?? 0)
            try db.execute(
                sql: "UPDATE login_grants SET expires_at = ? WHERE grant_id = ? AND expires_at < ?",
                arguments: [lastExpiry, grant.grantID, lastExpiry]
            )
            if let session = grant.details.sessionID {
                // The session row locked until this commits: a logout ending it now waits for us
                // and then revokes these tokens too, or ended it first and we issue none.
                guard
                    try SQLRow.fetchOne(
                        db,
                        sql: """
                            SELECT 1 FROM login_sessions WHERE id = ? AND ended_at IS NULL AND expires_at > ?
                            \(db.dialect.lockingRows)
                            """,
                        arguments: [session, now]
                    ) != nil
                else { return false }
                try db.execute(
                    sql: """
                        INSERT INTO login_session_clients (session_id, client_id) VALUES (?, ?)
                        ON CONFLICT (session_id, client_id) DO NOTHING
                        """,
                    arguments: [session, grant.clientID]
                )
            }
            var narrowed = grant
            if let accessScope { narrowed.scope = accessScope }
            try Self.insertToken(db, access, kind: "access", narrowed, expiresAt: accessExpiresAt)
            if let refresh, let refreshExpiresAt {
                try Self.insertToken(db, refresh, kind: "refresh", grant, expiresAt: refreshExpiresAt)
            }
            return true
        }
        return issued ? (access, refresh) : nil
    }

    private static func insertToken(
        _ db: any SQLSession,
        _ token: String,
        kind: String,
        _ grant: TokenGrant,
        expiresAt: Double
    ) throws {
        try db.execute(
            sql: """
                INSERT INTO login_tokens (hash, kind, grant_id, client_id, subject, scope, session_id, details,
                    expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                hash(token), kind, grant.grantID, grant.clientID, grant.subject, grant.scope, grant.details.sessionID,
                grant.details.json, expiresAt,
            ]
        )
    }

    /// The grant a live access token stands for.
    func accessGrant(_ token: String, now: Double) async throws -> TokenGrant? {
        try await storage.read { db in
            try SQLRow.fetchOne(
                db,
                sql: """
                    SELECT grant_id, client_id, subject, scope, details FROM login_tokens
                    WHERE hash = ? AND kind = 'access' AND expires_at > ? AND revoked_at IS NULL
                    """,
                arguments: [Self.hash(token), now]
            ).flatMap(Self.grant)
        }
    }

    private static func grant(_ row: SQLRow) -> TokenGrant? {
        guard let details = GrantDetails.read(row["details"]) else { return nil }
        return TokenGrant(
            grantID: row["grant_id"],
            clientID: row["client_id"],
            subject: row["subject"],
            scope: row["scope"],
            details: details
        )
    }

    /// Why a refresh token was not accepted (all are OAuth `invalid_grant`).
    enum RefreshRefusal: Error, Equatable, Sendable {
        /// Unknown, expired or revoked.
        case invalid
        /// Spent before: the grant is revoked now (RFC 9700 §4.14.2).
        case reused
        /// Issued to another client.
        case wrongClient
        /// Asks for a scope the grant does not hold (OAuth `invalid_scope`); the token stays unspent.
        case widerScope
    }

    /// Spends refresh token `token` of `clientID` once and returns its grant; a second use of it
    /// revokes every token of the grant. A request for scopes beyond the grant's (`scope`, when
    /// asked) is refused without spending the token, so the client's next try is not a replay.
    func spendRefreshToken(
        _ token: String,
        clientID: String,
        scope: String? = nil,
        now: Double
    ) async throws -> TokenGrant {
        let outcome: Result<TokenGrant, RefreshRefusal> = try await storage.write { db in
            guard
                let row = try SQLRow.fetchOne(
                    db,
                    sql: """
                        UPDATE login_tokens SET used_at = ?
                        WHERE hash = ? AND client_id = ? AND kind = 'refresh' AND used_at IS NULL
                            AND revoked_at IS NULL AND expires_at > ?
                        RETURNING grant_id, client_id, subject, scope, details
                        """,
                    arguments: [now, Self.hash(token), clientID, now]
                )
            else {
                let spent = try SQLRow.fetchOne(
                    db,
                    sql:
                        "SELECT grant_id, client_id FROM login_tokens WHERE hash = ? AND kind = 'refresh' AND used_at IS NOT NULL",
                    arguments: [Self.hash(token)]
                )
                guard let spent, spent["client_id"] as String == clientID else { return .failure(.invalid) }
                try Self.revokeGrant(db, spent["grant_id"], now: now)
                return .failure(.reused)
            }
            guard row["client_id"] as String == clientID, let grant = Self.grant(row) else {
                return .failure(.wrongClient)
            }
            if let scope, !scope.split(separator: " ").allSatisfy(Set(grant.scope.split(separator: " ")).contains) {
                try db.execute(
                    sql: "UPDATE login_tokens SET used_at = NULL WHERE hash = ?",
                    arguments: [Self.hash(token)]
                )
                return .failure(.widerScope)
            }
            return .success(grant)
        }
        return try outcome.get()
    }

    /// Revokes `grantID` and every token issued from it (its code was replayed, a spent refresh
    /// token of it was used again), and what the token endpoint would still issue from it.
    func revokeGrant(_ grantID: String, now: Double) async throws {
        try await storage.write { db in try Self.revokeGrant(db, grantID, now: now) }
    }

    static func revokeGrant(_ db: any SQLSession, _ grantID: String, now: Double) throws {
        try db.execute(
            sql: """
                INSERT INTO login_grants (grant_id, revoked_at, expires_at) VALUES (?, ?, ?)
                ON CONFLICT (grant_id) DO UPDATE SET revoked_at = excluded.revoked_at
                """,
            arguments: [grantID, now, now + 86400]
        )
        try db.execute(
            sql: "UPDATE login_tokens SET revoked_at = ? WHERE grant_id = ? AND revoked_at IS NULL",
            arguments: [now, grantID]
        )
    }

    // MARK: - Back-channel logouts

    /// A logout waiting for delivery.
    struct LogoutDelivery: Sendable {
        var id: String
        var clientID: String
        var uri: String
        var subject: String
        var sessionID: String
        var attempts: Int
    }

    /// Claims up to `limit` due deliveries for `lease` seconds (another instance skips them
    /// meanwhile) and counts the attempt.
    func claimLogoutDeliveries(now: Double, lease: Double, limit: Int = 20) async throws -> [LogoutDelivery] {
        try await storage.write { db in
            let due = try String.fetchAll(
                db,
                sql:
                    "SELECT id FROM login_logout_deliveries WHERE next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?",
                arguments: [now, limit]
            )
            return try due.compactMap { id in
                try SQLRow.fetchOne(
                    db,
                    sql: """
                        UPDATE login_logout_deliveries SET next_attempt_at = ?, attempts = attempts + 1
                        WHERE id = ? AND next_attempt_at <= ?
                        RETURNING id, client_id, uri, subject, session_id, attempts
                        """,
                    arguments: [now + lease, id, now]
                ).map {
                    LogoutDelivery(
                        id: $0["id"],
                        clientID: $0["client_id"],
                        uri: $0["uri"],
                        subject: $0["subject"],
                        sessionID: $0["session_id"],
                        attempts: $0["attempts"]
                    )
                }
            }
        }
    }

    /// The delivery is done (or given up): it is forgotten.
    func finishLogoutDelivery(_ id: String) async throws {
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_logout_deliveries WHERE id = ?", arguments: [id])
        }
    }

    /// The delivery failed: tried again at `at`.
    func retryLogoutDelivery(_ id: String, at: Double) async throws {
        try await storage.write { db in
            try db.execute(
                sql: "UPDATE login_logout_deliveries SET next_attempt_at = ? WHERE id = ?",
                arguments: [at, id]
            )
        }
    }

    /// Deliveries not yet done, for operators and tests.
    func pendingLogoutDeliveries() async throws -> Int {
        try await storage.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM login_logout_deliveries") ?? 0
        }
    }

    // MARK: - Secrets

    /// The server-wide secret `name` (32 random bytes made once; every instance reads the same).
    func secret(_ name: String) async throws -> Data {
        let candidate = Data.random(count: 32)
        return try await storage.write { db in
            try db.execute(
                sql: "INSERT INTO login_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                arguments: [name, candidate]
            )
            return try Data.fetchOne(db, sql: "SELECT value FROM login_secrets WHERE name = ?", arguments: [name])
                ?? candidate
        }
    }
}
