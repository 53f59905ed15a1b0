import GRDB

extension SchemaMigration {
    /// PostgreSQL only: the commonest writes' usual case as server-side functions — a refresh
    /// grant, and an access token used with a fresh proof — so each costs one round trip (no
    /// BEGIN, no COMMIT) and its statements' plans stay cached in the connection. Each does only
    /// what the store's change does when every check passes (``ServerStore/refresh(_:proof:)``,
    /// ``ServerStore/useAccessToken(_:proof:)``), and answers NULL or no row, having changed
    /// nothing, when any check fails: the store then runs the whole change, which says why
    /// (reuse, expiry, revocation, a replayed proof). One difference in locks: the refresh
    /// function locks the family's row only, where the store's change locks the profile's too;
    /// nothing it reads of the profile can change under it but by removing the profile, whose
    /// cascade waits for the locked family.
    static let hotPathFunctions = SchemaMigration(
        "v11-hot-path-functions",
        sqlite: { _ in },
        postgres: [
            """
            CREATE FUNCTION gatehouse_rotate_refresh_token(
                p_family TEXT, p_generation BIGINT, p_hash BYTEA, p_key_thumbprint TEXT,
                p_proof TEXT, p_proof_expires_at DOUBLE PRECISION, p_now DOUBLE PRECISION,
                p_access_hash BYTEA, p_access_expires_at DOUBLE PRECISION,
                p_refresh_hash BYTEA, p_refresh_expires_at DOUBLE PRECISION,
                p_channel TEXT, p_announcement TEXT
            ) RETURNS TEXT LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
            DECLARE
                family_row RECORD;
                token_row RECORD;
            BEGIN
                SELECT families.generation, families.revoked, profiles.key_thumbprint,
                    profiles.expires_at AS profile_expires_at
                INTO family_row
                FROM families JOIN profiles ON profiles.id = families.profile_id
                WHERE families.id = p_family
                FOR NO KEY UPDATE OF families;
                IF NOT FOUND OR family_row.revoked OR family_row.key_thumbprint <> p_key_thumbprint
                    OR family_row.generation <> p_generation
                    OR family_row.profile_expires_at <= p_now THEN
                    RETURN NULL;
                END IF;
                SELECT profile_id, key_thumbprint, scope, revoked, expires_at INTO token_row
                FROM tokens WHERE hash = p_hash AND kind = 'refresh';
                IF NOT FOUND OR token_row.revoked OR token_row.expires_at <= p_now THEN
                    RETURN NULL;
                END IF;
                INSERT INTO dpop_proofs (jti, expires_at) VALUES (p_proof, p_proof_expires_at)
                ON CONFLICT (jti) DO NOTHING;
                IF NOT FOUND THEN
                    RETURN NULL;
                END IF;
                UPDATE families SET generation = generation + 1 WHERE id = p_family;
                DELETE FROM tokens WHERE family = p_family;
                INSERT INTO tokens (hash, kind, family, profile_id, key_thumbprint, scope, issued_at, expires_at)
                VALUES (p_access_hash, 'access', p_family, token_row.profile_id, token_row.key_thumbprint,
                        token_row.scope, p_now, p_access_expires_at),
                    (p_refresh_hash, 'refresh', p_family, token_row.profile_id, token_row.key_thumbprint,
                        token_row.scope, p_now, p_refresh_expires_at);
                PERFORM pg_notify(p_channel, p_announcement);
                RETURN token_row.scope;
            END
            $$
            """,
            """
            CREATE FUNCTION gatehouse_use_access_token(
                p_hash BYTEA, p_key_thumbprint TEXT, p_proof TEXT, p_proof_expires_at DOUBLE PRECISION,
                p_now DOUBLE PRECISION
            ) RETURNS TABLE (profile_id TEXT, scope TEXT, subject TEXT, identity_provider TEXT, stateless BOOLEAN,
                family TEXT)
            LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
            DECLARE
                found_row RECORD;
            BEGIN
                SELECT tokens.profile_id AS token_profile, tokens.scope AS token_scope, tokens.family AS token_family,
                    profiles.subject AS profile_subject, profiles.identity_provider AS profile_idp,
                    profiles.stateless AS profile_stateless
                INTO found_row
                FROM tokens JOIN families ON families.id = tokens.family
                    JOIN profiles ON profiles.id = tokens.profile_id
                WHERE tokens.hash = p_hash AND tokens.kind = 'access' AND NOT tokens.revoked AND NOT families.revoked
                    AND tokens.expires_at > p_now AND (profiles.expires_at IS NULL OR profiles.expires_at > p_now)
                    AND tokens.key_thumbprint = p_key_thumbprint;
                IF NOT FOUND THEN
                    RETURN;
                END IF;
                INSERT INTO dpop_proofs (jti, expires_at) VALUES (p_proof, p_proof_expires_at)
                ON CONFLICT (jti) DO NOTHING;
                IF NOT FOUND THEN
                    RETURN;
                END IF;
                profile_id := found_row.token_profile;
                scope := found_row.token_scope;
                subject := found_row.profile_subject;
                identity_provider := found_row.profile_idp;
                stateless := found_row.profile_stateless;
                family := found_row.token_family;
                RETURN NEXT;
            END
            $$
            """,
        ]
    )
}
