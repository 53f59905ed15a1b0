import Crypto
import Foundation
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
        // Without a valid service mapping, arbitrary attributes are dropped without a word.
        let pending = mapping != nil && !arbitrary.isEmpty ? try JSONEncoder().encode(arbitrary) : nil
        let alias = body.alias ?? "Activation 1"
        let account = XignInStore.NewAccount(
            id: accountID,
            email: email,
            category: category.id,
            attributes: attributes,
            pinPublicKey: publicKeyBytes,
            serviceMapping: mapping?.id,
            pendingAttributes: pending,
            alias: alias,
            codeHash: Self.hash(code),
            codeExpiresAt: now + Double(configuration.activationCodeLifetime)
        )
        switch try await store.register(account, pinToken: body.pinToken, now: now) {
        case .registered: break
        case .pinEvaluationUnknown:
            throw Refusal(
                400,
                "invalid_request",
                "The activation PIN's evaluation expired or is unknown; evaluate it again."
            )
        case .emailTaken: throw refusal([.email: .notAvailable], aliasError: nil)
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
        let attempt = XignInStore.ActivationRequest(
            token: body.token,
            codeHash: codeHash,
            activationID: Self.randomToken(16),
            maximumAttempts: configuration.maxActivationAttempts,
            configuredMappings: Set(configuration.serviceMappings.map(\.id)),
            now: now
        )
        let token = body.token
        let outcome = try await store.activate(attempt) { pinPublicKey, nonce in
            guard let publicKey = try? P256.Signing.PublicKey(x963Representation: pinPublicKey) else { return false }
            return publicKey.isValidSignature(signature, for: ActivationPinKey.signingInput(token: token, nonce: nonce))
        }
        switch outcome {
        case .unknownAttempt:
            throw Refusal(400, "invalid_grant", "The activation attempt is unknown or expired; start again.")
        case .wrongPin(let remaining):
            throw Refusal(
                400,
                "invalid_grant",
                remaining > 0
                    ? "The activation PIN is not correct." : "The activation code is locked after too many wrong PINs.",
                remaining: remaining
            )
        case .activated(let activated):
            let entity = IdentityManagerEntity(
                activationID: attempt.activationID,
                accountID: activated.accountID,
                alias: activated.alias,
                managerURL: managerURL
            )
            // Arbitrary attributes go to the linked service once, and are deleted whatever it answers.
            if let data = activated.pendingAttributes, let mappingID = activated.serviceMapping,
                let webhook = configuration.serviceMappings.first(where: { $0.id == mappingID })?.webhook
            {
                let delivery = LinkedServiceDelivery(
                    serviceMappingID: mappingID,
                    accountID: activated.accountID,
                    email: activated.email,
                    attributes: (try? JSONDecoder().decode([String: String].self, from: data)) ?? [:]
                )
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
