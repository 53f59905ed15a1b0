import Crypto
import Foundation
import GRDB
import GatehouseKernel
import GatehouseProtocol

/// The hosted login's state in its own SQLite file: the user directory, authorizations waiting on
/// the login page, and authorization codes. Secrets (CSRF tokens, codes) are kept only as SHA-256
/// hashes, passwords only as scrypt hashes. Each change is one transaction.
public final class LoginStore: Sendable {
    let pool: DatabasePool

    public init(path: String) throws {
        var configuration = Configuration()
        configuration.label = "gatehouse.login"
        configuration.busyMode = .timeout(10)
        try PrivateFiles.prepareDatabase(at: path)
        pool = try DatabasePool(path: path, configuration: configuration)
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "users") { table in
                table.primaryKey("username", .text)
                table.column("password_hash", .text).notNull()
                // Attempts since the last success, counted before a password is checked.
                table.column("failed_logins", .integer).notNull().defaults(to: 0)
                table.column("locked_until", .double)
                table.column("created_at", .double).notNull()
            }
            try db.create(table: "authorizations") { table in
                table.primaryKey("id", .text)
                table.column("client_id", .text).notNull()
                table.column("redirect_uri", .text).notNull()
                table.column("state", .text).notNull()
                table.column("code_challenge", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("csrf_hash", .blob).notNull()
                // Set once the password was right, while the consent page waits.
                table.column("subject", .text)
                table.column("expires_at", .double).notNull().indexed()
            }
            try db.create(table: "codes") { table in
                table.primaryKey("hash", .blob)
                table.column("client_id", .text).notNull()
                table.column("redirect_uri", .text).notNull()
                table.column("code_challenge", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("expires_at", .double).notNull().indexed()
                table.column("used_at", .double)
            }
        }
        // Failed sign-ins are counted per username whether or not the user exists, so an
        // unknown username locks exactly as a known one does and the lock tells nothing.
        migrator.registerMigration("v2-attempts") { db in
            try db.create(table: "attempts") { table in
                table.primaryKey("username", .text)
                table.column("failed_logins", .integer).notNull()
                table.column("locked_until", .double)
                table.column("updated_at", .double).notNull().indexed()
            }
            try db.execute(
                sql: """
                    INSERT INTO attempts (username, failed_logins, locked_until, updated_at)
                    SELECT username, failed_logins, locked_until, created_at FROM users WHERE failed_logins > 0
                    """
            )
        }
        try migrator.migrate(pool)
    }

    static func hash(_ secret: String) -> Data { Data(SHA256.hash(data: Data(secret.utf8))) }

    // MARK: - Users

    /// A directory entry: usernames are compared in Unicode NFC, lowercased and trimmed, so
    /// look-alike spellings of one name are one user.
    public static func normalized(_ username: String) -> String {
        username.precomposedStringWithCanonicalMapping.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }

    public enum UserError: Error, Equatable, Sendable {
        case exists, invalidUsername
    }

    /// Adds a user with an already computed password hash (hashing is CPU work for the caller to
    /// place off the event loop).
    public func addUser(_ username: String, passwordHash: String, now: Double) async throws {
        let name = Self.normalized(username)
        guard (1...254).contains(name.utf8.count), !name.utf8.contains(0) else { throw UserError.invalidUsername }
        try await pool.write { db in
            do {
                try db.execute(
                    sql: "INSERT INTO users (username, password_hash, created_at) VALUES (?, ?, ?)",
                    arguments: [name, passwordHash, now]
                )
            } catch DatabaseError.SQLITE_CONSTRAINT_PRIMARYKEY {
                throw UserError.exists
            }
        }
    }

    public func usernames() async throws -> [String] {
        try await pool.read { db in try String.fetchAll(db, sql: "SELECT username FROM users ORDER BY username") }
    }

    // MARK: - Authorizations (the login page)

    /// A validated authorization request, waiting for the user on the login page.
    public struct AuthorizationRequest: Sendable, Equatable {
        public var clientID: String
        public var redirectURI: String
        public var state: String
        public var codeChallenge: String
        public var scope: String

        public init(clientID: String, redirectURI: String, state: String, codeChallenge: String, scope: String) {
            self.clientID = clientID
            self.redirectURI = redirectURI
            self.state = state
            self.codeChallenge = codeChallenge
            self.scope = scope
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
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM authorizations WHERE expires_at < ?", arguments: [now])
            try db.execute(
                sql: """
                    INSERT INTO authorizations (id, client_id, redirect_uri, state, code_challenge, scope, csrf_hash,
                        expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    id, request.clientID, request.redirectURI, request.state, request.codeChallenge, request.scope,
                    Self.hash(csrf), expiresAt,
                ]
            )
        }
        return (id, csrf)
    }

    /// The waiting authorization `id`, if `csrf` is its token and it has not expired.
    public func authorization(_ id: String, csrf: String, now: Double) async throws -> (AuthorizationRequest, String?)?
    {
        try await pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT * FROM authorizations WHERE id = ? AND expires_at > ?",
                    arguments: [id, now]
                ), ConstantTime.equals(Self.hash(csrf), row["csrf_hash"] as Data)
            else { return nil }
            return (
                AuthorizationRequest(
                    clientID: row["client_id"],
                    redirectURI: row["redirect_uri"],
                    state: row["state"],
                    codeChallenge: row["code_challenge"],
                    scope: row["scope"]
                ),
                row["subject"]
            )
        }
    }

    // MARK: - Passwords, counted before they are checked

    public enum LoginAttempt: Sendable, Equatable {
        /// Check the password against this hash; the attempt is already counted.
        case check(passwordHash: String)
        case locked(until: Double)
        /// No such user. Checked against a dummy hash all the same, so timing reveals nothing.
        case unknownUser
    }

    /// Counts an attempt for `username` before its password is checked, so concurrent guesses
    /// can never exceed the limit; at the limit the account locks.
    public func beginLogin(
        _ username: String,
        maxFailures: Int,
        lockout: Double,
        now: Double
    ) async throws -> LoginAttempt {
        let name = Self.normalized(username)
        return try await pool.write { db in
            // Counts nobody added to in a day are forgotten; a lock lasts at most a day.
            try db.execute(sql: "DELETE FROM attempts WHERE updated_at < ?", arguments: [now - 86400])
            let attempts = try Row.fetchOne(db, sql: "SELECT * FROM attempts WHERE username = ?", arguments: [name])
            if let until = attempts?["locked_until"] as Double?, until > now { return .locked(until: until) }
            // A lock that ran out starts the count again.
            let counted = (attempts?["locked_until"] as Double?) != nil ? 1 : (attempts?["failed_logins"] ?? 0) + 1
            try db.execute(
                sql: """
                    INSERT INTO attempts (username, failed_logins, locked_until, updated_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT(username) DO UPDATE SET failed_logins = excluded.failed_logins,
                        locked_until = excluded.locked_until, updated_at = excluded.updated_at
                    """,
                arguments: [name, counted, counted >= maxFailures ? now + lockout : nil, now]
            )
            guard
                let hash = try String.fetchOne(
                    db,
                    sql: "SELECT password_hash FROM users WHERE username = ?",
                    arguments: [name]
                )
            else { return .unknownUser }
            return .check(passwordHash: hash)
        }
    }

    /// The password was right: the count starts again and the lock (if this attempt set it) goes.
    public func loginSucceeded(_ username: String) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM attempts WHERE username = ?",
                arguments: [Self.normalized(username)]
            )
        }
    }

    /// Records the user on a waiting authorization (the consent page comes next).
    public func authenticated(_ id: String, subject: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE authorizations SET subject = ? WHERE id = ?", arguments: [subject, id])
        }
    }

    /// Forgets a waiting authorization (the user denied it).
    public func cancelAuthorization(_ id: String) async throws {
        try await pool.write { db in try db.execute(sql: "DELETE FROM authorizations WHERE id = ?", arguments: [id]) }
    }

    // MARK: - Codes

    /// Ends the waiting authorization `id` with a single-use code for `subject`; returns the code.
    public func issueCode(authorization id: String, subject: String, expiresAt: Double) async throws -> String? {
        let code = Data.random(count: 32).base64URLEncodedString
        let issued: Bool = try await pool.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM authorizations WHERE id = ?", arguments: [id])
            else { return false }
            try db.execute(sql: "DELETE FROM authorizations WHERE id = ?", arguments: [id])
            try db.execute(
                sql: """
                    INSERT INTO codes (hash, client_id, redirect_uri, code_challenge, subject, scope, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Self.hash(code), row["client_id"], row["redirect_uri"], row["code_challenge"], subject,
                    row["scope"], expiresAt,
                ]
            )
            return true
        }
        return issued ? code : nil
    }

    /// Why a code was not redeemed (all are OAuth `invalid_grant`).
    public enum RedemptionError: Error, Equatable, Sendable {
        case unknown
        case expired
        /// Used before: whatever it issued must be revoked (RFC 9700 §4.5).
        case replayed(subject: String)
        case wrongClient
        case wrongRedirect
        case wrongVerifier
    }

    /// Redeems `code` once: for the client and redirect it was issued to, with the PKCE verifier
    /// of its challenge, before it expires. Returns the user and the scope.
    public func redeem(
        _ code: String,
        clientID: String,
        redirectURI: String,
        verifier: String,
        now: Double
    ) async throws -> (subject: String, scope: String) {
        let result: Result<(String, String), RedemptionError> = try await pool.write { db in
            try db.execute(sql: "DELETE FROM codes WHERE expires_at < ?", arguments: [now - 86400])
            guard
                let row = try Row.fetchOne(db, sql: "SELECT * FROM codes WHERE hash = ?", arguments: [Self.hash(code)])
            else { return .failure(.unknown) }
            if row["used_at"] as Double? != nil { return .failure(.replayed(subject: row["subject"])) }
            // Spent by this attempt whatever its outcome: a code gets one try.
            try db.execute(sql: "UPDATE codes SET used_at = ? WHERE hash = ?", arguments: [now, Self.hash(code)])
            guard (row["expires_at"] as Double) > now else { return .failure(.expired) }
            guard row["client_id"] == clientID else { return .failure(.wrongClient) }
            guard row["redirect_uri"] == redirectURI else { return .failure(.wrongRedirect) }
            guard PKCE.verify(verifier, against: row["code_challenge"]) else { return .failure(.wrongVerifier) }
            return .success((row["subject"], row["scope"]))
        }
        return try result.get()
    }
}
