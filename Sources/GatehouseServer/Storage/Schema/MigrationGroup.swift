import GRDB

/// A server extension's tables: a name and its steps, oldest first, each in both dialects side by
/// side. ``ServerStorage/open(_:migrations:logger:)`` applies them after the server's own schema,
/// and records each step in the same record of applied steps as the server's, as `name/step`.
///
/// A step is never edited once released: a change is a new step at the end, in both dialects.
/// The tables' names should start with the group's name (`login_users`), so no extension's
/// tables collide with another's or the server's.
public struct MigrationGroup: Sendable {
    /// Names the group in the record of applied steps: letters, digits, `-` and `_`.
    public let name: String
    /// The steps, oldest first.
    public let steps: [MigrationStep]

    /// A group of `steps`, oldest first, recorded under `name`.
    public init(_ name: String, steps: [MigrationStep]) {
        self.name = name
        self.steps = steps
    }

    /// Whether the name and the steps' names can be recorded, and no step's name repeats.
    func validated() throws -> MigrationGroup {
        func isName(_ text: String) -> Bool {
            !text.isEmpty && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        }
        guard isName(name) else {
            throw ServerDatabaseError("The migration group \"\(name)\": a group's name is letters, digits, - and _")
        }
        var seen = Set<String>()
        for step in steps {
            guard isName(step.name), seen.insert(step.name).inserted else {
                throw ServerDatabaseError(
                    "The migration group \(name) has a step named \"\(step.name)\" that is empty, repeated, or not "
                        + "letters, digits, - and _"
                )
            }
        }
        return self
    }

    /// The steps as the server's schema runs them, under `name/step`.
    var schemaMigrations: [SchemaMigration] {
        steps.map { step in
            SchemaMigration(
                "\(name)/\(step.name)",
                sqlite: { [statements = step.sqlite] db in
                    for statement in statements { try db.execute(sql: statement) }
                },
                postgres: step.postgres
            )
        }
    }
}

/// One step of a ``MigrationGroup``: the same tables, columns, indexes and keys made in either
/// dialect (SQLite's types: TEXT, INTEGER, DOUBLE, BLOB, BOOLEAN; PostgreSQL's: TEXT, BIGINT,
/// DOUBLE PRECISION, BYTEA, BOOLEAN).
public struct MigrationStep: Sendable {
    /// Names the step within its group.
    public let name: String
    /// The statements on SQLite, in order, in the migration's transaction.
    public let sqlite: [String]
    /// The statements on PostgreSQL, in order, in the migration's transaction.
    public let postgres: [String]

    /// A step named `name`, as `sqlite` on SQLite and `postgres` on PostgreSQL.
    public init(_ name: String, sqlite: [String], postgres: [String]) {
        self.name = name
        self.sqlite = sqlite
        self.postgres = postgres
    }
}

extension ServerSchema {
    /// The server's schema, then each group's steps.
    static func migrations(with groups: [MigrationGroup]) -> [SchemaMigration] {
        migrations + groups.flatMap(\.schemaMigrations)
    }

    /// The first applied step this version cannot know of: one of the server's own or of a group
    /// it migrates that is not among `known` (a newer version ran). Steps of groups this start
    /// does not migrate belong to extensions it does not mount, and are left alone.
    static func unknownStep(applied: Set<String>, known: [SchemaMigration]) -> String? {
        let knownIdentifiers = Set(known.map(\.identifier))
        let knownGroups = Set(knownIdentifiers.compactMap { id in id.firstIndex(of: "/").map { String(id[..<$0]) } })
        return applied.subtracting(knownIdentifiers).sorted().first { identifier in
            guard let slash = identifier.firstIndex(of: "/") else { return true }
            return knownGroups.contains(String(identifier[..<slash]))
        }
    }

    /// Why a database with `step` applied is refused.
    static func newerVersion(_ step: String) -> ServerDatabaseError {
        ServerDatabaseError(
            "The database has migration \(step), which this version does not know: a newer Gatehouse migrated it. "
                + "Run that version (or newer) instead."
        )
    }
}
