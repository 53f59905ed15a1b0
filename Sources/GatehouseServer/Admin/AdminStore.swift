import Foundation
import GatehouseKernel
import GatehouseProtocol

// What admins read of users and change for them. Every change writes its audit event in its own
// transaction, so an action and its trace are stored together or not at all.

extension ServerStore {
    // MARK: - Finding users

    func findUsers(_ search: UserSearch) async throws -> [UserSummary] {
        var clauses: [String] = []
        var arguments = SQLArguments()
        if let value = search.identityProvider {
            clauses.append("p.identity_provider = ?")
            arguments.values.append(.text(value))
        }
        if let value = search.subject {
            clauses.append("p.subject = ?")
            arguments.values.append(.text(value))
        }
        if let value = search.subjectPrefix {
            // ASCII letters case-insensitively, as SQLite's LOWER folds only those (PostgreSQL's
            // may fold more, by its locale); `\` escapes the pattern's own characters.
            clauses.append(#"LOWER(p.subject) LIKE ? ESCAPE '\'"#)
            arguments.values.append(.text(Self.likePrefix(Self.asciiLowercased(value))))
        }
        if let value = search.profileID {
            clauses.append(
                """
                EXISTS (SELECT 1 FROM profiles m WHERE m.id = ? AND m.identity_provider = p.identity_provider
                    AND m.subject = p.subject)
                """
            )
            arguments.values.append(.text(value))
        }
        if let value = search.installationID {
            clauses.append(
                """
                EXISTS (SELECT 1 FROM profiles m WHERE m.client_id = ? AND m.identity_provider = p.identity_provider
                    AND m.subject = p.subject)
                """
            )
            arguments.values.append(.text(value))
        }
        guard !clauses.isEmpty else { throw AdminError.searchNeedsAFilter }
        let condition = clauses.joined(separator: " AND ")
        let bound = arguments + [search.limit]
        let rows = try await lookup { db in
            try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT p.identity_provider, p.subject, COUNT(*) AS profiles,
                        MAX((SELECT MAX(t.issued_at) FROM tokens t WHERE t.profile_id = p.id)) AS last_used_at
                    FROM profiles p WHERE \(condition)
                    GROUP BY p.identity_provider, p.subject ORDER BY p.subject, p.identity_provider LIMIT ?
                    """,
                arguments: bound
            )
        }
        return rows.map { row in
            UserSummary(
                identityProvider: row["identity_provider"],
                subject: row["subject"],
                profiles: row["profiles"],
                lastUsedAt: (row["last_used_at"] as Double?).map(Date.init(timeIntervalSince1970:))
            )
        }
    }

    /// The user's profiles, with everything hanging off them; nil when they have none.
    func userDetail(identityProvider: String, subject: String, now: Double) async throws -> UserDetail? {
        try await lookup { db in
            let profileRows = try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT p.id, p.client_id, c.app_id, p.created_at, p.expires_at, p.failures,
                        (SELECT MAX(t.issued_at) FROM tokens t WHERE t.profile_id = p.id) AS last_used_at
                    FROM profiles p JOIN clients c ON c.id = p.client_id
                    WHERE p.identity_provider = ? AND p.subject = ? ORDER BY p.created_at DESC, p.id LIMIT 100
                    """,
                arguments: [identityProvider, subject]
            )
            guard !profileRows.isEmpty else { return nil }
            var profiles: [ProfileDetail] = []
            for row in profileRows {
                let profileID: String = row["id"]
                profiles.append(
                    ProfileDetail(
                        id: profileID,
                        installationID: row["client_id"],
                        appID: row["app_id"],
                        createdAt: Date(timeIntervalSince1970: row["created_at"]),
                        lastUsedAt: (row["last_used_at"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        expiresAt: (row["expires_at"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        failures: row["failures"],
                        authenticators: try Self.authenticators(of: profileID, db),
                        sessions: try Self.sessions(of: profileID, now: now, db),
                        pushEnrolment: try Self.pushEnrolment(of: profileID, db)
                    )
                )
            }
            let pending = try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT id, api_client, type, created_at, expires_at FROM mobile_transactions
                    WHERE identity_provider = ? AND subject = ? AND status = 'pending' AND expires_at > ?
                    ORDER BY created_at DESC LIMIT 50
                    """,
                arguments: [identityProvider, subject, now]
            )
            return UserDetail(
                identityProvider: identityProvider,
                subject: subject,
                profiles: profiles,
                pendingTransactions: pending.map { row in
                    PendingTransactionSummary(
                        id: row["id"],
                        apiClient: row["api_client"],
                        type: row["type"],
                        createdAt: Date(timeIntervalSince1970: row["created_at"]),
                        expiresAt: Date(timeIntervalSince1970: row["expires_at"])
                    )
                }
            )
        }
    }

    private static func authenticators(of profileID: String, _ db: any SQLSession) throws -> [AuthenticatorSummary] {
        try SQLRow.fetchAll(
            db,
            sql: "SELECT authenticator, created_at FROM registrations WHERE profile_id = ? ORDER BY created_at",
            arguments: [profileID]
        ).map {
            AuthenticatorSummary(id: $0["authenticator"], createdAt: Date(timeIntervalSince1970: $0["created_at"]))
        }
    }

    private static func sessions(of profileID: String, now: Double, _ db: any SQLSession) throws -> [SessionSummary] {
        try SQLRow.fetchAll(
            db,
            sql: """
                SELECT f.id, f.revoked, MAX(t.issued_at) AS issued_at, MAX(t.expires_at) AS expires_at
                FROM families f LEFT JOIN tokens t ON t.family = f.id AND t.kind = 'refresh'
                WHERE f.profile_id = ? GROUP BY f.id, f.revoked
                ORDER BY COALESCE(MAX(t.issued_at), 0) DESC, f.id LIMIT 50
                """,
            arguments: [profileID]
        ).map { row in
            let expiresAt: Double? = row["expires_at"]
            let revoked: Bool = row["revoked"]
            return SessionSummary(
                id: row["id"],
                issuedAt: (row["issued_at"] as Double?).map(Date.init(timeIntervalSince1970:)),
                expiresAt: expiresAt.map(Date.init(timeIntervalSince1970:)),
                active: !revoked && (expiresAt ?? 0) > now
            )
        }
    }

    private static func pushEnrolment(of profileID: String, _ db: any SQLSession) throws -> PushEnrolmentSummary? {
        try SQLRow.fetchOne(
            db,
            sql: "SELECT platform, push_token, disenrolled, created_at FROM mobile_enrolments WHERE profile_id = ?",
            arguments: [profileID]
        ).map { row in
            PushEnrolmentSummary(
                platform: row["platform"],
                hasPushToken: row.value("push_token") != .null,
                disenrolled: row["disenrolled"],
                createdAt: Date(timeIntervalSince1970: row["created_at"])
            )
        }
    }

    /// `text` with A–Z lowered and every other character as it is.
    private static func asciiLowercased(_ text: String) -> String {
        var lowered = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            lowered.append(("A"..."Z").contains(scalar) ? Unicode.Scalar(UInt8(scalar.value + 32)) : scalar)
        }
        return String(lowered)
    }

    /// `prefix` as a LIKE pattern matching what starts with it.
    private static func likePrefix(_ prefix: String) -> String {
        var pattern = ""
        for character in prefix {
            if character == "%" || character == "_" || character == "\\" { pattern.append("\\") }
            pattern.append(character)
        }
        return pattern + "%"
    }

    // MARK: - Admin actions

    /// Runs `change` on an existing profile, locked, and appends its audit event with the
    /// profile's owner; `detail` and the event come from the change. Throws `profileNotFound`.
    private func adminChange<T: Sendable>(
        _ event: AuditEvent,
        profileID: String,
        by actor: AdminActor,
        now: Double,
        _ change: @escaping @Sendable (any SQLSession) throws -> (T, [String: String])
    ) async throws -> T {
        try await write { db in
            guard
                let owner = try SQLRow.fetchOne(
                    db,
                    sql: "SELECT identity_provider, subject FROM profiles WHERE id = ? \(db.dialect.lockingRows)",
                    arguments: [profileID]
                )
            else { throw AdminError.profileNotFound }
            let (result, detail) = try change(db)
            try self.appendAudit(
                [
                    AuditEntry(
                        event: event,
                        actor: actor,
                        identityProvider: owner["identity_provider"],
                        subject: owner["subject"],
                        profileID: profileID,
                        detail: detail
                    )
                ],
                now: now,
                db
            )
            return result
        }
    }

    /// Revokes every session of the profile: its refresh-token families and their tokens.
    /// Returns how many sessions were still active.
    func adminRevokeSessions(_ profileID: String, by actor: AdminActor, now: Double) async throws -> Int {
        try await adminChange(.adminRevokeSessions, profileID: profileID, by: actor, now: now) { db in
            try db.execute(
                sql: "UPDATE families SET revoked = TRUE WHERE profile_id = ? AND revoked = FALSE",
                arguments: [profileID]
            )
            let revoked = db.changesCount
            try db.execute(sql: "UPDATE tokens SET revoked = TRUE WHERE profile_id = ?", arguments: [profileID])
            try self.activeTokens.evictOnCommit(.profile(profileID), db)
            return (revoked, ["sessions": String(revoked)])
        }
    }

    /// Removes one authenticator of the profile (never the PIN, `pinAuthenticator`).
    func adminRemoveAuthenticator(
        _ authenticator: String,
        profileID: String,
        pinAuthenticator: String,
        by actor: AdminActor,
        now: Double
    ) async throws {
        try await adminChange(.adminRemoveAuthenticator, profileID: profileID, by: actor, now: now) { db in
            guard authenticator != pinAuthenticator else { throw AdminError.pinCannotBeRemoved }
            try db.execute(
                sql: "DELETE FROM registrations WHERE profile_id = ? AND authenticator = ?",
                arguments: [profileID, authenticator]
            )
            guard db.changesCount == 1 else { throw AdminError.authenticatorNotRegistered }
            return ((), ["authenticator": authenticator])
        }
    }

    /// Disenrols the profile's device from mobile authentication.
    func adminDisenrolDevice(_ profileID: String, by actor: AdminActor, now: Double) async throws {
        try await adminChange(.adminDisenrolDevice, profileID: profileID, by: actor, now: now) { db in
            guard try self.disenrolDevice(profileID, now: now, db) else { throw AdminError.notEnrolled }
            return ((), [:])
        }
    }

    /// Deregisters the profile as a lockout would: it, its registrations and sessions go; the
    /// app's next request learns it was deregistered.
    func adminDeregisterProfile(_ profileID: String, by actor: AdminActor, now: Double) async throws {
        try await adminChange(.adminDeregisterProfile, profileID: profileID, by: actor, now: now) { db in
            try self.deleteProfile(profileID, now: now, db)
            return ((), [:])
        }
    }

    /// Sets the profile's count of failed attempts back to zero.
    func adminClearLockout(_ profileID: String, by actor: AdminActor, now: Double) async throws {
        try await adminChange(.adminClearLockout, profileID: profileID, by: actor, now: now) { db in
            let failures =
                try Int.fetchOne(db, sql: "SELECT failures FROM profiles WHERE id = ?", arguments: [profileID]) ?? 0
            try db.execute(sql: "UPDATE profiles SET failures = 0 WHERE id = ?", arguments: [profileID])
            return ((), ["failures_cleared": String(failures)])
        }
    }

    // MARK: - Admin clients' tokens

    /// An admin client's access token, bound to `keyThumbprint` when given.
    func issueAdminToken(
        clientID: String,
        scope: String,
        keyThumbprint: String?,
        proof: ProofUse?,
        now: Double,
        lifetime: Int
    ) async throws -> String {
        let token = Data.random(count: 32).base64URLEncodedString
        try await write { db in
            if let proof { try self.record(proof, db) }
            try db.execute(
                sql:
                    "INSERT INTO admin_tokens (hash, client_id, scope, key_thumbprint, expires_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [Self.tokenHash(token), clientID, scope, keyThumbprint, now + Double(lifetime)]
            )
        }
        return token
    }

    /// What an admin access token grants, when it is live.
    func adminToken(
        _ token: String,
        now: Double
    ) async throws -> (clientID: String, scope: String, keyThumbprint: String?)? {
        let hash = Self.tokenHash(token)
        return try await lookup { db in
            try SQLRow.fetchOne(
                db,
                sql: "SELECT client_id, scope, key_thumbprint FROM admin_tokens WHERE hash = ? AND expires_at > ?",
                arguments: [hash, now]
            ).map { ($0["client_id"], $0["scope"], $0["key_thumbprint"]) }
        }
    }

    /// Records a DPoP proof that authorises an admin request that changes nothing else.
    func recordAdminProof(_ proof: ProofUse) async throws {
        try await write { db in try self.record(proof, db) }
    }
}
