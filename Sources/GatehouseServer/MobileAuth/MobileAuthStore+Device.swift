import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol

// Mobile authentication, the device's side: its pending list, the sealed payload, and the sealed
// answer that spends the nonce (and, for methods with an authenticator, starts the flow).

extension ServerStore {
    // MARK: - The device's side

    /// Checks that `proof` comes from the profile's key and that the profile is enrolled.
    func enrolledDevice(_ profileID: String, proof: ProofUse, _ db: any SQLSession) throws -> SQLRow {
        guard
            let row = try SQLRow.fetchOne(
                db,
                sql: """
                    SELECT profiles.key_thumbprint, mobile_enrolments.* FROM profiles
                    LEFT JOIN mobile_enrolments ON mobile_enrolments.profile_id = profiles.id WHERE profiles.id = ?
                    """,
                arguments: [profileID]
            )
        else { throw StoreRefusal.userDeregistered }
        guard row["key_thumbprint"] == proof.keyThumbprint else {
            throw StoreRefusal.proof("The DPoP proof is not signed by this profile's key.")
        }
        guard let disenrolled = row["disenrolled"] as Bool? else {
            throw StoreRefusal.forbidden(MobileAuthRequestError(.notEnrolled))
        }
        guard !disenrolled else { throw StoreRefusal.forbidden(MobileAuthRequestError(.userDisenrolled)) }
        return row
    }

    /// Whether `subject` has a device enrolled under one of `identityProviders`.
    func hasEnrolledDevice(_ subject: String, identityProviders: [String]) async throws -> Bool {
        try await lookup { db in
            for provider in identityProviders
            where try Int.fetchOne(
                db,
                sql: """
                    SELECT 1 FROM mobile_enrolments WHERE identity_provider = ? AND subject = ? AND NOT disenrolled
                    LIMIT 1
                    """,
                arguments: [provider, subject]
            ) != nil {
                return true
            }
            return false
        }
    }

    /// The profile's pending requests, newest first; `after`: only deliveries after that sequence
    /// number (the event channel's `Last-Event-ID`). Pushed ones only: a scanned code's request
    /// went to the app that scanned it, and another one listening must not answer it too. The proof is recorded: a replayed one is refused.
    func pending(_ profileID: String, proof: ProofUse, after: Int64 = 0) async throws -> [PendingDelivery] {
        try await write { db in
            _ = try self.enrolledDevice(profileID, proof: proof, db)
            try self.record(proof, db)
            return try self.pendingDeliveries(profileID, after: after, now: proof.now, db)
        }
    }

    /// What an open events channel has not sent yet, for the key that opened it; nil when the
    /// device may no longer listen (deregistered, disenrolled, registered again).
    func unsentDeliveries(
        _ profileID: String,
        keyThumbprint: String,
        after: Int64,
        now: Double
    ) async throws -> [PendingDelivery]? {
        try await lookup { db in
            let proof = ProofUse(keyThumbprint: keyThumbprint, jti: "", now: now)
            guard (try? self.enrolledDevice(profileID, proof: proof, db)) != nil else { return nil }
            return try self.pendingDeliveries(profileID, after: after, now: now, db)
        }
    }

    /// A pending request of one device, with its sealed payload.
    struct PendingDelivery: Sendable {
        var seq: Int64
        var notification: PushNotification
        var sealed: Data
    }

    func pendingDeliveries(
        _ profileID: String,
        after: Int64,
        now: Double,
        _ db: any SQLSession
    ) throws -> [PendingDelivery] {
        try SQLRow.fetchAll(
            db,
            sql: """
                SELECT d.seq, d.sealed, t.id, t.message, t.created_at, t.expires_at FROM mobile_deliveries d
                JOIN mobile_transactions t ON t.id = d.transaction_id
                WHERE d.profile_id = ? AND d.seq > ? AND t.status = 'pending' AND t.expires_at > ? AND t.delivery = 'push'
                ORDER BY t.created_at DESC, d.seq DESC
                """,
            arguments: [profileID, after, now]
        )
        .map { row in
            let created: Double = row["created_at"]
            let expires: Double = row["expires_at"]
            return PendingDelivery(
                seq: row["seq"],
                notification: PushNotification(
                    transactionID: row["id"],
                    profileID: profileID,
                    message: row["message"],
                    createdAt: created,
                    timeToLive: Int((expires - created).rounded())
                ),
                sealed: row["sealed"]
            )
        }
    }

    /// The sealed payload of `transactionID` for the profile. The proof is recorded.
    func payload(_ transactionID: String, profileID: String, proof: ProofUse) async throws -> Data {
        try await write { db in
            _ = try self.enrolledDevice(profileID, proof: proof, db)
            let row = try self.delivery(transactionID, profileID, db)
            try self.requireOpen(row, now: proof.now)
            try self.record(proof, db)
            return row["sealed"]
        }
    }

    /// The delivery and its transaction, locked until the change commits: its single-use nonce
    /// is spent by one answer, the others see it spent.
    private func delivery(_ transactionID: String, _ profileID: String, _ db: any SQLSession) throws -> SQLRow {
        guard
            let row = try SQLRow.fetchOne(
                db,
                sql: """
                    SELECT d.sealed, d.nonce_hash, t.* FROM mobile_deliveries d
                    JOIN mobile_transactions t ON t.id = d.transaction_id
                    WHERE d.transaction_id = ? AND d.profile_id = ?
                    \(db.dialect.lockingRows)
                    """,
                arguments: [transactionID, profileID]
            )
        else { throw StoreRefusal.notFound(MobileAuthRequestError(.notFound)) }
        return row
    }

    /// Expired (swept or not) is "not found", answered or superseded is "already handled".
    private func requireOpen(_ transaction: SQLRow, now: Double) throws {
        if let refusal = try self.transaction(transaction).refusalToDevice(at: now) {
            throw Self.storeRefusal(refusal)
        }
    }

    /// What a device's answer does.
    enum AnswerOutcome: Sendable {
        case ended(MobileAuthTransactionStatus)
        /// The method needs an authenticator: this flow approves the transaction when it succeeds.
        case flow(FlowApplied)
    }

    /// Opens and applies a device's sealed answer: single use (the nonce is spent here), bound to
    /// the transaction and to the device's key.
    func answer(
        _ transactionID: String,
        profileID: String,
        sealed: SealedBox,
        proof: ProofUse,
        plan: @escaping @Sendable (String, Bool) -> FlowPlan?,
        flowLifetime: Double
    ) async throws -> AnswerOutcome {
        // Opening is the costliest part of an answer: done before the change with the key a
        // lookup finds for the proof's profile, so the one writer (SQLite) or the locked rows
        // (PostgreSQL) wait for none of it. A key changed in between is opened with in the change.
        let openedAhead = try await openAhead(sealed, transactionID: transactionID, profileID: profileID, proof: proof)
        return try await write { db in
            let device = try self.enrolledDevice(profileID, proof: proof, db)
            let row = try self.delivery(transactionID, profileID, db)
            try self.requireOpen(row, now: proof.now)
            let serverKey: Data = device["server_key"]
            let answer: MobileAuthAnswer
            if let openedAhead, openedAhead.serverKey == serverKey {
                answer = openedAhead.answer
            } else {
                guard let opened = Self.open(sealed, serverKey: serverKey, transactionID: transactionID) else {
                    throw StoreRefusal.request("The answer could not be opened for this transaction.")
                }
                answer = opened
            }
            // A spent nonce: this device answered already (the machine refuses); an unspent one
            // must be this request's.
            let nonceHash: Data = row["nonce_hash"]
            guard nonceHash.isEmpty || ConstantTime.equals(Data(SHA256.hash(data: answer.nonce.data)), nonceHash) else {
                throw StoreRefusal.request("The answer does not carry this request's nonce.")
            }
            var transaction = try self.transaction(row)
            var deviceAnswer = MobileAuthTransaction.DeviceAnswer(
                device: profileID,
                decision: answer.decision == .deny ? .deny(answer.reason) : .approve(number: answer.number),
                alreadyAnswered: nonceHash.isEmpty
            )
            var kept: AnswerSignature?
            if answer.decision == .accept, let signingHash = row["signing_data_hash"] as Data? {
                (deviceAnswer.signature, kept) = Self.checkSignature(answer, signingHash: signingHash, device: device)
            }
            let actions = transaction.answer(deviceAnswer, at: proof.now)
            try self.record(proof, db)
            switch try self.carryOut(actions, transaction: transactionID, signature: kept, db) {
            case .reply(let status):
                if status == .approved || status == .denied {
                    try self.auditProfileEvent(
                        status == .approved ? .pushApproved : .pushDenied,
                        profileID,
                        actor: .user,
                        detail: ["transaction": transactionID, "type": row["type"]],
                        now: proof.now,
                        db
                    )
                }
                return .ended(status)
            case .startFlow:
                return .flow(
                    try self.startTransactionFlow(
                        transactionID,
                        profileID: profileID,
                        proof: proof,
                        plan: plan,
                        flowLifetime: flowLifetime,
                        db
                    )
                )
            case .done:
                // Ended by another change first, with nothing to answer: as every ended transaction.
                throw StoreRefusal.conflict(MobileAuthRequestError(.alreadyHandled))
            }
        }
    }

    /// The answer opened with the server key of `profileID`'s enrolment, when the proof is signed
    /// by the profile's key and the answer opens; nil otherwise (the change then refuses in order).
    private func openAhead(
        _ sealed: SealedBox,
        transactionID: String,
        profileID: String,
        proof: ProofUse
    ) async throws -> (serverKey: Data, answer: MobileAuthAnswer)? {
        let serverKey = try await lookupStatement { db in
            try Data.fetchOne(
                db,
                sql: """
                    SELECT mobile_enrolments.server_key FROM profiles
                    JOIN mobile_enrolments ON mobile_enrolments.profile_id = profiles.id
                    WHERE profiles.id = ? AND profiles.key_thumbprint = ? AND NOT mobile_enrolments.disenrolled
                    """,
                arguments: [profileID, proof.keyThumbprint]
            )
        }
        guard let serverKey, let answer = Self.open(sealed, serverKey: serverKey, transactionID: transactionID) else {
            return nil
        }
        return (serverKey, answer)
    }

    /// The sealed answer opened with the enrolment's raw server key, if it opens for this transaction.
    private static func open(_ sealed: SealedBox, serverKey: Data, transactionID: String) -> MobileAuthAnswer? {
        guard let key = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: serverKey),
            let opened = try? sealed.open(with: key, purpose: .answer, transactionID: transactionID),
            let answer = try? WireCoding.decode(MobileAuthAnswer.self, from: opened),
            answer.transactionID == transactionID
        else { return nil }
        return answer
    }

    /// The verdict on the device's transaction signature, and what to keep of it.
    private static func checkSignature(
        _ answer: MobileAuthAnswer,
        signingHash: Data,
        device: SQLRow
    ) -> (MobileAuthTransaction.DeviceAnswer.Signature, AnswerSignature?) {
        // The device signs the hash of the signing data: the store never holds the data itself.
        let content = MobileAuthAnswer.signedContent(
            transactionID: answer.transactionID,
            signingDataHash: signingHash,
            decision: answer.decision
        )
        guard let jwk = answer.publicKey, jwk.thumbprint == device["key_thumbprint"], let key = jwk.publicKey(),
            let signatureData = answer.signature?.data,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            let encodedKey = try? WireCoding.encode(jwk)
        else { return (.unusable, nil) }
        let verified = key.isValidSignature(signature, for: content)
        return (
            verified ? .verified : .failed,
            AnswerSignature(signature: signatureData, publicKey: String(decoding: encodedKey, as: UTF8.self))
        )
    }

    private func startTransactionFlow(
        _ transactionID: String,
        profileID: String,
        proof: ProofUse,
        plan: (String, Bool) -> FlowPlan?,
        flowLifetime: Double,
        _ db: any SQLSession
    ) throws -> FlowApplied {
        guard
            let profile = try SQLRow.fetchOne(
                db,
                sql: "SELECT * FROM profiles WHERE id = ?",
                arguments: [profileID]
            ),
            let typeName = try String.fetchOne(
                db,
                sql: "SELECT type FROM mobile_transactions WHERE id = ?",
                arguments: [transactionID]
            ),
            let chosen = plan(typeName, false).flatMap({ wanted -> FlowPlan? in
                // An authenticator the profile lacks: the PIN, which every profile has.
                guard case .authenticate(let id) = wanted.stages.first else { return nil }
                return (try? self.hasRegistration(profileID, id, db)) == true ? wanted : plan(typeName, true)
            })
        else { throw StoreRefusal.inconsistent("The transaction's type is no longer configured.") }
        var row = FlowRow(
            id: Data.random(count: 24).base64URLEncodedString,
            clientID: profile["client_id"],
            profileID: profileID,
            scope: profile["scope"],
            keyThumbprint: proof.keyThumbprint,
            expiresAt: proof.now + flowLifetime,
            plan: chosen,
            transactionID: transactionID
        )
        let (machine, actions) = FlowMachine.start(
            chosen,
            counter: try counter(profileID, excluding: nil, now: proof.now, db)
        )
        row.state = machine.state
        try insert(row, db)
        return try apply(actions, to: &row, now: proof.now, db)
    }
}
