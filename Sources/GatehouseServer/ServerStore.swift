import Foundation
import GRDB

/// The token server's state in SQLite (WAL, `synchronous=FULL`), behind GRDB. Every multi-step
/// change runs in one transaction. Dates are stored as seconds since 1970 (REAL), tokens only as
/// SHA-256 hashes.
final class ServerStore: Sendable {
    let pool: DatabasePool

    init(path: String) throws {
        var configuration = Configuration()
        configuration.label = "gatehouse.server"
        configuration.busyMode = .timeout(10)
        configuration.foreignKeysEnabled = true
        pool = try DatabasePool(path: path, configuration: configuration)
        // Opening in WAL mode sets synchronous=NORMAL on the writer; tokens and counters need FULL.
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        try Self.migrator.migrate(pool)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "clients") { table in
                table.primaryKey("id", .text)
                table.column("app_id", .text).notNull()
                table.column("key_thumbprint", .text).notNull().unique()
                table.column("created_at", .double).notNull()
            }
            try db.create(table: "profiles") { table in
                table.primaryKey("id", .text)
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("identity_provider", .text).notNull()
                table.column("subject", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("key_thumbprint", .text).notNull()
                table.column("failures", .integer).notNull().defaults(to: 0)
                table.column("created_at", .double).notNull()
                table.uniqueKey(["client_id", "identity_provider", "subject"])
            }
            try db.create(table: "registrations") { table in
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade)
                table.column("authenticator", .text).notNull()
                table.column("data", .blob).notNull()
                table.column("created_at", .double).notNull()
                table.primaryKey(["profile_id", "authenticator"])
            }
            try db.create(table: "flows") { table in
                table.primaryKey("id", .text)
                table.column("kind", .text).notNull()
                table.column("client_id", .text).notNull().references("clients", onDelete: .cascade)
                table.column("profile_id", .text)
                table.column("stage", .text).notNull()
                table.column("plugin", .text).notNull()
                table.column("session", .blob)
                table.column("attempt_reserved", .boolean).notNull().defaults(to: false)
                table.column("identity_provider", .text)
                table.column("scope", .text).notNull()
                table.column("profile_key", .text)
                table.column("subject", .text)
                table.column("key_thumbprint", .text).notNull()
                table.column("version", .integer).notNull().defaults(to: 0)
                table.column("expires_at", .double).notNull().indexed()
            }
            try db.create(table: "families") { table in
                table.primaryKey("id", .text)
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade).indexed()
                table.column("revoked", .boolean).notNull().defaults(to: false)
            }
            try db.create(table: "tokens") { table in
                table.column("hash", .blob).primaryKey()
                table.column("kind", .text).notNull()
                table.column("family", .text).notNull().references("families", onDelete: .cascade).indexed()
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade)
                table.column("key_thumbprint", .text).notNull()
                table.column("scope", .text).notNull()
                table.column("expires_at", .double).notNull()
                table.column("used_at", .double)
                table.column("revoked", .boolean).notNull().defaults(to: false)
            }
            try db.create(table: "dpop_proofs") { table in
                table.primaryKey("jti", .text)
                table.column("expires_at", .double).notNull().indexed()
            }
        }
        return migrator
    }
}
