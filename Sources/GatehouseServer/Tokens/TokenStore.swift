import Foundation
import GatehouseKernel
import GatehouseProtocol
import Synchronization

/// A valid access token's session.
struct AccessSession: Sendable {
    var profileID: String
    var scope: String
    var subject: String
    var identityProvider: String
    /// A stateless registration's session.
    var stateless: Bool
    /// The session's token family: what a web session opened from it ends with.
    var family: String
}

extension AccessSession {
    /// From a row with the token's `profile_id`, `scope` and `family` and its profile's
    /// `subject`, `identity_provider` and `stateless`.
    init(_ row: SQLRow) {
        self.init(
            profileID: row["profile_id"],
            scope: row["scope"],
            subject: row["subject"],
            identityProvider: row["identity_provider"],
            stateless: row["stateless"],
            family: row["family"]
        )
    }
}

extension ServerStore {
    // MARK: - Minting

    /// Issues an access and a refresh token bound to `keyThumbprint`, in a new family or as the
    /// next generation of `family`. A session has one access and one refresh token at a time:
    /// the family's earlier ones are deleted here (a rotated refresh token is still recognised,
    /// by its generation, see ``RefreshToken``).
    func issueTokens(
        profileID: String,
        keyThumbprint: String,
        scope: String,
        family: String?,
        grant: String? = nil,
        now: Double,
        _ db: any SQLSession
    ) throws -> TokenResponse {
        let familyID: String
        let generation: Int64
        if let family {
            familyID = family
            generation =
                try Int64.fetchOne(
                    db,
                    sql: "UPDATE families SET generation = generation + 1 WHERE id = ? RETURNING generation",
                    arguments: [family]
                ) ?? 0
            try db.execute(sql: "DELETE FROM tokens WHERE family = ?", arguments: [family])
            try activeTokens.evictOnCommit(.family(family), db)
        } else {
            familyID = Data.random(count: 16).base64URLEncodedString
            generation = 0
            try db.execute(
                sql: #"INSERT INTO families (id, profile_id, "grant") VALUES (?, ?, ?)"#,
                arguments: [familyID, profileID, grant]
            )
        }
        let access = Data.random(count: 32).base64URLEncodedString
        let refresh = RefreshToken(family: familyID, generation: generation).encoded(key: refreshTokenKey)
        // The pair in one statement: one round trip on PostgreSQL.
        try db.execute(
            sql: """
                INSERT INTO tokens (hash, kind, family, profile_id, key_thumbprint, scope, issued_at, expires_at)
                VALUES (?, 'access', ?, ?, ?, ?, ?, ?), (?, 'refresh', ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                Self.tokenHash(access), familyID, profileID, keyThumbprint, scope, now,
                now + Double(tokenLifetimes.access),
                Self.tokenHash(refresh), familyID, profileID, keyThumbprint, scope, now,
                now + Double(tokenLifetimes.refresh),
            ]
        )
        return TokenResponse(
            accessToken: access,
            tokenType: "DPoP",
            expiresIn: tokenLifetimes.access,
            refreshToken: refresh,
            scope: scope
        )
    }

    /// A new session at the end of a flow: bound to the new profile key after a registration, to
    /// the profile's key otherwise.
    func issueTokens(for flow: FlowRow, now: Double, _ db: any SQLSession) throws -> TokenResponse {
        guard let profileID = flow.profileID,
            let profile = try SQLRow.fetchOne(
                db,
                sql: "SELECT key_thumbprint, scope FROM profiles WHERE id = ?",
                arguments: [profileID]
            )
        else { throw StoreRefusal.userDeregistered }
        if let grant = flow.state.grant,
            try Bool.fetchOne(db, sql: #"SELECT TRUE FROM replayed_grants WHERE "grant" = ?"#, arguments: [grant])
                == true
        {
            throw RegistrationError(
                .externalIdentityProviderFailure,
                message: "The sign-in this registration came from was used twice; nothing was issued. Sign in again."
            )
        }
        return try issueTokens(
            profileID: profileID,
            keyThumbprint: profile["key_thumbprint"],
            scope: profile["scope"],
            family: nil,
            grant: flow.state.grant,
            now: now,
            db
        )
    }

    // MARK: - Using

    /// The session of a valid, unrevoked, unexpired access token presented with its own key.
    func accessSession(
        _ token: String,
        keyThumbprint: String,
        now: Double,
        _ db: any SQLSession
    ) throws -> AccessSession {
        guard
            let row = try SQLRow.fetchOne(
                db,
                sql: """
                    SELECT tokens.*, families.revoked AS family_revoked, profiles.subject, profiles.identity_provider,
                        profiles.stateless, profiles.expires_at AS profile_expires_at
                    FROM tokens JOIN families ON families.id = tokens.family JOIN profiles ON profiles.id = tokens.profile_id
                    WHERE tokens.hash = ? AND tokens.kind = 'access'
                    """,
                arguments: [Self.tokenHash(token)]
            )
        else { throw StoreRefusal.accessToken("The access token is not valid.") }
        guard !(row["revoked"] as Bool), !(row["family_revoked"] as Bool) else {
            throw StoreRefusal.accessToken("The access token was revoked.")
        }
        guard (row["expires_at"] as Double) > now else { throw StoreRefusal.accessToken("The access token expired.") }
        if let registrationEnds = row["profile_expires_at"] as Double?, registrationEnds <= now {
            throw StoreRefusal.accessToken("The registration expired; register again.")
        }
        guard row["key_thumbprint"] == keyThumbprint else {
            throw StoreRefusal.accessToken("The access token is bound to another device.")
        }
        return AccessSession(row)
    }

    /// Checks an access token and records the proof that presented it.
    func useAccessToken(_ token: String, proof: ProofUse) async throws -> AccessSession {
        if let postgres = engine as? PostgresEngine {
            // The usual case in one call (migration v11): the same checks and proof record as
            // below; when any check fails it records nothing, and the change below says why.
            let arguments: SQLArguments = [
                Self.tokenHash(token), proof.keyThumbprint, proof.keyThumbprint + ":" + proof.jti,
                proof.now + 2 * DPoP.allowedClockSkew, proof.now,
            ]
            let call = try await ServerTracing.database("db.write", .postgres, function: "useAccessToken") {
                try await postgres.callChange("gatehouse_use_access_token", arguments, announcing: nil)
            }
            switch call {
            case .changed(let row):
                return AccessSession(row)
            case .unchanged:
                hotPathFallbacks.add(1, ordering: .relaxed)
            case .unknown:
                // Committed, then the answer was lost: the proof is recorded, and the session is
                // the answer. Otherwise nothing was: the whole change runs.
                let recorded = try await lookup { db in
                    try Bool.fetchOne(
                        db,
                        sql: "SELECT TRUE FROM dpop_proofs WHERE jti = ?",
                        arguments: [proof.keyThumbprint + ":" + proof.jti]
                    ) == true
                }
                if recorded {
                    return try await accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now)
                }
            }
        }
        return try await write { db in
            let session = try self.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            try self.record(proof, db)
            return session
        }
    }

    /// Checks an access token without recording anything (the change that follows records).
    func accessSession(_ token: String, keyThumbprint: String, now: Double) async throws -> AccessSession {
        try await lookup { db in try self.accessSession(token, keyThumbprint: keyThumbprint, now: now, db) }
    }

    enum RefreshOutcome: Sendable {
        case rotated(TokenResponse)
        case refused(StoreRefusal)
        /// A rotated token came back: someone holds a copy; its family is revoked.
        case reused(profileID: String)
    }

    /// Rotates a refresh token. A rotated token presented again (an earlier generation of a
    /// live family, authenticated by its MAC) revokes the whole family (RFC 9700 §4.14.2): the
    /// refusal is committed with the revocation.
    func refresh(_ refreshToken: String, proof: ProofUse) async throws -> RefreshOutcome {
        let notValid = StoreRefusal.grant("The refresh token is not valid.")
        guard let presented = RefreshToken(refreshToken, key: refreshTokenKey) else { return .refused(notValid) }
        let presentedHash = Self.tokenHash(refreshToken)
        if let rotated = try await rotateInOneCall(presented, hash: presentedHash, proof: proof) {
            return .rotated(rotated)
        }
        return try await write { db in
            guard
                let family = try SQLRow.fetchOne(
                    db,
                    sql: """
                        SELECT families.*, profiles.key_thumbprint, profiles.expires_at AS profile_expires_at
                        FROM families JOIN profiles ON profiles.id = families.profile_id WHERE families.id = ?
                        \(db.dialect.lockingRows)
                        """,
                    arguments: [presented.family]
                )
            else { return .refused(notValid) }
            guard family["key_thumbprint"] == proof.keyThumbprint else {
                return .refused(.grant("The refresh token is bound to another device."))
            }
            guard !(family["revoked"] as Bool) else { return .refused(.grant("The refresh token was revoked.")) }
            let current: Int64 = family["generation"]
            if presented.generation < current {
                try self.record(proof, db)
                try self.revokeFamily(presented.family, db)
                try self.auditProfileEvent(.refreshTokenReuse, family["profile_id"], actor: .server, now: proof.now, db)
                return .reused(profileID: family["profile_id"])
            }
            guard presented.generation == current,
                let row = try SQLRow.fetchOne(
                    db,
                    sql: "SELECT * FROM tokens WHERE hash = ? AND kind = 'refresh'",
                    arguments: [presentedHash]
                )
            else { return .refused(notValid) }
            guard !(row["revoked"] as Bool) else { return .refused(.grant("The refresh token was revoked.")) }
            guard (row["expires_at"] as Double) > proof.now else {
                return .refused(.grant("The refresh token expired."))
            }
            // Past the registration's validity the profile is over: it goes, and the device hears
            // the user was deregistered (it must register again).
            if let registrationEnds = family["profile_expires_at"] as Double?, registrationEnds <= proof.now {
                try self.auditProfileEvent(
                    .deregistration,
                    family["profile_id"],
                    actor: .server,
                    detail: ["reason": "registration_expired"],
                    now: proof.now,
                    db
                )
                try self.deleteProfile(family["profile_id"], now: proof.now, db)
                return .refused(.registrationExpired)
            }
            try self.record(proof, db)
            return .rotated(
                try self.issueTokens(
                    profileID: row["profile_id"],
                    keyThumbprint: row["key_thumbprint"],
                    scope: row["scope"],
                    family: presented.family,
                    now: proof.now,
                    db
                )
            )
        }
    }

    /// On PostgreSQL, the usual refresh (every check passes) as one call of
    /// `gatehouse_rotate_refresh_token` (migration v11): the same checks, proof, rotation and
    /// eviction as the whole change below, in one round trip instead of ten. Nil when any check
    /// failed, having changed nothing, or on SQLite: the whole change then runs and says why.
    private func rotateInOneCall(_ presented: RefreshToken, hash: Data, proof: ProofUse) async throws -> TokenResponse?
    {
        guard let postgres = engine as? PostgresEngine else { return nil }
        let access = Data.random(count: 32).base64URLEncodedString
        let refresh = RefreshToken(family: presented.family, generation: presented.generation + 1)
            .encoded(key: refreshTokenKey)
        let arguments: SQLArguments = [
            presented.family, presented.generation, hash, proof.keyThumbprint,
            proof.keyThumbprint + ":" + proof.jti, proof.now + 2 * DPoP.allowedClockSkew, proof.now,
            Self.tokenHash(access), proof.now + Double(tokenLifetimes.access),
            Self.tokenHash(refresh), proof.now + Double(tokenLifetimes.refresh),
        ]
        let call = try await ServerTracing.database("db.write", .postgres, function: "refresh") {
            try await postgres.callChange(
                "gatehouse_rotate_refresh_token",
                arguments,
                announcing: ActiveTokenCache.Eviction.family(presented.family).announcement
            )
        }
        let scope: String
        switch call {
        case .changed(let row):
            guard case .text(let text)? = row.values.first else { return nil }
            scope = text
        case .unchanged:
            hotPathFallbacks.add(1, ordering: .relaxed)
            return nil
        case .unknown:
            // Committed, then the answer was lost: the new pair is there, and is the answer.
            // Otherwise nothing was: the whole change runs.
            guard
                let found = try await lookup({ db in
                    try String.fetchOne(
                        db,
                        sql: "SELECT scope FROM tokens WHERE hash = ? AND kind = 'refresh'",
                        arguments: [Self.tokenHash(refresh)]
                    )
                })
            else { return nil }
            scope = found
        }
        return TokenResponse(
            accessToken: access,
            tokenType: "DPoP",
            expiresIn: tokenLifetimes.access,
            refreshToken: refresh,
            scope: scope
        )
    }

    /// RFC 7009: unknown, foreign and already revoked tokens change nothing; a refresh token
    /// revokes its family.
    func revoke(_ token: String, proof: ProofUse) async throws {
        // Hashed once, before the writer's serial part.
        let hash = Self.tokenHash(token)
        try await write { db in
            try self.record(proof, db)
            guard
                let row = try SQLRow.fetchOne(
                    db,
                    sql: "SELECT kind, family, key_thumbprint FROM tokens WHERE hash = ?",
                    arguments: [hash]
                ),
                row["key_thumbprint"] == proof.keyThumbprint
            else {
                try self.revokeDeviceToken(hash: hash, keyThumbprint: proof.keyThumbprint, db)
                return
            }
            if row["kind"] == "refresh" {
                try self.revokeFamily(row["family"], db)
            } else {
                try db.execute(sql: "UPDATE tokens SET revoked = TRUE WHERE hash = ?", arguments: [hash])
                try self.activeTokens.evictOnCommit(.token(hash: hash), db)
            }
        }
    }

    private func revokeFamily(_ family: String, _ db: any SQLSession) throws {
        try db.execute(sql: "UPDATE families SET revoked = TRUE WHERE id = ?", arguments: [family])
        try db.execute(sql: "UPDATE tokens SET revoked = TRUE WHERE family = ?", arguments: [family])
        try activeTokens.evictOnCommit(.family(family), db)
    }

    /// Deregisters a profile at its own request. Idempotent: a profile already gone is fine.
    /// Returns whether a profile was removed.
    func deregister(_ profileID: String, proof: ProofUse) async throws -> Bool {
        try await write { db in
            guard
                let key = try String.fetchOne(
                    db,
                    sql: "SELECT key_thumbprint FROM profiles WHERE id = ? \(db.dialect.lockingRows)",
                    arguments: [profileID]
                )
            else { return false }
            guard key == proof.keyThumbprint else {
                throw StoreRefusal.proof("The DPoP proof is not signed by this profile's key.")
            }
            try self.record(proof, db)
            try self.auditProfileEvent(.deregistration, profileID, actor: .user, now: proof.now, db)
            try self.deleteProfile(profileID, now: proof.now, db)
            return true
        }
    }

    // MARK: - Authenticators of a profile

    /// The authenticators registered for the session's profile.
    func registeredAuthenticators(_ token: String, proof: ProofUse) async throws -> [String] {
        try await write { db in
            let session = try self.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            try self.record(proof, db)
            return try String.fetchAll(
                db,
                sql: "SELECT authenticator FROM registrations WHERE profile_id = ? ORDER BY created_at",
                arguments: [session.profileID]
            )
        }
    }

    /// Forgets one authenticator of the session's profile. Refuses when it is not registered.
    /// Returns the profile the authenticator was removed from.
    func deregisterAuthenticator(_ authenticator: String, token: String, proof: ProofUse) async throws -> String {
        try await write { db in
            let session = try self.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            guard try self.hasRegistration(session.profileID, authenticator, db) else {
                throw AuthenticationError(.authenticatorNotRegistered)
            }
            try self.record(proof, db)
            try db.execute(
                sql: "DELETE FROM registrations WHERE profile_id = ? AND authenticator = ?",
                arguments: [session.profileID, authenticator]
            )
            // Removed by a request that ran at the same time: this one removed nothing.
            guard db.changesCount == 1 else { throw AuthenticationError(.authenticatorNotRegistered) }
            try self.auditProfileEvent(
                .authenticatorDeregistration,
                session.profileID,
                actor: .user,
                detail: ["authenticator": authenticator],
                now: proof.now,
                db
            )
            return session.profileID
        }
    }
}
