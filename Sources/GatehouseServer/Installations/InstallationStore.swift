import Foundation
import GatehouseKernel
import GatehouseProtocol

// The installations: one row per registered key.

extension ServerStore {
    struct Client: Sendable {
        var appID: String
        var keyThumbprint: String
    }

    /// Registers an installation's key, or returns the id it already has; one request from the
    /// address' bucket of `limit`, which every instance shares.
    func registerClient(
        appID: String,
        proof: ProofUse,
        limit: SharedRateLimit,
        address: String?
    ) async throws -> String {
        try await write { db in
            try Self.take(limit, forAddress: address, now: proof.now, db)
            try self.record(proof, db)
            // The same key registered twice at once (two instances): one row, both get its id.
            try db.execute(
                sql: """
                    INSERT INTO clients (id, app_id, key_thumbprint, created_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (key_thumbprint) DO NOTHING
                    """,
                arguments: [Data.random(count: 16).base64URLEncodedString, appID, proof.keyThumbprint, proof.now]
            )
            guard
                let id = try String.fetchOne(
                    db,
                    sql: "SELECT id FROM clients WHERE key_thumbprint = ?",
                    arguments: [proof.keyThumbprint]
                )
            else { throw ServerDatabaseError("The installation could not be stored.") }
            return id
        }
    }

    func client(_ id: String) async throws -> Client? {
        try await lookup { db in
            try SQLRow.fetchOne(db, sql: "SELECT app_id, key_thumbprint FROM clients WHERE id = ?", arguments: [id])
                .map {
                    Client(appID: $0["app_id"], keyThumbprint: $0["key_thumbprint"])
                }
        }
    }
}
