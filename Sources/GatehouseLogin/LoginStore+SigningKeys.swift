import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

// The provider's signing keys, shared by every instance on the database. Each algorithm has one
// key that signs (signs_from set, retired_at not) and one next key, published but not signing
// (signs_from NULL), so a relying party that fetched the key set knows a key before any token
// is signed with it. A rotation retires the signing key (it stays published until what it
// signed has expired), lets the next one sign and adds a new next one: one transaction, which
// only one instance can carry out for a given signing key.

/// A signing key as stored.
struct StoredSigningKey: Sendable {
    var kid: String
    var algorithm: JSONWebSignature.Algorithm
    var generation: Int
    var pem: String
    var signsFrom: Double?
    var retiredAt: Double?
    var publishedUntil: Double?

    /// Signs now: has started, not retired.
    var isSigning: Bool { signsFrom != nil && retiredAt == nil }
    /// Published, waiting to sign.
    var isNext: Bool { signsFrom == nil }
}

extension LoginStore {
    /// Every published key (signing, next, and retired ones still published), oldest first.
    func publishedSigningKeys(now: Double) async throws -> [StoredSigningKey] {
        try await storage.read { db in
            try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT kid, algorithm, generation, private_pem, signs_from, retired_at, published_until
                    FROM login_signing_keys WHERE published_until IS NULL OR published_until > ?
                    ORDER BY algorithm, generation
                    """,
                arguments: [now]
            ).compactMap { row in
                guard let algorithm = JSONWebSignature.Algorithm(rawValue: row["algorithm"]) else { return nil }
                return StoredSigningKey(
                    kid: row["kid"],
                    algorithm: algorithm,
                    generation: row["generation"],
                    pem: row["private_pem"],
                    signsFrom: row["signs_from"],
                    retiredAt: row["retired_at"],
                    publishedUntil: row["published_until"]
                )
            }
        }
    }

    /// Stores the first keys of `algorithm`: `current` signs from now, `next` waits. Does nothing
    /// when another instance stored its own first keys meanwhile.
    func installFirstSigningKeys(current: SigningKey, next: SigningKey, now: Double) async throws {
        try await storage.write { db in
            for (generation, key) in [(0, current), (1, next)] {
                try db.execute(
                    sql: """
                        INSERT INTO login_signing_keys (kid, algorithm, generation, private_pem, created_at, signs_from)
                        VALUES (?, ?, ?, ?, ?, ?)
                        ON CONFLICT (algorithm, generation) DO NOTHING
                        """,
                    arguments: [
                        key.kid, key.algorithm.rawValue, generation, key.pem, now, generation == 0 ? now : nil,
                    ]
                )
            }
        }
    }

    /// Rotates `algorithm` from the signing key `kid`: it retires (published until `retainUntil`),
    /// the next key signs from `now`, and `newNext` becomes the next key. False when `kid` was
    /// no longer the signing key (another instance rotated first).
    func rotateSigningKey(
        from kid: String,
        algorithm: JSONWebSignature.Algorithm,
        newNext: SigningKey,
        retainUntil: Double,
        now: Double
    ) async throws -> Bool {
        try await storage.write { db in
            guard
                let generation = try Int.fetchOne(
                    db,
                    sql: """
                        UPDATE login_signing_keys SET retired_at = ?, published_until = ?
                        WHERE kid = ? AND retired_at IS NULL AND signs_from IS NOT NULL RETURNING generation
                        """,
                    arguments: [now, retainUntil, kid]
                )
            else { return false }
            try db.execute(
                sql: """
                    UPDATE login_signing_keys SET signs_from = ?
                    WHERE algorithm = ? AND generation = ? AND signs_from IS NULL
                    """,
                arguments: [now, algorithm.rawValue, generation + 1]
            )
            // Without a next key (it cannot be missing unless the table was edited), the new key
            // signs at once rather than leaving the algorithm without a signing key.
            let nextWasThere = db.changesCount == 1
            try db.execute(
                sql: """
                    INSERT INTO login_signing_keys (kid, algorithm, generation, private_pem, created_at, signs_from)
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (algorithm, generation) DO NOTHING
                    """,
                arguments: [
                    newNext.kid, algorithm.rawValue, generation + (nextWasThere ? 2 : 1), newNext.pem, now,
                    nextWasThere ? nil : now,
                ]
            )
            try db.execute(
                sql: "DELETE FROM login_signing_keys WHERE published_until IS NOT NULL AND published_until < ?",
                arguments: [now]
            )
            return true
        }
    }

    /// Adds `key` as the next key after generation `after`, when there is none.
    func installNextSigningKey(_ key: SigningKey, after generation: Int, now: Double) async throws {
        try await storage.write { db in
            try db.execute(
                sql: """
                    INSERT INTO login_signing_keys (kid, algorithm, generation, private_pem, created_at)
                    VALUES (?, ?, ?, ?, ?) ON CONFLICT (algorithm, generation) DO NOTHING
                    """,
                arguments: [key.kid, key.algorithm.rawValue, generation + 1, key.pem, now]
            )
        }
    }
}
