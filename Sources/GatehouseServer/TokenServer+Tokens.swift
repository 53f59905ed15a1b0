import Crypto
import Foundation
import GRDB
import GatehouseKernel
import GatehouseProtocol
import Logging

/// A valid access token's session.
struct AccessSession: Sendable {
    var profileID: String
    var scope: String
    var subject: String
    var identityProvider: String
}

extension TokenServer {
    static func tokenHash(_ token: String) -> Data { Data(SHA256.hash(data: Data(token.utf8))) }

    /// Issues an access and a refresh token bound to `keyThumbprint`, in `family` or a new one.
    func issueTokens(
        profileID: String,
        keyThumbprint: String,
        scope: String,
        family: String?,
        _ db: Database
    ) throws -> TokenResponse {
        let now = now
        let familyID = family ?? Data.random(count: 16).base64URLEncodedString
        if family == nil {
            try db.execute(
                sql: "INSERT INTO families (id, profile_id) VALUES (?, ?)",
                arguments: [familyID, profileID]
            )
        }
        let access = Data.random(count: 32).base64URLEncodedString
        let refresh = Data.random(count: 32).base64URLEncodedString
        for (token, kind, lifetime) in [
            (access, "access", configuration.accessTokenLifetime),
            (refresh, "refresh", configuration.refreshTokenLifetime),
        ] {
            try db.execute(
                sql: """
                    INSERT INTO tokens (hash, kind, family, profile_id, key_thumbprint, scope, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Self.tokenHash(token), kind, familyID, profileID, keyThumbprint, scope, now + Double(lifetime),
                ]
            )
        }
        return TokenResponse(
            accessToken: access,
            tokenType: "DPoP",
            expiresIn: configuration.accessTokenLifetime,
            refreshToken: refresh,
            scope: scope
        )
    }

    /// The access token from `Authorization: DPoP <token>`.
    func bearerToken(_ request: WireRequest) throws -> String {
        guard let authorization = request.header("Authorization") else {
            throw ServerError.invalidToken("An access token is required (Authorization: DPoP <token>).")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "dpop", !parts[1].isEmpty, parts[1].utf8.count <= 512 else {
            throw ServerError.invalidToken("The Authorization header must be \"DPoP <access token>\".")
        }
        return String(parts[1])
    }

    /// The session of a valid, unrevoked, unexpired access token presented with its own key.
    func validAccessToken(_ token: String, proof: DPoP.VerifiedProof, _ db: Database) throws -> AccessSession {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT tokens.*, families.revoked AS family_revoked, profiles.subject, profiles.identity_provider
                    FROM tokens JOIN families ON families.id = tokens.family JOIN profiles ON profiles.id = tokens.profile_id
                    WHERE tokens.hash = ? AND tokens.kind = 'access'
                    """,
                arguments: [Self.tokenHash(token)]
            )
        else { throw ServerError.invalidToken("The access token is not valid.") }
        guard !(row["revoked"] as Bool), !(row["family_revoked"] as Bool) else {
            throw ServerError.invalidToken("The access token was revoked.")
        }
        guard (row["expires_at"] as Double) > now else { throw ServerError.invalidToken("The access token expired.") }
        guard row["key_thumbprint"] == proof.keyThumbprint else {
            throw ServerError.invalidToken("The access token is bound to another device.")
        }
        return AccessSession(
            profileID: row["profile_id"],
            scope: row["scope"],
            subject: row["subject"],
            identityProvider: row["identity_provider"]
        )
    }

    // MARK: - Endpoints

    func refresh(_ request: WireRequest) async throws -> WireResponse {
        let body = try decodeBody(TokenRequest.self, request)
        guard body.grantType == "refresh_token" else {
            throw ServerError(400, "unsupported_grant_type", "Only the refresh_token grant is supported here.")
        }
        guard let refreshToken = body.refreshToken, !refreshToken.isEmpty, refreshToken.utf8.count <= 512 else {
            throw ServerError.invalidRequest("Invalid field refresh_token: required key is missing.")
        }
        let proof = try proof(request)
        let now = now
        let decision = try await store.pool.write { db -> Decision<TokenResponse> in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT tokens.*, families.revoked AS family_revoked FROM tokens JOIN families ON families.id = tokens.family
                        WHERE tokens.hash = ? AND tokens.kind = 'refresh'
                        """,
                    arguments: [Self.tokenHash(refreshToken)]
                )
            else { return .refuse(.invalidGrant("The refresh token is not valid.")) }
            guard row["key_thumbprint"] == proof.keyThumbprint else {
                return .refuse(.invalidGrant("The refresh token is bound to another device."))
            }
            guard !(row["revoked"] as Bool), !(row["family_revoked"] as Bool) else {
                return .refuse(.invalidGrant("The refresh token was revoked."))
            }
            guard (row["expires_at"] as Double) > now else {
                return .refuse(.invalidGrant("The refresh token expired."))
            }
            let family: String = row["family"]
            try self.recordProof(proof, db)
            if (row["used_at"] as Double?) != nil {
                // Reuse of a rotated token: someone holds a copy. End the whole session (RFC 9700 §4.14.2).
                try db.execute(sql: "UPDATE families SET revoked = 1 WHERE id = ?", arguments: [family])
                try db.execute(sql: "UPDATE tokens SET revoked = 1 WHERE family = ?", arguments: [family])
                self.logger.warning(
                    "Refresh token reused; session revoked",
                    metadata: ["profile": "\(row["profile_id"] as String)"]
                )
                return .refuse(.invalidGrant("The refresh token was already used; the session was revoked."))
            }
            try db.execute(
                sql: "UPDATE tokens SET used_at = ? WHERE hash = ? AND used_at IS NULL",
                arguments: [now, row["hash"] as Data]
            )
            return .proceed(
                try self.issueTokens(
                    profileID: row["profile_id"],
                    keyThumbprint: row["key_thumbprint"],
                    scope: row["scope"],
                    family: family,
                    db
                )
            )
        }
        return try json(try decision.get())
    }

    func revoke(_ request: WireRequest) async throws -> WireResponse {
        let body = try decodeBody(RevocationRequest.self, request)
        guard [nil, "access_token", "refresh_token"].contains(body.tokenTypeHint) else {
            throw ServerError(400, "unsupported_token_type", "token_type_hint must be access_token or refresh_token.")
        }
        guard !body.token.isEmpty, body.token.utf8.count <= 512 else {
            throw ServerError.invalidRequest("Invalid field token: empty.")
        }
        let proof = try proof(request)
        try await store.pool.write { db in
            try self.recordProof(proof, db)
            // RFC 7009: unknown, foreign and already revoked tokens all answer 200, and change nothing.
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT kind, family, key_thumbprint FROM tokens WHERE hash = ?",
                    arguments: [Self.tokenHash(body.token)]
                ),
                row["key_thumbprint"] == proof.keyThumbprint
            else { return }
            if row["kind"] == "refresh" {
                try db.execute(
                    sql: "UPDATE families SET revoked = 1 WHERE id = ?",
                    arguments: [row["family"] as String]
                )
                try db.execute(
                    sql: "UPDATE tokens SET revoked = 1 WHERE family = ?",
                    arguments: [row["family"] as String]
                )
            } else {
                try db.execute(
                    sql: "UPDATE tokens SET revoked = 1 WHERE hash = ?",
                    arguments: [Self.tokenHash(body.token)]
                )
            }
        }
        return try json([String: String]())
    }

    func deregister(_ request: WireRequest) async throws -> WireResponse {
        let body = try decodeBody(DeregistrationRequest.self, request)
        let proof = try proof(request)
        try await store.pool.write { db in
            guard
                let key = try String.fetchOne(
                    db,
                    sql: "SELECT key_thumbprint FROM profiles WHERE id = ?",
                    arguments: [body.profileID]
                )
            else {
                return  // already gone: deregistration is idempotent
            }
            guard key == proof.keyThumbprint else {
                throw ServerError.invalidProof("The DPoP proof is not signed by this profile's key.")
            }
            try self.recordProof(proof, db)
            try self.deregisterProfile(body.profileID, db)
        }
        return try json(["deregistered": body.profileID])
    }

    func profileResource(_ request: WireRequest) async throws -> WireResponse {
        let token = try bearerToken(request)
        let proof = try proof(request, accessToken: token)
        let session = try await store.pool.write { db -> AccessSession in
            let session = try self.validAccessToken(token, proof: proof, db)
            try self.recordProof(proof, db)
            return session
        }
        return try json(
            ProfileResource(
                profileID: session.profileID,
                subject: session.subject,
                identityProvider: session.identityProvider,
                scope: session.scope
            )
        )
    }
}
