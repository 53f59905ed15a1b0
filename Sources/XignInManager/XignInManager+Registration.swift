import Crypto
import Foundation
import GRDB
import GatehouseKernel
import GatehouseOutbound
import GatehouseProtocol
import Logging
import XignInValidators

extension XignInManager {
    // MARK: - Registration

    func register(_ request: WireRequest) async throws -> WireResponse {
        try requireOpen()
        let body = try decode(ManagerRegistrationRequest.self, request)
        guard let category = configuration.categories.first(where: { $0.id == body.category }) else {
            let known = configuration.categories.map(\.id).joined(separator: ", ")
            throw Refusal(
                400,
                "invalid_request",
                "There is no category \"\(body.category)\"; the manager offers: \(known)."
            )
        }
        var values: [PersonalAttribute: String] = [:]
        for (name, value) in body.attributes {
            guard let attribute = PersonalAttribute(rawValue: name) else {
                let known = PersonalAttribute.allCases.map(\.rawValue).joined(separator: ", ")
                throw Refusal(400, "invalid_request", "There is no attribute \"\(name)\"; known attributes: \(known).")
            }
            guard value.count <= 1024 else {
                throw Refusal(400, "invalid_request", "The value of \(name) is longer than 1024 characters.")
            }
            values[attribute] = value
        }
        let arbitrary = body.arbitraryAttributes ?? [:]
        guard arbitrary.count <= 50, arbitrary.allSatisfy({ $0.key.count <= 128 && $0.value.count <= 1024 }) else {
            throw Refusal(
                400,
                "invalid_request",
                "Arbitrary attributes are limited to 50, with keys of 128 and values of 1024 characters."
            )
        }
        if let alias = body.alias, alias.count > 1024 {
            throw Refusal(400, "invalid_request", "The alias is longer than 1024 characters.")
        }
        guard let publicKeyBytes = Data(base64URLEncoded: body.pinPublicKey),
            (try? P256.Signing.PublicKey(x963Representation: publicKeyBytes)) != nil
        else { throw Refusal(400, "invalid_request", "Invalid field pin_public_key: not a P-256 key.") }

        // Every check the client made, made again.
        var errors = configuration.information(for: category).check(values)
        if let email = values[.email], errors[.email] == nil,
            let domain = email.split(separator: "@").last?.lowercased(),
            configuration.blockedEmailDomains.contains(domain)
        {
            errors[.email] = .notAvailable
        }
        let aliasValidator = AliasValidator(
            minLength: configuration.alias.minLength,
            maxLength: configuration.alias.maxLength
        )
        let aliasError = body.alias.map { aliasValidator.resultCode(for: $0) }.flatMap {
            $0 == .valid ? nil : $0.rawValue
        }
        if !errors.isEmpty || aliasError != nil { throw refusal(errors, aliasError: aliasError) }

        let mapping = body.serviceMappingID.flatMap { id in configuration.serviceMappings.first { $0.id == id } }
        let accountID = Self.randomToken(16)
        let code = Self.activationCode()
        let now = now
        let email = values[.email]?.lowercased()
        let attributes = try JSONEncoder().encode(
            Dictionary(uniqueKeysWithValues: values.map { ($0.key.rawValue, $0.value) })
        )
        let lifetime = Double(configuration.activationCodeLifetime)
        let alias = try await pool.write { db -> String in
            guard
                let oprfKey = try Data.fetchOne(
                    db,
                    sql: "SELECT oprf_key FROM pin_keys WHERE token = ? AND expires_at > ?",
                    arguments: [body.pinToken, now]
                )
            else {
                throw Refusal(
                    400,
                    "invalid_request",
                    "The activation PIN's evaluation expired or is unknown; evaluate it again."
                )
            }
            do {
                try db.execute(
                    sql: """
                        INSERT INTO accounts (id, email, category, attributes, oprf_key, pin_public_key, service_mapping, created_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [accountID, email, category.id, attributes, oprfKey, publicKeyBytes, mapping?.id, now]
                )
            } catch DatabaseError.SQLITE_CONSTRAINT_UNIQUE {
                throw self.refusal([.email: .notAvailable], aliasError: nil)
            }
            try db.execute(sql: "DELETE FROM pin_keys WHERE token = ?", arguments: [body.pinToken])
            // Without a valid service mapping, arbitrary attributes are dropped without a word.
            if mapping != nil, !arbitrary.isEmpty {
                try db.execute(
                    sql: "INSERT INTO pending_attributes (account_id, data) VALUES (?, ?)",
                    arguments: [accountID, try JSONEncoder().encode(arbitrary)]
                )
            }
            let alias = body.alias ?? "Activation 1"
            try db.execute(
                sql: "INSERT INTO activation_codes (code_hash, account_id, alias, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [Self.hash(code), accountID, alias, now + lifetime]
            )
            return alias
        }
        try await mail.send(
            ActivationMail(
                to: email ?? accountID,
                alias: alias,
                activationCode: code,
                managerURL: managerURL
            )
        )
        logger.info("XignIn registration", metadata: ["account": "\(accountID)", "category": "\(category.id)"])
        return try json(
            ManagerRegistrationResponse(managerURL: managerURL, accountID: accountID, alias: alias),
            status: 201
        )
    }

    func refusal(_ errors: [PersonalAttribute: AttributeError], aliasError: String?) -> Refusal {
        let named =
            errors.sorted { $0.key < $1.key }.map { "\($0.key.rawValue) \($0.value.rawValue)" }
            + (aliasError.map { ["alias \($0)"] } ?? [])
        return Refusal(
            attributes: ManagerRegistrationRefusal(
                error: "invalid_attributes",
                errorDescription: "The registration was refused: \(named.joined(separator: ", ")).",
                attributeErrors: Dictionary(uniqueKeysWithValues: errors.map { ($0.key.rawValue, $0.value) }),
                aliasError: aliasError
            )
        )
    }

    // MARK: - Activation

    func activate(_ request: WireRequest) async throws -> WireResponse {
        let body = try decode(ActivationRequest.self, request)
        guard let signatureBytes = Data(base64URLEncoded: body.signature),
            let signature = try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes)
        else { throw Refusal(400, "invalid_request", "Invalid field signature: not an ECDSA signature.") }
        let codeHash = Self.hash(body.activationCode.uppercased())
        let now = now
        let maximum = configuration.maxActivationAttempts
        enum Result: Sendable {
            case activated(IdentityManagerEntity, LinkedServiceDelivery?, OutboundURL?)
            case wrongPin(remaining: Int)
        }
        let result = try await pool.write { db -> Result in
            guard
                let attempt = try Row.fetchOne(
                    db,
                    sql: "SELECT * FROM activation_attempts WHERE token = ? AND code_hash = ? AND expires_at > ?",
                    arguments: [body.token, codeHash, now]
                )
            else { throw Refusal(400, "invalid_grant", "The activation attempt is unknown or expired; start again.") }
            // Single use, whatever the outcome.
            try db.execute(sql: "DELETE FROM activation_attempts WHERE token = ?", arguments: [body.token])
            guard
                let code = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT activation_codes.*, accounts.pin_public_key, accounts.email, accounts.service_mapping
                        FROM activation_codes JOIN accounts ON accounts.id = activation_codes.account_id
                        WHERE code_hash = ? AND used = 0 AND expires_at > ?
                        """,
                    arguments: [codeHash, now]
                ),
                let publicKey = try? P256.Signing.PublicKey(x963Representation: code["pin_public_key"] as Data)
            else { return .wrongPin(remaining: 0) }
            let nonce: Data = attempt["nonce"]
            guard
                publicKey.isValidSignature(
                    signature,
                    for: ActivationPinKey.signingInput(token: body.token, nonce: nonce)
                )
            else {
                return .wrongPin(remaining: max(0, maximum - (code["attempts"] as Int)))
            }
            let accountID: String = code["account_id"]
            let entity = IdentityManagerEntity(
                activationID: Self.randomToken(16),
                accountID: accountID,
                alias: code["alias"],
                managerURL: self.managerURL
            )
            try db.execute(sql: "UPDATE activation_codes SET used = 1 WHERE code_hash = ?", arguments: [codeHash])
            try db.execute(
                sql: "INSERT INTO activations (id, account_id, alias, created_at) VALUES (?, ?, ?, ?)",
                arguments: [entity.activationID, accountID, entity.alias, now]
            )
            // Arbitrary attributes go to the linked service once, and are deleted whatever it answers.
            var delivery: LinkedServiceDelivery?
            var webhook: OutboundURL?
            if let data = try Data.fetchOne(
                db,
                sql: "SELECT data FROM pending_attributes WHERE account_id = ?",
                arguments: [accountID]
            ),
                let mappingID = code["service_mapping"] as String?,
                let mapping = self.configuration.serviceMappings.first(where: { $0.id == mappingID })
            {
                try db.execute(sql: "DELETE FROM pending_attributes WHERE account_id = ?", arguments: [accountID])
                delivery = LinkedServiceDelivery(
                    serviceMappingID: mappingID,
                    accountID: accountID,
                    email: code["email"],
                    attributes: (try? JSONDecoder().decode([String: String].self, from: data)) ?? [:]
                )
                webhook = mapping.webhook
            }
            return .activated(entity, delivery, webhook)
        }
        switch result {
        case .wrongPin(let remaining):
            throw Refusal(
                400,
                "invalid_grant",
                remaining > 0
                    ? "The activation PIN is not correct." : "The activation code is locked after too many wrong PINs.",
                remaining: remaining
            )
        case .activated(let entity, let delivery, let webhook):
            if let delivery, let webhook {
                do {
                    try await provisioner.provision(delivery, at: webhook)
                } catch {
                    logger.warning(
                        "The linked service refused the attributes; they are deleted",
                        metadata: ["account": "\(entity.accountID)", "error": "\(error)"]
                    )
                }
            }
            return try json(entity, status: 201)
        }
    }
}
