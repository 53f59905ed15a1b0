import Foundation
import GatehouseKernel
import GatehouseProtocol

// Device and implicit tokens, and what introspection reports of any token.

extension ServerStore {
    /// What decides an access token's scope: the installation's application and, for an
    /// implicit token, the profile's registered scope. Throws the refusal when nothing fits.
    typealias ScopeGrant = @Sendable (_ appID: String, _ registeredScope: String?) throws -> String

    /// Device authentication (client credentials): an access token for the installation whose
    /// key signed the proof, bound to that key, with no user.
    func issueDeviceToken(
        proof: ProofUse,
        lifetime: Int,
        grant: @escaping ScopeGrant
    ) async throws -> AccessTokenResponse {
        try await write { db in
            guard
                let client = try SQLRow.fetchOne(
                    db,
                    sql: "SELECT id, app_id FROM clients WHERE key_thumbprint = ?",
                    arguments: [proof.keyThumbprint]
                )
            else {
                throw StoreRefusal.unknownInstallation(
                    "No installation is registered with this DPoP key; register it at \(Endpoint.clients) first."
                )
            }
            let scope = try grant(client["app_id"], nil)
            try self.record(proof, db)
            let token = Data.random(count: 32).base64URLEncodedString
            try db.execute(
                sql: """
                    INSERT INTO client_tokens (hash, client_id, key_thumbprint, scope, issued_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Self.tokenHash(token), client["id"] as String, proof.keyThumbprint, scope, proof.now,
                    proof.now + Double(lifetime),
                ]
            )
            return AccessTokenResponse(accessToken: token, tokenType: "DPoP", expiresIn: lifetime, scope: scope)
        }
    }

    /// Implicit authentication: an access token for a registered profile without user
    /// interaction, bound to the profile's key; no refresh token.
    func issueImplicitToken(
        profileID: String,
        proof: ProofUse,
        lifetime: Int,
        grant: @escaping ScopeGrant
    ) async throws -> AccessTokenResponse {
        try await write { db in
            // The key checked below stays the profile's until this token is issued.
            try self.lockProfile(profileID, db)
            guard
                let profile = try SQLRow.fetchOne(
                    db,
                    sql: """
                        SELECT profiles.key_thumbprint, profiles.scope, profiles.stateless, profiles.expires_at,
                            clients.app_id
                        FROM profiles JOIN clients ON clients.id = profiles.client_id WHERE profiles.id = ?
                        """,
                    arguments: [profileID]
                ), Self.isCurrent(profile, now: proof.now)
            else { throw StoreRefusal.userDeregistered }
            guard profile["key_thumbprint"] == proof.keyThumbprint else {
                throw StoreRefusal.proof("The DPoP proof is not signed by this profile's key.")
            }
            guard !(profile["stateless"] as Bool) else {
                throw StoreRefusal.grant("A stateless registration cannot authenticate implicitly.")
            }
            let scope = try grant(profile["app_id"], profile["scope"])
            try self.record(proof, db)
            let family = Data.random(count: 16).base64URLEncodedString
            try db.execute(
                sql: "INSERT INTO families (id, profile_id) VALUES (?, ?)",
                arguments: [family, profileID]
            )
            let token = Data.random(count: 32).base64URLEncodedString
            try db.execute(
                sql: """
                    INSERT INTO tokens (hash, kind, family, profile_id, key_thumbprint, scope, issued_at, expires_at)
                    VALUES (?, 'implicit', ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Self.tokenHash(token), family, profileID, proof.keyThumbprint, scope, proof.now,
                    proof.now + Double(lifetime),
                ]
            )
            return AccessTokenResponse(accessToken: token, tokenType: "DPoP", expiresIn: lifetime, scope: scope)
        }
    }

    /// Whether a profile row (with `expires_at`) is still registered at `now`.
    static func isCurrent(_ profile: SQLRow, now: Double) -> Bool {
        guard let expiresAt = profile["expires_at"] as Double? else { return true }
        return expiresAt > now
    }

    /// What RFC 7662 introspection reports of `token` at `now`: an unexpired, unrevoked access
    /// token (user, implicit or device) of a current profile is active; anything else, refresh
    /// tokens included, is not.
    func introspect(_ token: String, now: Double) async throws -> IntrospectionResponse {
        let hash = Self.tokenHash(token)
        if let kept = activeTokens.answer(forHash: hash, now: now) { return kept }
        let version = activeTokens.version
        let found = try await lookup { db in try self.introspectionEntry(hash, now: now, db) }
        guard let found else { return .inactive }
        activeTokens.keep(found, forHash: hash, readAt: version)
        return found.answer
    }

    /// The token's answer and what can end it, when it is active at `now`.
    private func introspectionEntry(_ hash: Data, now: Double, _ db: any SQLSession) throws -> ActiveTokenCache.Entry? {
        if let row = try SQLRow.fetchOne(
            db,
            sql: """
                SELECT tokens.kind, tokens.scope, tokens.key_thumbprint, tokens.issued_at, tokens.expires_at,
                    tokens.revoked, tokens.family, tokens.profile_id, families.revoked AS family_revoked,
                    profiles.subject, profiles.identity_provider, profiles.stateless,
                    profiles.expires_at AS profile_expires_at, clients.id AS client_id, clients.app_id
                FROM tokens JOIN families ON families.id = tokens.family
                JOIN profiles ON profiles.id = tokens.profile_id JOIN clients ON clients.id = profiles.client_id
                WHERE tokens.hash = ?
                """,
            arguments: [hash]
        ) {
            let kind: String = row["kind"]
            guard kind == "access" || kind == "implicit", !(row["revoked"] as Bool),
                !(row["family_revoked"] as Bool), (row["expires_at"] as Double) > now,
                (row["profile_expires_at"] as Double?).map({ $0 > now }) ?? true
            else { return nil }
            return ActiveTokenCache.Entry(
                answer: IntrospectionResponse(
                    active: true,
                    scope: row["scope"],
                    clientID: row["client_id"],
                    sub: row["subject"],
                    identityProvider: row["identity_provider"],
                    tokenType: "DPoP",
                    exp: Int(row["expires_at"] as Double),
                    iat: (row["issued_at"] as Double?).map { Int($0) },
                    cnf: .init(jkt: row["key_thumbprint"]),
                    kind: kind == "implicit" ? .implicit : (row["stateless"] as Bool) ? .stateless : .user,
                    appID: row["app_id"]
                ),
                expiresAt: row["expires_at"],
                registrationEndsAt: row["profile_expires_at"],
                family: row["family"],
                profileID: row["profile_id"]
            )
        }
        guard
            let row = try SQLRow.fetchOne(
                db,
                sql: """
                    SELECT client_tokens.*, clients.app_id FROM client_tokens
                    JOIN clients ON clients.id = client_tokens.client_id WHERE client_tokens.hash = ?
                    """,
                arguments: [hash]
            ), !(row["revoked"] as Bool), (row["expires_at"] as Double) > now
        else { return nil }
        return ActiveTokenCache.Entry(
            answer: IntrospectionResponse(
                active: true,
                scope: row["scope"],
                clientID: row["client_id"],
                tokenType: "DPoP",
                exp: Int(row["expires_at"] as Double),
                iat: Int(row["issued_at"] as Double),
                cnf: .init(jkt: row["key_thumbprint"]),
                kind: .device,
                appID: row["app_id"]
            ),
            expiresAt: row["expires_at"],
            registrationEndsAt: nil,
            family: nil,
            profileID: nil
        )
    }

    /// Revokes a device token presented with its own key; anything else changes nothing.
    func revokeDeviceToken(hash: Data, keyThumbprint: String, _ db: any SQLSession) throws {
        try db.execute(
            sql: "UPDATE client_tokens SET revoked = TRUE WHERE hash = ? AND key_thumbprint = ?",
            arguments: [hash, keyThumbprint]
        )
        try activeTokens.evictOnCommit(.token(hash: hash), db)
    }
}
