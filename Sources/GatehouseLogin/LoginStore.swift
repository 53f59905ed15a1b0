import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
public import GatehouseServer

/// The hosted login's state, in the token server's database (`ServerStorage`): the user
/// directory, authorizations waiting on the login page, and authorization codes. Secrets (CSRF
/// tokens, codes) are kept only as SHA-256 hashes, passwords only as scrypt hashes. Each change is
/// one transaction, exact when several instances share a PostgreSQL database at READ COMMITTED:
/// what a change decides from a row, it decides in the statement that changes the row (a
/// conditional UPDATE, an upsert, a DELETE … RETURNING), so two instances acting on one row at
/// once are serialised by its lock and the second sees the first's outcome.
public final class LoginStore: Sendable {
    let storage: ServerStorage

    /// The login's store on `storage`, which must have been opened with ``migrations``.
    public init(storage: ServerStorage) throws {
        try storage.requireMigrated(Self.migrations)
        self.storage = storage
    }

    static func hash(_ secret: String) -> Data { Data(SHA256.hash(data: Data(secret.utf8))) }

    // MARK: - Users

    /// A directory entry: usernames are compared in Unicode NFC, lowercased and trimmed, so
    /// look-alike spellings of one name are one user.
    public static func normalized(_ username: String) -> String {
        username.precomposedStringWithCanonicalMapping.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }

    /// Why a user was not added.
    public enum UserError: Error, Equatable, Sendable {
        /// The directory has the username already.
        case exists
        /// The normalized username is empty, over 254 bytes, or holds a NUL.
        case invalidUsername
    }

    /// Adds a user with an already computed password hash (hashing is CPU work for the caller to
    /// place off the event loop).
    public func addUser(_ username: String, passwordHash: String, now: Double) async throws {
        let name = Self.normalized(username)
        guard (1...254).contains(name.utf8.count), !name.utf8.contains(0) else { throw UserError.invalidUsername }
        try await storage.write { db in
            do {
                try db.execute(
                    sql: "INSERT INTO login_users (username, password_hash, created_at) VALUES (?, ?, ?)",
                    arguments: [name, passwordHash, now]
                )
            } catch is UniqueConstraintViolation {
                throw UserError.exists
            }
        }
    }

    /// The directory's usernames, sorted.
    public func usernames() async throws -> [String] {
        try await storage.read { db in
            try String.fetchAll(db, sql: "SELECT username FROM login_users ORDER BY username")
        }
    }

    /// Adds the users of the login's own SQLite file from before it moved into the server's
    /// database (their password hashes as they were); a user already there is kept as it is.
    /// Returns how many were added.
    public func importUsers(fromEarlierFile path: String) async throws -> Int {
        let users = try ServerStorage.readEarlierSQLiteFile(at: path) { db in
            try SQLRow.fetchAll(db, sql: "SELECT username, password_hash, created_at FROM users")
        }
        return try await storage.write { db in
            var added = 0
            for user in users {
                try db.execute(
                    sql: """
                        INSERT INTO login_users (username, password_hash, created_at) VALUES (?, ?, ?)
                        ON CONFLICT (username) DO NOTHING
                        """,
                    arguments: [
                        user["username"] as String, user["password_hash"] as String, user["created_at"] as Double,
                    ]
                )
                added += db.changesCount
            }
            return added
        }
    }

    // MARK: - Authorizations (the login page)

    /// A validated authorization request, waiting for the user on the login page.
    public struct AuthorizationRequest: Sendable, Equatable {
        /// The client (one of the login's configured clients).
        public var clientID: String
        /// Where the browser goes back to, registered for the client.
        public var redirectURI: String
        /// The client's `state`, sent back with the code.
        public var state: String
        /// The PKCE S256 challenge the code's redeemer must answer.
        public var codeChallenge: String
        /// The scopes asked for, space-separated.
        public var scope: String
        /// OpenID Connect: the client's nonce, echoed in the ID token.
        public var nonce: String?
        /// OpenID Connect: `prompt=consent` asked for the consent page whatever was allowed before.
        public var forceConsent: Bool
        /// OpenID Connect: the `acr_values` asked for, most preferred first; the sign-in must
        /// produce one of them.
        public var acrValues: [String]

        /// A request with these fields, validated by the authorization endpoint.
        public init(
            clientID: String,
            redirectURI: String,
            state: String,
            codeChallenge: String,
            scope: String,
            nonce: String? = nil,
            forceConsent: Bool = false,
            acrValues: [String] = []
        ) {
            self.acrValues = acrValues
            self.clientID = clientID
            self.redirectURI = redirectURI
            self.state = state
            self.codeChallenge = codeChallenge
            self.scope = scope
            self.nonce = nonce
            self.forceConsent = forceConsent
        }

        /// What the `details` column keeps.
        struct Extras: Codable {
            var nonce: String?
            var forceConsent: Bool?
            var acrValues: [String]?
        }
    }

    /// Keeps `request` until `expiresAt`; returns its id and the CSRF token the page must send back.
    public func beginAuthorization(
        _ request: AuthorizationRequest,
        expiresAt: Double,
        now: Double
    ) async throws -> (id: String, csrf: String) {
        let id = Data.random(count: 18).base64URLEncodedString
        let csrf = Data.random(count: 24).base64URLEncodedString
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_authorizations WHERE expires_at < ?", arguments: [now])
            try db.execute(
                sql: """
                    INSERT INTO login_authorizations (id, client_id, redirect_uri, state, code_challenge, scope,
                        csrf_hash, expires_at, details)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    id, request.clientID, request.redirectURI, request.state, request.codeChallenge, request.scope,
                    Self.hash(csrf), expiresAt,
                    String(
                        decoding: try JSONEncoder().encode(
                            AuthorizationRequest.Extras(
                                nonce: request.nonce,
                                forceConsent: request.forceConsent,
                                acrValues: request.acrValues.isEmpty ? nil : request.acrValues
                            )
                        ),
                        as: UTF8.self
                    ),
                ]
            )
        }
        return (id, csrf)
    }

    /// The waiting authorization `id`, if `csrf` is its token and it has not expired.
    public func authorization(_ id: String, csrf: String, now: Double) async throws -> (AuthorizationRequest, String?)?
    {
        let row = try await storage.read { db in
            try SQLRow.fetchOne(
                db,
                sql: "SELECT * FROM login_authorizations WHERE id = ? AND expires_at > ?",
                arguments: [id, now]
            )
        }
        guard let row, ConstantTime.equals(Self.hash(csrf), row["csrf_hash"] as Data) else { return nil }
        let extras = (row["details"] as String?).flatMap {
            try? JSONDecoder().decode(AuthorizationRequest.Extras.self, from: Data($0.utf8))
        }
        return (
            AuthorizationRequest(
                clientID: row["client_id"],
                redirectURI: row["redirect_uri"],
                state: row["state"],
                codeChallenge: row["code_challenge"],
                scope: row["scope"],
                nonce: extras?.nonce,
                forceConsent: extras?.forceConsent ?? false,
                acrValues: extras?.acrValues ?? []
            ),
            row["subject"]
        )
    }

    // MARK: - Passwords, counted before they are checked

    /// What a sign-in attempt may do next, its count already taken.
    public enum LoginAttempt: Sendable, Equatable {
        /// Check the password against this hash; the attempt is already counted.
        case check(passwordHash: String)
        /// The username is locked until this time (seconds since 1970); nothing is checked.
        case locked(until: Double)
        /// No such user. Checked against a dummy hash all the same, so timing reveals nothing.
        case unknownUser
    }

    /// Counts an attempt for `username` before its password is checked, so concurrent guesses
    /// can never exceed the limit, whichever instances they reach; at the limit the account locks.
    public func beginLogin(
        _ username: String,
        maxFailures: Int,
        lockout: Double,
        now: Double
    ) async throws -> LoginAttempt {
        let name = Self.normalized(username)
        return try await storage.write { db in
            // Counts nobody added to in a day are forgotten; a lock lasts at most a day.
            try db.execute(sql: "DELETE FROM login_attempts WHERE updated_at < ?", arguments: [now - 86400])
            // One statement counts and locks: on PostgreSQL a second attempt at the same username
            // waits for the first one's row and counts on from its outcome. A lock that ran out
            // starts the count again; a lock still running is left as it is (no row answered).
            let counted = try SQLRow.fetchOne(
                db,
                sql: """
                    INSERT INTO login_attempts (username, failed_logins, locked_until, updated_at)
                    VALUES (?, 1, CASE WHEN 1 >= ? THEN ? END, ?)
                    ON CONFLICT (username) DO UPDATE SET
                        failed_logins = CASE WHEN login_attempts.locked_until IS NULL
                            THEN login_attempts.failed_logins + 1 ELSE 1 END,
                        locked_until = CASE WHEN (CASE WHEN login_attempts.locked_until IS NULL
                            THEN login_attempts.failed_logins + 1 ELSE 1 END) >= ? THEN ? END,
                        updated_at = excluded.updated_at
                    WHERE login_attempts.locked_until IS NULL OR login_attempts.locked_until <= ?
                    RETURNING failed_logins
                    """,
                arguments: [name, maxFailures, now + lockout, now, maxFailures, now + lockout, now]
            )
            guard counted != nil else {
                let until = try Double.fetchOne(
                    db,
                    sql: "SELECT locked_until FROM login_attempts WHERE username = ?",
                    arguments: [name]
                )
                return .locked(until: until ?? now)
            }
            guard
                let hash = try String.fetchOne(
                    db,
                    sql: "SELECT password_hash FROM login_users WHERE username = ?",
                    arguments: [name]
                )
            else { return .unknownUser }
            return .check(passwordHash: hash)
        }
    }

    /// The password was right: the count starts again and the lock (if this attempt set it) goes.
    public func loginSucceeded(_ username: String) async throws {
        try await storage.write { db in
            try db.execute(
                sql: "DELETE FROM login_attempts WHERE username = ?",
                arguments: [Self.normalized(username)]
            )
        }
    }

    /// Records the user on a waiting authorization (the consent page comes next).
    public func authenticated(_ id: String, subject: String) async throws {
        try await storage.write { db in
            try db.execute(sql: "UPDATE login_authorizations SET subject = ? WHERE id = ?", arguments: [subject, id])
        }
    }

    /// Forgets a waiting authorization (the user denied it).
    public func cancelAuthorization(_ id: String) async throws {
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_authorizations WHERE id = ?", arguments: [id])
        }
    }

    // MARK: - Codes

    /// Ends the waiting authorization `id` with a single-use code for `subject`; returns the code.
    /// Only one of two requests ending the same authorization at once gets a code.
    public func issueCode(authorization id: String, subject: String, expiresAt: Double) async throws -> String? {
        try await issueCode(authorization: id, subject: subject, details: nil, expiresAt: expiresAt)
    }

    /// `issueCode(authorization:subject:expiresAt:)` with what the ID token will need.
    func issueCode(
        authorization id: String,
        subject: String,
        details: GrantDetails?,
        expiresAt: Double
    ) async throws -> String? {
        let code = Data.random(count: 32).base64URLEncodedString
        let issued: Bool = try await storage.write { db in
            // Taken in the statement that removes it: a second request finds it gone.
            guard
                let row = try SQLRow.fetchOne(
                    db,
                    sql: "DELETE FROM login_authorizations WHERE id = ? RETURNING client_id, redirect_uri, "
                        + "code_challenge, scope",
                    arguments: [id]
                )
            else { return false }
            try db.execute(
                sql: """
                    INSERT INTO login_codes (hash, client_id, redirect_uri, code_challenge, subject, scope, expires_at,
                        details)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Self.hash(code), row["client_id"] as String, row["redirect_uri"] as String,
                    row["code_challenge"] as String, subject, row["scope"] as String, expiresAt, details?.json,
                ]
            )
            return true
        }
        return issued ? code : nil
    }

    /// Why a code was not redeemed (all are OAuth `invalid_grant`).
    public enum RedemptionError: Error, Equatable, Sendable {
        /// No such code was issued (or it was swept a day after it expired).
        case unknown
        /// The code expired before it was redeemed.
        case expired
        /// Used before: whatever it issued must be revoked (RFC 9700 §4.5).
        case replayed(subject: String)
        /// Another client redeemed it.
        case wrongClient
        /// The redirect URI differs from the one the code was issued for.
        case wrongRedirect
        /// The PKCE verifier does not answer the code's challenge.
        case wrongVerifier
    }

    /// Redeems `code` once: for the client and redirect it was issued to, with the PKCE verifier
    /// of its challenge, before it expires. Returns the user and the scope. Of two redemptions at
    /// once, on any instances, one spends the code and the other is a replay.
    public func redeem(
        _ code: String,
        clientID: String,
        redirectURI: String,
        verifier: String,
        now: Double
    ) async throws -> (subject: String, scope: String) {
        let redeemed = try await redeemCode(
            code,
            clientID: clientID,
            redirectURI: redirectURI,
            verifier: verifier,
            now: now
        )
        return (redeemed.subject, redeemed.scope)
    }

    /// A redeemed code: its user, scope, OpenID details and the grant id its tokens carry.
    struct RedeemedCode: Sendable {
        var subject: String
        var scope: String
        var details: GrantDetails?
        var grantID: String
    }

    /// The grant id of the tokens a code leads to: a hash of the code's hash, so a replay of the
    /// code finds them.
    static func grantID(ofCode code: String) -> String {
        Data(SHA256.hash(data: hash(code))).prefix(16).base64URLEncodedString
    }

    /// `redeem(_:clientID:redirectURI:verifier:now:)` with the code's OpenID details; a replay also
    /// revokes every token issued from the code (RFC 9700 §4.5).
    func redeemCode(
        _ code: String,
        clientID: String,
        redirectURI: String,
        verifier: String,
        now: Double
    ) async throws -> RedeemedCode {
        let grantID = Self.grantID(ofCode: code)
        let result: Result<RedeemedCode, RedemptionError> = try await storage.write { db in
            try db.execute(sql: "DELETE FROM login_codes WHERE expires_at < ?", arguments: [now - 86400])
            // Spent by this attempt whatever its outcome: a code gets one try. Spent in the
            // statement that checks it is unspent, so only one redemption can.
            guard
                let row = try SQLRow.fetchOne(
                    db,
                    sql: """
                        UPDATE login_codes SET used_at = ? WHERE hash = ? AND used_at IS NULL
                        RETURNING client_id, redirect_uri, code_challenge, subject, scope, expires_at, details
                        """,
                    arguments: [now, Self.hash(code)]
                )
            else {
                guard
                    let subject = try String.fetchOne(
                        db,
                        sql: "SELECT subject FROM login_codes WHERE hash = ?",
                        arguments: [Self.hash(code)]
                    )
                else { return .failure(.unknown) }
                try Self.revokeGrant(db, grantID, now: now)
                return .failure(.replayed(subject: subject))
            }
            guard (row["expires_at"] as Double) > now else { return .failure(.expired) }
            // Compared byte for byte: Swift's == treats canonically equivalent texts as equal.
            guard (row["client_id"] as String).utf8.elementsEqual(clientID.utf8) else { return .failure(.wrongClient) }
            guard (row["redirect_uri"] as String).utf8.elementsEqual(redirectURI.utf8) else {
                return .failure(.wrongRedirect)
            }
            guard PKCE.verify(verifier, against: row["code_challenge"]) else { return .failure(.wrongVerifier) }
            // The grant's row: what revokes it (a replay of the code) and what issues from it
            // (the token endpoint) meet there, one after the other.
            try db.execute(
                sql: "INSERT INTO login_grants (grant_id, expires_at) VALUES (?, ?) ON CONFLICT (grant_id) DO NOTHING",
                arguments: [grantID, now + 86400]
            )
            return .success(
                RedeemedCode(
                    subject: row["subject"],
                    scope: row["scope"],
                    details: GrantDetails.read(row["details"]),
                    grantID: grantID
                )
            )
        }
        return try result.get()
    }
}
