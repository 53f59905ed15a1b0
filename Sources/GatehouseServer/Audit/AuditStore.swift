import Foundation

// The audit trail's table: events are appended in the transaction of the change they record, so
// an event is stored exactly when its change is; they go only by the retention sweep.

extension ServerStore {
    /// Appends `entries` inside the caller's transaction.
    func appendAudit(_ entries: [AuditEntry], now: Double, _ db: any SQLSession) throws {
        for entry in entries {
            try db.execute(
                sql: """
                    INSERT INTO audit_events (at, event, actor, identity_provider, subject, profile_id, detail)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    now, entry.event.rawValue, entry.actor.description, entry.identityProvider, entry.subject,
                    entry.profileID, Self.encodeDetail(entry.detail),
                ]
            )
        }
    }

    /// Appends `entries` in a change of their own: for events that change nothing else.
    func appendAudit(_ entries: [AuditEntry], now: Double) async throws {
        guard !entries.isEmpty else { return }
        try await write { db in try self.appendAudit(entries, now: now, db) }
    }

    /// Appends one event about `profileID` (with its owner, read first) inside the caller's
    /// transaction; call it before a change that removes the profile.
    func auditProfileEvent(
        _ event: AuditEvent,
        _ profileID: String,
        actor: AdminActor,
        detail: [String: String] = [:],
        now: Double,
        _ db: any SQLSession
    ) throws {
        let owner = try profileOwner(profileID, db)
        try appendAudit(
            [
                AuditEntry(
                    event: event,
                    actor: actor,
                    identityProvider: owner?.identityProvider,
                    subject: owner?.subject,
                    profileID: profileID,
                    detail: detail
                )
            ],
            now: now,
            db
        )
    }

    /// The user a profile belongs to, for an event about it; nil when it is gone.
    func profileOwner(_ profileID: String, _ db: any SQLSession) throws -> (identityProvider: String, subject: String)?
    {
        guard
            let row = try SQLRow.fetchOne(
                db,
                sql: "SELECT identity_provider, subject FROM profiles WHERE id = ?",
                arguments: [profileID]
            )
        else { return nil }
        return (row["identity_provider"], row["subject"])
    }

    /// The events `query` selects, newest first, and the cursor of the next page.
    func auditEvents(_ query: AuditQuery) async throws -> AuditPage {
        let (condition, arguments) = Self.auditCondition(query)
        let rows = try await lookup { db in
            try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT seq, at, event, actor, identity_provider, subject, profile_id, detail FROM audit_events
                    WHERE \(condition) ORDER BY seq DESC LIMIT ?
                    """,
                arguments: arguments + [query.limit + 1]
            )
        }
        let events = rows.prefix(query.limit).map(Self.auditRecord)
        return AuditPage(events: events, nextCursor: rows.count > query.limit ? events.last?.seq : nil)
    }

    /// Up to `limit` events `query` selects (its own limit and cursor ignored), oldest first,
    /// from after `after`: an export, read in pages of a thousand.
    func exportAuditEvents(_ query: AuditQuery, after: Int64, limit: Int) async throws -> [AuditRecord] {
        var filters = query
        filters.before = nil
        let (condition, arguments) = Self.auditCondition(filters)
        return try await lookup { db in
            try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT seq, at, event, actor, identity_provider, subject, profile_id, detail FROM audit_events
                    WHERE \(condition) AND seq > ? ORDER BY seq LIMIT ?
                    """,
                arguments: arguments + [after, limit]
            )
        }.map(Self.auditRecord)
    }

    private static func auditCondition(_ query: AuditQuery) -> (String, SQLArguments) {
        var clauses = ["1 = 1"]
        var arguments = SQLArguments()
        func add(_ clause: String, _ value: (any SQLValueConvertible)?) {
            guard let value else { return }
            clauses.append(clause)
            arguments.values.append(value.sqlValue)
        }
        add("identity_provider = ?", query.identityProvider)
        add("subject = ?", query.subject)
        add("profile_id = ?", query.profileID)
        add("event = ?", query.event)
        add("actor = ?", query.actor)
        add("at >= ?", query.since?.timeIntervalSince1970)
        add("at < ?", query.until?.timeIntervalSince1970)
        add("seq < ?", query.before)
        return (clauses.joined(separator: " AND "), arguments)
    }

    private static func auditRecord(_ row: SQLRow) -> AuditRecord {
        let detailText: String = row["detail"]
        let detail = (try? JSONDecoder().decode([String: String].self, from: Data(detailText.utf8))) ?? [:]
        return AuditRecord(
            seq: row["seq"],
            at: Date(timeIntervalSince1970: row["at"]),
            event: row["event"],
            actor: row["actor"],
            identityProvider: row["identity_provider"],
            subject: row["subject"],
            profileID: row["profile_id"],
            detail: detail
        )
    }

    private static func encodeDetail(_ detail: [String: String]) -> String {
        guard !detail.isEmpty else { return "{}" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(detail)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
