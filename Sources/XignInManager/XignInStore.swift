import Foundation
import GRDB
import GatehouseProtocol

/// The XignIn manager's state: accounts, their activation codes and the PIN evaluations in
/// between. The one owner of the schema and of every change: each change is a named method that
/// runs one transaction, keeps its invariants and returns what happened; the endpoints turn
/// outcomes into HTTP. Dates are seconds since 1970; activation codes are kept only as SHA-256
/// hashes.
///
/// Every statement is written so that it stays exact when several callers run it at once: a
/// single-use row is claimed by the statement that deletes or changes it, never by a read
/// before it.
final class XignInStore: Sendable {
    /// Used by this type's extensions only: no SQL outside the store.
    let pool: DatabasePool

    /// Seconds a registration's PIN evaluation stays usable.
    static let pinKeyLifetime = 600.0
    /// Seconds an activation attempt (the evaluation of the PIN for a code) stays usable.
    static let activationAttemptLifetime = 300.0

    /// The store in the SQLite file at `path`, created and migrated when needed. A file that
    /// cannot be opened is a ``DatabaseFailure`` naming it.
    init(sqlitePath path: String) throws {
        var database = Configuration()
        database.label = "gatehouse.xignin"
        database.busyMode = .timeout(10)
        do {
            try PrivateFiles.prepareDatabase(at: path)
            pool = try DatabasePool(path: path, configuration: database)
            try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
            try Self.migrator.migrate(pool)
        } catch {
            throw DatabaseFailure.sqlite(path, .opening, error)
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "accounts") { table in
                table.primaryKey("id", .text)
                table.column("email", .text).unique()
                table.column("category", .text).notNull()
                table.column("attributes", .blob).notNull()
                table.column("oprf_key", .blob).notNull()
                table.column("pin_public_key", .blob).notNull()
                table.column("service_mapping", .text)
                table.column("created_at", .double).notNull()
            }
            try db.create(table: "pin_keys") { table in
                table.primaryKey("token", .text)
                table.column("oprf_key", .blob).notNull()
                table.column("expires_at", .double).notNull()
            }
            try db.create(table: "activation_codes") { table in
                table.column("code_hash", .blob).primaryKey()
                table.column("account_id", .text).notNull().references("accounts", onDelete: .cascade)
                table.column("alias", .text).notNull()
                table.column("attempts", .integer).notNull().defaults(to: 0)
                table.column("used", .boolean).notNull().defaults(to: false)
                table.column("expires_at", .double).notNull()
            }
            try db.create(table: "activation_attempts") { table in
                table.primaryKey("token", .text)
                table.column("code_hash", .blob).notNull()
                table.column("nonce", .blob).notNull()
                table.column("expires_at", .double).notNull()
            }
            try db.create(table: "activations") { table in
                table.primaryKey("id", .text)
                table.column("account_id", .text).notNull().references("accounts", onDelete: .cascade).indexed()
                table.column("alias", .text).notNull()
                table.column("created_at", .double).notNull()
            }
            try db.create(table: "pending_attributes") { table in
                table.primaryKey("account_id", .text).references("accounts", onDelete: .cascade)
                table.column("data", .blob).notNull()
            }
        }
        return migrator
    }

    // MARK: - PIN evaluations

    /// Keeps a registration's fresh OPRF key under `token` until the registration claims it;
    /// lapsed ones go as new ones come.
    func keepPinKey(_ key: Data, token: String, now: Double) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM pin_keys WHERE expires_at < ?", arguments: [now])
            try db.execute(
                sql: "INSERT INTO pin_keys (token, oprf_key, expires_at) VALUES (?, ?, ?)",
                arguments: [token, key, now + Self.pinKeyLifetime]
            )
        }
    }

    /// What an activation code allows before its PIN is evaluated.
    enum ActivationKeyLookup: Sendable, Equatable {
        /// The account's OPRF key, to evaluate the PIN with.
        case key(Data)
        /// No such code, or it was used or lapsed.
        case invalid
        /// Too many PINs were evaluated for it.
        case locked
    }

    /// The OPRF key of the account `codeHash` activates; counts nothing.
    func activationKey(codeHash: Data, maximumAttempts: Int, now: Double) async throws -> ActivationKeyLookup {
        try await pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT accounts.oprf_key, activation_codes.attempts FROM activation_codes
                        JOIN accounts ON accounts.id = activation_codes.account_id
                        WHERE code_hash = ? AND used = FALSE AND activation_codes.expires_at > ?
                        """,
                    arguments: [codeHash, now]
                )
            else { return .invalid }
            guard (row["attempts"] as Int) < maximumAttempts else { return .locked }
            return .key(row["oprf_key"])
        }
    }

    /// Counts one evaluation of a PIN for `codeHash` and keeps `nonce` under `token` for the
    /// activation that follows. False, counting nothing, when the code has no attempt left or
    /// was used meanwhile: the count is raised by the statement that checks it, so callers
    /// running at once never get more attempts than `maximumAttempts` between them.
    func reserveActivationAttempt(
        codeHash: Data,
        maximumAttempts: Int,
        token: String,
        nonce: Data,
        now: Double
    ) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE activation_codes SET attempts = attempts + 1
                    WHERE code_hash = ? AND attempts < ? AND used = FALSE
                    """,
                arguments: [codeHash, maximumAttempts]
            )
            guard db.changesCount == 1 else { return false }
            try db.execute(sql: "DELETE FROM activation_attempts WHERE expires_at < ?", arguments: [now])
            try db.execute(
                sql: "INSERT INTO activation_attempts (token, code_hash, nonce, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [token, codeHash, nonce, now + Self.activationAttemptLifetime]
            )
            return true
        }
    }
}
