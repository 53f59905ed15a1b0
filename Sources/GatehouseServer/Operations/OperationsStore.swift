import Foundation
import GatehouseKernel

// What no request will ever need again: expired and revoked tokens and their families, ended
// flows, spent proofs and single-use tokens, registrations past their validity, and
// installations that never did anything. Each sweep removes at most `limit` rows of each kind,
// so one sweep never holds the writer for long; the next one takes the rest.

/// Rows one sweep removed, by kind.
public struct CleanupReport: Sendable, Equatable, CustomStringConvertible {
    /// Expired access and refresh tokens.
    public var tokens = 0
    /// Refresh-token families that were revoked, or left without tokens.
    public var families = 0
    /// Expired or revoked device tokens (client credentials).
    public var deviceTokens = 0
    /// Expired registration and authentication flows.
    public var flows = 0
    /// Spent DPoP proofs and replay records of grants, past the window they guard.
    public var proofs = 0
    /// Registrations past their validity, removed as a deregistration removes them.
    public var profiles = 0
    /// Installations idle for too long: no profile, no device token, no flow.
    public var installations = 0
    /// Expired web login tokens and web sessions.
    public var webLogins = 0
    /// Expired access tokens of admin clients.
    public var adminTokens = 0
    /// Audit events past the retention (`server.audit.retentionDays`).
    public var auditEvents = 0
    /// Leases of events channels that no instance renewed: their instance stopped.
    public var eventChannels = 0

    /// All rows removed, whatever their kind.
    public var total: Int {
        tokens + families + deviceTokens + flows + proofs + profiles + installations + webLogins + adminTokens
            + auditEvents + eventChannels
    }

    /// The counts by kind, as the cleanup's log line shows them.
    public var description: String {
        "tokens \(tokens), families \(families), device tokens \(deviceTokens), flows \(flows), proofs \(proofs), "
            + "expired registrations \(profiles), idle installations \(installations), web sign-ins \(webLogins), "
            + "admin tokens \(adminTokens), audit events past retention \(auditEvents), "
            + "lapsed event channel leases \(eventChannels)"
    }
}

extension ServerStore {
    func removeExpiredState(
        now: Double,
        limit: Int,
        idleInstallationLifetime: Double,
        auditRetention: Double
    ) async throws -> CleanupReport {
        try await write { db in
            var report = CleanupReport()
            let row = db.dialect.rowIdentifier
            func delete(_ table: String, where condition: String, _ arguments: SQLArguments) throws -> Int {
                try db.execute(
                    sql:
                        "DELETE FROM \(table) WHERE \(row) IN (SELECT \(row) FROM \(table) WHERE \(condition) LIMIT ?)",
                    arguments: arguments + [limit]
                )
                return db.changesCount
            }
            // Registrations past their validity end as a deregistration does.
            let expiredProfiles = try String.fetchAll(
                db,
                sql: "SELECT id FROM profiles WHERE expires_at < ? LIMIT ?",
                arguments: [now, limit]
            )
            for profileID in expiredProfiles {
                // Still expired once locked: a registration renewed meanwhile stays.
                guard
                    try Bool.fetchOne(
                        db,
                        sql: "SELECT 1 FROM profiles WHERE id = ? AND expires_at < ? \(db.dialect.lockingRows)",
                        arguments: [profileID, now]
                    ) == true
                else { continue }
                try self.auditProfileEvent(
                    .deregistration,
                    profileID,
                    actor: .server,
                    detail: ["reason": "registration_expired"],
                    now: now,
                    db
                )
                try self.deleteProfile(profileID, now: now, db)
                report.profiles += 1
            }
            // A revoked family goes with its tokens; expired tokens go one by one, and a family
            // left without tokens after them.
            report.families = try delete("families", where: "revoked = TRUE", [])
            report.tokens = try delete("tokens", where: "expires_at < ?", [now])
            report.families += try delete(
                "families",
                where: "NOT EXISTS (SELECT 1 FROM tokens WHERE tokens.family = families.id)",
                []
            )
            report.deviceTokens = try delete("client_tokens", where: "expires_at < ? OR revoked = TRUE", [now])
            report.flows = try delete("flows", where: "expires_at < ?", [now])
            report.proofs = try delete("dpop_proofs", where: "expires_at < ?", [now])
            report.webLogins = try delete("web_login_tokens", where: "expires_at < ?", [now])
            report.webLogins += try delete("web_sessions", where: "expires_at < ?", [now])
            report.proofs += try delete("replayed_grants", where: "expires_at < ?", [now])
            report.adminTokens = try delete("admin_tokens", where: "expires_at < ?", [now])
            report.auditEvents = try delete("audit_events", where: "at < ?", [now - auditRetention])
            report.eventChannels = try delete("event_channels", where: "lease_until < ?", [now])
            // An installation that registered its key long ago and has nothing left: no profile,
            // no device token, no flow.
            report.installations = try delete(
                "clients",
                where: """
                    created_at < ? AND NOT EXISTS (SELECT 1 FROM profiles WHERE profiles.client_id = clients.id)
                    AND NOT EXISTS (SELECT 1 FROM client_tokens WHERE client_tokens.client_id = clients.id)
                    AND NOT EXISTS (SELECT 1 FROM flows WHERE flows.client_id = clients.id)
                    """,
                [now - idleInstallationLifetime]
            )
            // What a sweep removes was already inactive; forgetting every kept answer keeps that
            // beyond doubt (a sweep runs once a minute).
            if report.total > report.eventChannels { try self.activeTokens.evictOnCommit(.all, db) }
            return report
        }
    }

    /// Reads from the database: throws when it cannot answer.
    func checkReadiness() async throws {
        _ = try await lookup { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM server_secrets") }
    }

    /// Rows per table, for operators and the load measurement.
    func rowCounts() async throws -> [String: Int] {
        try await lookup { db in
            var counts: [String: Int] = [:]
            for table in ["clients", "profiles", "families", "tokens", "client_tokens", "flows", "dpop_proofs"] {
                counts[table] = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
            }
            return counts
        }
    }
}
