import Foundation
import GatehouseServer

extension XignInStore {
    // MARK: - Registration

    /// An account as registration makes it, with its first activation code.
    struct NewAccount: Sendable {
        var id: String
        /// Lowercased; unique among accounts.
        var email: String?
        var category: String
        /// The personal attributes, as JSON.
        var attributes: Data
        /// The X9.63 public half of the key the client derived from the activation PIN.
        var pinPublicKey: Data
        var serviceMapping: String?
        /// Arbitrary attributes for the linked service, as JSON; kept only with a service mapping.
        var pendingAttributes: Data?
        var alias: String
        var codeHash: Data
        var codeExpiresAt: Double
    }

    enum RegistrationOutcome: Sendable, Equatable {
        case registered
        /// No usable PIN evaluation under the token (never made, lapsed or already used).
        case pinEvaluationUnknown
        /// Another account has the e-mail address; nothing changed.
        case emailTaken
    }

    /// Creates `account` with the OPRF key kept under `pinToken`, which this uses up.
    func register(_ account: NewAccount, pinToken: String, now: Double) async throws -> RegistrationOutcome {
        try await storage.write { db in
            guard
                let oprfKey = try Data.fetchOne(
                    db,
                    sql: """
                        SELECT oprf_key FROM xignin_pin_keys WHERE token = ? AND expires_at > ? \(db.dialect.lockingRows)
                        """,
                    arguments: [pinToken, now]
                )
            else { return .pinEvaluationUnknown }
            // Checked by the insert itself, so two registrations of one address at once cannot
            // both pass; the PIN evaluation is kept for a corrected registration.
            try db.execute(
                sql: """
                    INSERT INTO xignin_accounts (id, email, category, attributes, oprf_key, pin_public_key, service_mapping, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (email) DO NOTHING
                    """,
                arguments: [
                    account.id, account.email, account.category, account.attributes, oprfKey, account.pinPublicKey,
                    account.serviceMapping, now,
                ]
            )
            guard db.changesCount == 1 else { return .emailTaken }
            try db.execute(sql: "DELETE FROM xignin_pin_keys WHERE token = ?", arguments: [pinToken])
            if let pending = account.pendingAttributes {
                try db.execute(
                    sql: "INSERT INTO xignin_pending_attributes (account_id, data) VALUES (?, ?)",
                    arguments: [account.id, pending]
                )
            }
            try db.execute(
                sql:
                    "INSERT INTO xignin_activation_codes (code_hash, account_id, alias, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [account.codeHash, account.id, account.alias, account.codeExpiresAt]
            )
            return .registered
        }
    }

    // MARK: - Activation

    /// An activation asked for with the token and nonce of a PIN evaluation.
    struct ActivationRequest: Sendable {
        var token: String
        var codeHash: Data
        /// The id the activation gets when it succeeds.
        var activationID: String
        var maximumAttempts: Int
        /// Service mappings still configured: pending attributes for any other are kept.
        var configuredMappings: Set<String>
        var now: Double
    }

    /// What the account's first activation hands on.
    struct Activated: Sendable, Equatable {
        var accountID: String
        var alias: String
        var email: String?
        var serviceMapping: String?
        /// The arbitrary attributes (JSON) for the linked service, claimed by this activation:
        /// no other activation sees them.
        var pendingAttributes: Data?
    }

    enum ActivationOutcome: Sendable, Equatable {
        /// No such PIN evaluation for this code, or it lapsed or was used.
        case unknownAttempt
        /// The signature does not verify with the account's PIN key, or the code was used,
        /// lapsed or is unknown; `remaining` PIN evaluations are left for the code.
        case wrongPin(remaining: Int)
        case activated(Activated)
    }

    /// Uses up the PIN evaluation `request.token`, whatever the outcome, and activates the
    /// code when `signatureIsValid(pinPublicKey, nonce)`. The code is marked used by a
    /// statement that checks it is not, so one code activates once however many try at once.
    func activate(
        _ request: ActivationRequest,
        signatureIsValid: @escaping @Sendable (_ pinPublicKey: Data, _ nonce: Data) -> Bool
    ) async throws -> ActivationOutcome {
        try await storage.write { db in
            guard
                let nonce = try Data.fetchOne(
                    db,
                    sql: """
                        DELETE FROM xignin_activation_attempts WHERE token = ? AND code_hash = ? AND expires_at > ?
                        RETURNING nonce
                        """,
                    arguments: [request.token, request.codeHash, request.now]
                )
            else { return .unknownAttempt }
            guard
                let code = try SQLRow.fetchOne(
                    db,
                    sql: """
                        SELECT xignin_activation_codes.account_id, xignin_activation_codes.alias, xignin_activation_codes.attempts,
                            xignin_accounts.pin_public_key, xignin_accounts.email, xignin_accounts.service_mapping
                        FROM xignin_activation_codes JOIN xignin_accounts ON xignin_accounts.id = xignin_activation_codes.account_id
                        WHERE code_hash = ? AND used = FALSE AND xignin_activation_codes.expires_at > ? \(db.dialect.lockingRows)
                        """,
                    arguments: [request.codeHash, request.now]
                )
            else { return .wrongPin(remaining: 0) }
            guard signatureIsValid(code["pin_public_key"], nonce) else {
                return .wrongPin(remaining: max(0, request.maximumAttempts - (code["attempts"] as Int)))
            }
            try db.execute(
                sql: "UPDATE xignin_activation_codes SET used = TRUE WHERE code_hash = ? AND used = FALSE",
                arguments: [request.codeHash]
            )
            guard db.changesCount == 1 else { return .wrongPin(remaining: 0) }
            var activated = Activated(
                accountID: code["account_id"],
                alias: code["alias"],
                email: code["email"],
                serviceMapping: code["service_mapping"]
            )
            try db.execute(
                sql: "INSERT INTO xignin_activations (id, account_id, alias, created_at) VALUES (?, ?, ?, ?)",
                arguments: [request.activationID, activated.accountID, activated.alias, request.now]
            )
            // Claimed by the delete: the linked service hears of them once, whatever it answers.
            if let mapping = activated.serviceMapping, request.configuredMappings.contains(mapping) {
                activated.pendingAttributes = try Data.fetchOne(
                    db,
                    sql: "DELETE FROM xignin_pending_attributes WHERE account_id = ? RETURNING data",
                    arguments: [activated.accountID]
                )
            }
            return .activated(activated)
        }
    }
}
