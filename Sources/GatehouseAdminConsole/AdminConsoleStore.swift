import Crypto
import Foundation
import GatehouseProtocol
public import GatehouseServer

/// The admin console's state, in the token server's database (`ServerStorage`): sign-ins on
/// their way through the hosted login, operators' sessions, and the secret its forms' tokens are
/// made with. A cookie's value is never stored, only its SHA-256. Each change is one statement or
/// one transaction that decides from a row in the statement that changes it, so several instances
/// on one PostgreSQL database agree.
public final class AdminConsoleStore: Sendable {
    let storage: ServerStorage

    /// The console's tables, to open the server's storage with. A released step is never edited:
    /// a change is a new step at the end of the group.
    public static let migrations = MigrationGroup(
        "admin-console",
        steps: [
            MigrationStep(
                "v1",
                sqlite: [
                    """
                    CREATE TABLE admin_console_signins (id_hash BLOB NOT NULL PRIMARY KEY, request TEXT NOT NULL,
                        expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX admin_console_signins_expires_at ON admin_console_signins (expires_at)",
                    """
                    CREATE TABLE admin_console_sessions (id_hash BLOB NOT NULL PRIMARY KEY, subject TEXT NOT NULL,
                        acr TEXT NOT NULL, amr TEXT NOT NULL, created_at DOUBLE NOT NULL,
                        last_seen_at DOUBLE NOT NULL, expires_at DOUBLE NOT NULL)
                    """,
                    "CREATE INDEX admin_console_sessions_expires_at ON admin_console_sessions (expires_at)",
                    "CREATE INDEX admin_console_sessions_last_seen_at ON admin_console_sessions (last_seen_at)",
                    "CREATE TABLE admin_console_secrets (name TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL)",
                ],
                postgres: [
                    """
                    CREATE TABLE admin_console_signins (id_hash BYTEA NOT NULL PRIMARY KEY, request TEXT NOT NULL,
                        expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX admin_console_signins_expires_at ON admin_console_signins (expires_at)",
                    """
                    CREATE TABLE admin_console_sessions (id_hash BYTEA NOT NULL PRIMARY KEY, subject TEXT NOT NULL,
                        acr TEXT NOT NULL, amr TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
                        last_seen_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION NOT NULL)
                    """,
                    "CREATE INDEX admin_console_sessions_expires_at ON admin_console_sessions (expires_at)",
                    "CREATE INDEX admin_console_sessions_last_seen_at ON admin_console_sessions (last_seen_at)",
                    "CREATE TABLE admin_console_secrets (name TEXT NOT NULL PRIMARY KEY, value BYTEA NOT NULL)",
                ]
            )
        ]
    )

    /// The console's store on `storage`, which must have been opened with ``migrations``.
    public init(storage: ServerStorage) throws {
        try storage.requireMigrated(Self.migrations)
        self.storage = storage
    }

    static func hash(_ cookie: String) -> Data { Data(SHA256.hash(data: Data(cookie.utf8))) }

    // MARK: - Sign-ins

    /// Keeps a sign-in under way (the relying party's request: state, nonce, PKCE verifier) until
    /// `expiresAt`; returns the random value its cookie carries. Sign-ins past their time go.
    func beginSignIn(_ request: String, expiresAt: Double, now: Double) async throws -> String {
        let cookie = Data.random(count: 32).base64URLEncodedString
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM admin_console_signins WHERE expires_at < ?", arguments: [now])
            try db.execute(
                sql: "INSERT INTO admin_console_signins (id_hash, request, expires_at) VALUES (?, ?, ?)",
                arguments: [Self.hash(cookie), request, expiresAt]
            )
        }
        return cookie
    }

    /// Takes the sign-in `cookie` names, once: nil when it is unknown, taken or past its time.
    func takeSignIn(cookie: String, now: Double) async throws -> String? {
        try await storage.write { db in
            guard
                let row = try SQLRow.fetchOne(
                    db,
                    sql: "DELETE FROM admin_console_signins WHERE id_hash = ? RETURNING request, expires_at",
                    arguments: [Self.hash(cookie)]
                ), (row["expires_at"] as Double) > now
            else { return nil }
            return row["request"] as String
        }
    }

    // MARK: - Sessions

    /// An operator's console session, as a request finds it.
    struct Session: Sendable, Equatable {
        /// The SHA-256 of the cookie's value: what the forms' tokens are bound to.
        var idHash: Data
        /// The operator's subject at the hosted login.
        var subject: String
        /// How they signed in.
        var acr: String
        var amr: [String]
        var createdAt: Double
        var expiresAt: Double
    }

    /// Starts a session for `subject` until `expiresAt` at the latest, in the transaction that
    /// also runs `alongside` (the sign-in's audit event); returns the cookie's value. Sessions
    /// that ended by either lifetime go.
    func startSession(
        subject: String,
        acr: String,
        amr: [String],
        expiresAt: Double,
        idleTimeout: Double,
        now: Double,
        alongside: @escaping @Sendable (any SQLSession) throws -> Void
    ) async throws -> String {
        let cookie = Data.random(count: 32).base64URLEncodedString
        try await storage.write { db in
            try alongside(db)
            try db.execute(
                sql: "DELETE FROM admin_console_sessions WHERE expires_at < ? OR last_seen_at < ?",
                arguments: [now, now - idleTimeout]
            )
            try db.execute(
                sql: """
                    INSERT INTO admin_console_sessions (id_hash, subject, acr, amr, created_at, last_seen_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [Self.hash(cookie), subject, acr, amr.joined(separator: " "), now, now, expiresAt]
            )
        }
        return cookie
    }

    /// The live session `cookie` names, its idle time starting again: nil when there is none,
    /// or it was idle longer than `idleTimeout` or is past its absolute end.
    func touchSession(cookie: String, idleTimeout: Double, now: Double) async throws -> Session? {
        try await storage.write { db in
            try SQLRow.fetchOne(
                db,
                sql: """
                    UPDATE admin_console_sessions SET last_seen_at = ?
                    WHERE id_hash = ? AND expires_at > ? AND last_seen_at >= ?
                    RETURNING id_hash, subject, acr, amr, created_at, expires_at
                    """,
                arguments: [now, Self.hash(cookie), now, now - idleTimeout]
            ).map { row in
                Session(
                    idHash: row["id_hash"],
                    subject: row["subject"],
                    acr: row["acr"],
                    amr: (row["amr"] as String).split(separator: " ").map(String.init),
                    createdAt: row["created_at"],
                    expiresAt: row["expires_at"]
                )
            }
        }
    }

    /// Ends the session `cookie` names (signing out); whether there was one.
    @discardableResult
    func endSession(cookie: String) async throws -> Bool {
        try await storage.write { db in
            try db.execute(sql: "DELETE FROM admin_console_sessions WHERE id_hash = ?", arguments: [Self.hash(cookie)])
            return db.changesCount > 0
        }
    }

    /// How many sessions are live now, for tests and operators.
    func liveSessions(idleTimeout: Double, now: Double) async throws -> Int {
        try await storage.read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT COUNT(*) FROM admin_console_sessions WHERE expires_at > ? AND last_seen_at >= ?",
                arguments: [now, now - idleTimeout]
            ) ?? 0
        }
    }

    // MARK: - Secrets

    /// The console-wide secret `name` (32 random bytes made once; every instance reads the same).
    func secret(_ name: String) async throws -> Data {
        let candidate = Data.random(count: 32)
        return try await storage.write { db in
            try db.execute(
                sql: "INSERT INTO admin_console_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                arguments: [name, candidate]
            )
            return try Data.fetchOne(
                db,
                sql: "SELECT value FROM admin_console_secrets WHERE name = ?",
                arguments: [name]
            )
                ?? candidate
        }
    }
}
