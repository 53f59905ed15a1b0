import Logging
import PostgresNIO

/// Applies the server's schema (``ServerSchema``) and its extensions' groups on PostgreSQL, step
/// for step under the same names as on SQLite.
///
/// Applied in one transaction under an advisory lock: instances starting together migrate once,
/// and one that starts during an upgrade waits for it. An instance whose database has a
/// migration it does not know (a newer version ran) refuses to start rather than guess.
enum PostgresMigrations {
    /// Any fixed number: with the schema's hash, it names the migration lock among the
    /// database's advisory locks.
    static let lockKey: Int32 = 0x6761_7465

    /// Brings the database to this version's schema; on a pool thread (it waits for answers).
    static func apply(
        on connection: PostgresConnection,
        migrations: [SchemaMigration] = ServerSchema.migrations,
        logger: Logger = Logger(label: "gatehouse.migrations")
    )
        throws
    {
        func run(_ sql: String) throws -> PostgresQueryResult {
            try connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).wait()
        }
        _ = try run("BEGIN")
        do {
            // An instance starting while another migrates waits as long as that takes.
            _ = try run("SET LOCAL lock_timeout = 0")
            _ = try run("SET LOCAL statement_timeout = 0")
            // One lock per schema: deployments in other schemas of the database migrate freely.
            _ = try run("SELECT pg_advisory_xact_lock(\(lockKey), hashtext(current_schema()))")
            _ = try run(
                """
                CREATE TABLE IF NOT EXISTS gatehouse_migrations (identifier TEXT PRIMARY KEY,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now())
                """
            )
            var applied = Set<String>()
            for row in try run("SELECT identifier FROM gatehouse_migrations").rows {
                applied.insert(try row.decode(String.self))
            }
            if let unknown = ServerSchema.unknownStep(applied: applied, known: migrations) {
                throw ServerSchema.newerVersion(unknown)
            }
            for step in migrations where !applied.contains(step.identifier) {
                for statement in step.postgres { _ = try run(statement) }
                // Identifiers are letters, digits, -, _ and / (``MigrationGroup``): no quote to escape.
                _ = try run("INSERT INTO gatehouse_migrations (identifier) VALUES ('\(step.identifier)')")
                logger.info("Migrated the database", metadata: ["migration": "\(step.identifier)"])
            }
            _ = try run("COMMIT")
        } catch {
            _ = try? run("ROLLBACK")
            throw PostgresSession.explained(error)
        }
    }
}
