import GRDB

/// One step of the server's schema, in both dialects side by side: SQLite through GRDB's schema
/// builder, PostgreSQL as statements in its own types (BIGINT, DOUBLE PRECISION, BYTEA,
/// BOOLEAN). Both make the same tables, columns, indexes and keys; `SchemaParityTests` compares
/// what each database reports after all steps.
///
/// A step is never edited once released: a change is a new step at the end of
/// ``ServerSchema/migrations``, under a new identifier, in both dialects.
struct SchemaMigration: Sendable {
    /// The step's name in either database's record of applied steps.
    let identifier: String
    /// The step on SQLite (foreign keys are off while GRDB migrates, so a table can be rebuilt).
    let sqlite: @Sendable (Database) throws -> Void
    /// The step on PostgreSQL, run in order in the migration's transaction.
    let postgres: [String]

    init(_ identifier: String, sqlite: @escaping @Sendable (Database) throws -> Void, postgres: [String]) {
        self.identifier = identifier
        self.sqlite = sqlite
        self.postgres = postgres
    }
}

/// The server's schema: every step, oldest first.
enum ServerSchema {
    static let migrations: [SchemaMigration] = [
        .initial, .flowMachine, .mobileAuth, .oauth, .replayedGrants, .webSessionOrigin, .mobileAuthOTP, .auditTrail,
        .sharedRateLimits, .eventChannelLeases, .hotPathFunctions,
    ]
}
