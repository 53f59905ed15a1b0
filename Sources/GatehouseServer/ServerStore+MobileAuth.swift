import Crypto
import Foundation
import GRDB
import GatehouseKernel
import GatehouseProtocol

// Mobile authentication's state: enrolments, transactions, their sealed deliveries, and the
// callback outbox. Every change is one transaction, as for flows.

extension ServerStore {
    // MARK: - Enrolment

    /// Enrols the session's profile: keeps the device's HPKE key and makes the server's own for
    /// this enrolment. Returns the server's public key.
    func enrolMobileAuth(
        token: String,
        proof: ProofUse,
        deviceKey: Data,
        mode: MobileAuthConfiguration.EnrolmentMode
    ) async throws -> Data {
        try await pool.write { db in
            let session = try self.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            let others = try String.fetchAll(
                db,
                sql:
                    "SELECT profile_id FROM mobile_enrolments WHERE subject = ? AND profile_id != ? AND NOT disenrolled",
                arguments: [session.subject, session.profileID]
            )
            switch mode {
            case .single where !others.isEmpty:
                throw ServerError(MobileAuthEnrollmentError(.userAlreadyEnrolled), status: 409)
            case .override:
                for other in others {
                    try db.execute(
                        sql: "UPDATE mobile_enrolments SET disenrolled = 1, push_token = NULL WHERE profile_id = ?",
                        arguments: [other]
                    )
                    try self.endTransactions(askedOf: other, reason: "device_disenrolled", now: proof.now, db)
                }
            case .single, .multiple: break
            }
            try self.record(proof, db)
            let serverKey = Curve25519.KeyAgreement.PrivateKey()
            try db.execute(
                sql: """
                    INSERT INTO mobile_enrolments (profile_id, subject, device_key, server_key, created_at)
                    VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(profile_id) DO UPDATE SET device_key = excluded.device_key,
                        server_key = excluded.server_key, disenrolled = 0, created_at = excluded.created_at
                    """,
                arguments: [session.profileID, session.subject, deviceKey, serverKey.rawRepresentation, proof.now]
            )
            return serverKey.publicKey.rawRepresentation
        }
    }

    /// Sets where the profile's pushes go. Needs the mobile-auth enrolment first.
    /// `refresh`: only replace a push token the profile already has.
    func enrolPush(
        token: String,
        proof: ProofUse,
        pushToken: String,
        platform: PushPlatform,
        refresh: Bool
    ) async throws {
        try await pool.write { db in
            let session = try self.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            let enrolment = try Row.fetchOne(
                db,
                sql: "SELECT disenrolled, push_token FROM mobile_enrolments WHERE profile_id = ?",
                arguments: [session.profileID]
            )
            let disenrolled = enrolment?["disenrolled"] as Bool?
            if refresh, disenrolled == false, enrolment?["push_token"] as String? == nil {
                throw ServerError(
                    MobileAuthEnrollmentError(.notEnrolled, message: "Enrol for push first; then refresh its token."),
                    status: 409
                )
            }
            guard disenrolled == false else {
                throw ServerError(
                    disenrolled == true
                        ? MobileAuthEnrollmentError(.notEnrolled, message: "The profile was disenrolled; enrol again.")
                        : MobileAuthEnrollmentError(.notEnrolled),
                    status: 409
                )
            }
            try self.record(proof, db)
            do {
                try db.execute(
                    sql: "UPDATE mobile_enrolments SET push_token = ?, platform = ? WHERE profile_id = ?",
                    arguments: [pushToken, platform.rawValue, session.profileID]
                )
            } catch DatabaseError.SQLITE_CONSTRAINT_UNIQUE {
                throw ServerError(MobileAuthEnrollmentError(.deviceAlreadyEnrolled), status: 409)
            }
        }
    }

    /// Whether the session's profile is enrolled, and for push.
    func enrolmentStatus(token: String, proof: ProofUse) async throws -> MobileAuthEnrolmentStatus {
        try await pool.read { db in
            let session = try self.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            let row = try Row.fetchOne(
                db,
                sql: "SELECT push_token FROM mobile_enrolments WHERE profile_id = ? AND NOT disenrolled",
                arguments: [session.profileID]
            )
            return MobileAuthEnrolmentStatus(enrolled: row != nil, pushEnrolled: row?["push_token"] != nil)
        }
    }

    // MARK: - Starting transactions

    /// What the portal asked, as the store keeps and seals it.
    struct NewTransaction: Sendable {
        var id: String
        var apiClient: String
        var subject: String
        var type: MobileAuthConfiguration.TransactionType
        var message: String
        var secureMessage: String?
        var signingData: String?
        var callbackURI: String?
        var number: Int?
        var pinAuthenticator: String
        var now: Double
    }

    /// A device asked to answer, and where its push goes.
    struct Delivery: Sendable {
        var seq: Int64
        var profileID: String
        var pushToken: String?
        var platform: PushPlatform?
    }

    /// Starts a transaction: one sealed payload per enrolled device of the user, older pending
    /// transactions of the type superseded. Returns the devices to notify.
    func startTransaction(_ new: NewTransaction) async throws -> [Delivery] {
        try await pool.write { db in
            let devices = try Row.fetchAll(
                db,
                sql: """
                    SELECT profile_id, device_key, push_token, platform FROM mobile_enrolments
                    WHERE subject = ? AND NOT disenrolled ORDER BY created_at DESC
                    """,
                arguments: [new.subject]
            )
            guard !devices.isEmpty else {
                throw ServerError(404, "not_found", "The user has no device enrolled for mobile authentication.")
            }
            if new.type.supersedesPending {
                let superseded = try String.fetchAll(
                    db,
                    sql: "SELECT id FROM mobile_transactions WHERE subject = ? AND type = ? AND status = 'pending'",
                    arguments: [new.subject, new.type.name]
                )
                for id in superseded { try self.end(id, status: .denied, reason: "superseded", now: new.now, db) }
            }
            try db.execute(
                sql: """
                    INSERT INTO mobile_transactions (id, api_client, subject, type, method, message, number,
                        signing_data_hash, callback_uri, status, created_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)
                    """,
                arguments: [
                    new.id, new.apiClient, new.subject, new.type.name, new.type.method.rawValue, new.message,
                    new.number,
                    new.signingData.map { Data(SHA256.hash(data: Data($0.utf8))) }, new.callbackURI, new.now,
                    new.now + Double(new.type.timeToLive),
                ]
            )
            var deliveries: [Delivery] = []
            for device in devices {
                let profileID: String = device["profile_id"]
                guard let deviceKey = Curve25519.KeyAgreement.PublicKey(wire: Base64URLData(device["device_key"]))
                else { continue }
                let nonce = Data.random(count: 32)
                let payload = MobileAuthPayload(
                    transactionID: new.id,
                    profileID: profileID,
                    type: new.type.name,
                    method: new.type.method,
                    authenticator: new.type.authenticator,
                    message: new.message,
                    secureMessage: new.secureMessage,
                    signingData: new.signingData,
                    numberMatching: new.number != nil,
                    nonce: nonce,
                    expiresAt: new.now + Double(new.type.timeToLive)
                )
                let sealed = try SealedBox.seal(
                    try WireCoding.encode(payload),
                    for: deviceKey,
                    purpose: .payload,
                    transactionID: new.id
                )
                try db.execute(
                    sql: """
                        INSERT INTO mobile_deliveries (transaction_id, profile_id, sealed, nonce_hash) VALUES (?, ?, ?, ?)
                        """,
                    arguments: [new.id, profileID, try WireCoding.encode(sealed), Data(SHA256.hash(data: nonce))]
                )
                deliveries.append(
                    Delivery(
                        seq: db.lastInsertedRowID,
                        profileID: profileID,
                        pushToken: device["push_token"],
                        platform: (device["platform"] as String?).flatMap(PushPlatform.init(rawValue:))
                    )
                )
            }
            return deliveries
        }
    }

    // MARK: - The device's side

    /// Checks that `proof` comes from the profile's key and that the profile is enrolled.
    private func enrolledDevice(_ profileID: String, proof: ProofUse, _ db: Database) throws -> Row {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT profiles.key_thumbprint, mobile_enrolments.* FROM profiles
                    LEFT JOIN mobile_enrolments ON mobile_enrolments.profile_id = profiles.id WHERE profiles.id = ?
                    """,
                arguments: [profileID]
            )
        else { throw ServerError.userDeregistered }
        guard row["key_thumbprint"] == proof.keyThumbprint else {
            throw ServerError.invalidProof("The DPoP proof is not signed by this profile's key.")
        }
        guard let disenrolled = row["disenrolled"] as Bool? else {
            throw ServerError(MobileAuthRequestError(.notEnrolled), status: 403)
        }
        guard !disenrolled else { throw ServerError(MobileAuthRequestError(.userDisenrolled), status: 403) }
        return row
    }

    /// The profile's pending requests, newest first; `after`: only deliveries after that sequence
    /// number (the event channel's `Last-Event-ID`).
    func pending(_ profileID: String, proof: ProofUse, after: Int64? = nil) async throws -> [(Int64, PushNotification)]
    {
        try await pool.read { db in
            _ = try self.enrolledDevice(profileID, proof: proof, db)
            return try self.pendingDeliveries(profileID, after: after ?? 0, now: proof.now, db)
        }
    }

    func pendingDeliveries(
        _ profileID: String,
        after: Int64,
        now: Double,
        _ db: Database
    ) throws -> [(
        Int64, PushNotification
    )] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT d.seq, t.id, t.message, t.created_at, t.expires_at FROM mobile_deliveries d
                JOIN mobile_transactions t ON t.id = d.transaction_id
                WHERE d.profile_id = ? AND d.seq > ? AND t.status = 'pending' AND t.expires_at > ?
                ORDER BY t.created_at DESC, d.seq DESC
                """,
            arguments: [profileID, after, now]
        )
        .map { row in
            let created: Double = row["created_at"]
            let expires: Double = row["expires_at"]
            return (
                row["seq"],
                PushNotification(
                    transactionID: row["id"],
                    profileID: profileID,
                    message: row["message"],
                    createdAt: created,
                    timeToLive: Int((expires - created).rounded())
                )
            )
        }
    }

    /// The sealed payload of `transactionID` for the profile.
    func payload(_ transactionID: String, profileID: String, proof: ProofUse) async throws -> Data {
        try await pool.read { db in
            _ = try self.enrolledDevice(profileID, proof: proof, db)
            let row = try self.delivery(transactionID, profileID, db)
            try self.requireOpen(row, now: proof.now)
            return row["sealed"]
        }
    }

    private func delivery(_ transactionID: String, _ profileID: String, _ db: Database) throws -> Row {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT d.sealed, d.nonce_hash, t.* FROM mobile_deliveries d
                    JOIN mobile_transactions t ON t.id = d.transaction_id
                    WHERE d.transaction_id = ? AND d.profile_id = ?
                    """,
                arguments: [transactionID, profileID]
            )
        else { throw ServerError(MobileAuthRequestError(.notFound), status: 404) }
        return row
    }

    private func requireOpen(_ transaction: Row, now: Double) throws {
        guard transaction["status"] == "pending" else {
            throw ServerError(MobileAuthRequestError(.alreadyHandled), status: 409)
        }
        guard (transaction["expires_at"] as Double) > now else {
            throw ServerError(MobileAuthRequestError(.notFound, message: "The request expired."), status: 404)
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
        plan: @Sendable (String, Bool) -> FlowPlan?,
        flowLifetime: Double
    ) async throws -> AnswerOutcome {
        try await pool.write { db in
            let device = try self.enrolledDevice(profileID, proof: proof, db)
            let row = try self.delivery(transactionID, profileID, db)
            try self.requireOpen(row, now: proof.now)
            let serverKey = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: device["server_key"] as Data)
            guard let opened = try? sealed.open(with: serverKey, purpose: .answer, transactionID: transactionID),
                let answer = try? WireCoding.decode(MobileAuthAnswer.self, from: opened),
                answer.transactionID == transactionID
            else { throw ServerError.invalidRequest("The answer could not be opened for this transaction.") }
            let nonceHash: Data = row["nonce_hash"]
            guard !nonceHash.isEmpty else { throw ServerError(MobileAuthRequestError(.alreadyHandled), status: 409) }
            guard ConstantTime.equals(Data(SHA256.hash(data: answer.nonce.data)), nonceHash) else {
                throw ServerError.invalidRequest("The answer does not carry this request's nonce.")
            }
            try self.record(proof, db)
            try db.execute(
                sql: "UPDATE mobile_deliveries SET nonce_hash = X'' WHERE transaction_id = ? AND profile_id = ?",
                arguments: [transactionID, profileID]
            )
            if answer.decision == .deny {
                try self.end(
                    transactionID,
                    status: .denied,
                    reason: (answer.reason ?? .notAccepted).rawValue,
                    now: proof.now,
                    by: profileID,
                    db
                )
                return .ended(.denied)
            }
            if let expected = row["number"] as Int? {
                guard let typed = answer.number, ConstantTime.equals(String(typed), String(expected)) else {
                    // One try: a wrong number ends the transaction, so it cannot be guessed.
                    try self.end(
                        transactionID,
                        status: .denied,
                        reason: "invalid_answer",
                        now: proof.now,
                        by: profileID,
                        db
                    )
                    return .ended(.denied)
                }
            }
            if let signingHash = row["signing_data_hash"] as Data? {
                try self.verifySignature(answer, signingHash: signingHash, device: device, transactionID, db)
            }
            let method = MobileAuthMethod(rawValue: row["method"]) ?? .confirmation
            guard method != .confirmation else {
                try self.end(transactionID, status: .approved, reason: nil, now: proof.now, by: profileID, db)
                try db.execute(
                    sql: "UPDATE mobile_transactions SET authentication_method = 'confirmation' WHERE id = ?",
                    arguments: [transactionID]
                )
                return .ended(.approved)
            }
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
        }
    }

    private func verifySignature(
        _ answer: MobileAuthAnswer,
        signingHash: Data,
        device: Row,
        _ transactionID: String,
        _ db: Database
    ) throws {
        // The device signs the hash of the signing data: the store never holds the data itself.
        let content = MobileAuthAnswer.signedContent(
            transactionID: transactionID,
            signingDataHash: signingHash,
            decision: answer.decision
        )
        guard let jwk = answer.publicKey, jwk.thumbprint == device["key_thumbprint"], let key = jwk.publicKey(),
            let signatureData = answer.signature?.data,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData)
        else { throw ServerError.invalidRequest("This type signs transactions: sign with the profile's key.") }
        let verified = key.isValidSignature(signature, for: content)
        try db.execute(
            sql: """
                UPDATE mobile_transactions SET signature = ?, user_public_key = ?, signature_verified = ? WHERE id = ?
                """,
            arguments: [
                signatureData, String(decoding: try WireCoding.encode(jwk), as: UTF8.self), verified, transactionID,
            ]
        )
        guard verified else { throw ServerError.invalidRequest("The transaction signature is not valid.") }
    }

    private func startTransactionFlow(
        _ transactionID: String,
        profileID: String,
        proof: ProofUse,
        plan: (String, Bool) -> FlowPlan?,
        flowLifetime: Double,
        _ db: Database
    ) throws -> FlowApplied {
        guard let profile = try Row.fetchOne(db, sql: "SELECT * FROM profiles WHERE id = ?", arguments: [profileID]),
            let method = try String.fetchOne(
                db,
                sql: "SELECT type FROM mobile_transactions WHERE id = ?",
                arguments: [transactionID]
            ),
            let chosen = plan(method, false).flatMap({ wanted -> FlowPlan? in
                // An authenticator the profile lacks: the PIN, which every profile has.
                guard case .authenticate(let id) = wanted.stages.first else { return nil }
                return (try? self.hasRegistration(profileID, id, db)) == true ? wanted : plan(method, true)
            })
        else { throw ServerError(500, "server_error", "The transaction's type is no longer configured.") }
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

    // MARK: - Ending transactions

    /// Approves the flow's transaction; refused when it ended meanwhile (answered on another
    /// device, superseded, expired).
    func approveTransaction(for flow: FlowRow, now: Double, _ db: Database) throws {
        guard let id = flow.transactionID else { return }
        let open = try Bool.fetchOne(
            db,
            sql: "SELECT 1 FROM mobile_transactions WHERE id = ? AND status = 'pending' AND expires_at > ?",
            arguments: [id, now]
        )
        guard open == true else { throw ServerError(MobileAuthRequestError(.alreadyHandled), status: 409) }
        let method = flow.state.plan.stages.first.map(\.plugin)
        try end(id, status: .approved, reason: nil, now: now, by: flow.profileID, db)
        try db.execute(
            sql: "UPDATE mobile_transactions SET authentication_method = ? WHERE id = ?",
            arguments: [method, id]
        )
    }

    /// A flow for a transaction ended without approving it.
    func flowEndedWithoutApproval(_ flow: FlowRow, refused: Bool, now: Double, _ db: Database) throws {
        guard let id = flow.transactionID else { return }
        try end(
            id,
            status: .denied,
            reason: refused ? "invalid_answer" : "not_accepted",
            now: now,
            by: flow.profileID,
            db
        )
    }

    /// Ends the pending transactions `profileID` was asked about that no other device can still answer.
    func endTransactions(askedOf profileID: String, reason: String, now: Double?, _ db: Database) throws {
        let ids = try String.fetchAll(
            db,
            sql: """
                SELECT t.id FROM mobile_transactions t JOIN mobile_deliveries d ON d.transaction_id = t.id
                WHERE d.profile_id = ? AND t.status = 'pending'
                AND NOT EXISTS (SELECT 1 FROM mobile_deliveries o JOIN mobile_enrolments e ON e.profile_id = o.profile_id
                    WHERE o.transaction_id = t.id AND o.profile_id != ? AND NOT e.disenrolled)
                """,
            arguments: [profileID, profileID]
        )
        let time = now ?? Date().timeIntervalSince1970
        for id in ids { try end(id, status: .denied, reason: reason, now: time, db) }
    }

    /// Ends a pending transaction and, when it has a callback, puts the callback in the outbox.
    func end(
        _ id: String,
        status: MobileAuthTransactionStatus,
        reason: String?,
        now: Double,
        by profileID: String? = nil,
        _ db: Database
    ) throws {
        try db.execute(
            sql: """
                UPDATE mobile_transactions SET status = ?, reason = ?, answered_at = ?, answered_by = ?,
                    callback_state = CASE WHEN callback_uri IS NULL THEN 'none' ELSE 'due' END, callback_next_at = ?
                WHERE id = ? AND status = 'pending'
                """,
            arguments: [status.rawValue, reason, now, profileID, now, id]
        )
    }

    // MARK: - The portal's side

    func transactionResult(_ id: String, apiClient: String, now: Double) async throws -> PortalTransactionResult? {
        try await pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT * FROM mobile_transactions WHERE id = ? AND api_client = ?",
                    arguments: [id, apiClient]
                )
            else { return nil }
            var status = MobileAuthTransactionStatus(rawValue: row["status"]) ?? .pending
            var reason: String? = row["reason"]
            if status == .pending, (row["expires_at"] as Double) <= now { (status, reason) = (.expired, "expired") }
            return PortalTransactionResult(
                transactionID: id,
                userID: row["subject"],
                type: row["type"],
                status: status,
                authenticationMethod: row["authentication_method"],
                reason: reason,
                createdAt: row["created_at"],
                answeredAt: row["answered_at"],
                signature: row["signature"],
                userPublicKey: (row["user_public_key"] as String?).flatMap {
                    try? WireCoding.decode(PublicJWK.self, from: Data($0.utf8))
                },
                signatureVerified: row["signature_verified"]
            )
        }
    }

    /// A callback to make.
    struct DueCallback: Sendable {
        var transactionID: String
        var apiClient: String
        var uri: String
        var status: MobileAuthTransactionStatus
        var attempts: Int
    }

    /// Marks lapsed pending transactions expired, then returns the callbacks due by `now`.
    func dueCallbacks(now: Double) async throws -> [DueCallback] {
        try await pool.write { db in
            let lapsed = try String.fetchAll(
                db,
                sql: "SELECT id FROM mobile_transactions WHERE status = 'pending' AND expires_at <= ?",
                arguments: [now]
            )
            for id in lapsed { try self.end(id, status: .expired, reason: "expired", now: now, db) }
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT id, api_client, callback_uri, status, callback_attempts FROM mobile_transactions
                    WHERE callback_state = 'due' AND callback_next_at <= ? ORDER BY callback_next_at LIMIT 64
                    """,
                arguments: [now]
            )
            .map {
                DueCallback(
                    transactionID: $0["id"],
                    apiClient: $0["api_client"],
                    uri: $0["callback_uri"],
                    status: MobileAuthTransactionStatus(rawValue: $0["status"]) ?? .pending,
                    attempts: $0["callback_attempts"]
                )
            }
        }
    }

    /// Records a callback try: sent, or due again after `retryAt` (nil: given up).
    func callbackTried(_ id: String, delivered: Bool, retryAt: Double?) async throws {
        try await pool.write { db in
            let state = delivered ? "sent" : (retryAt == nil ? "failed" : "due")
            try db.execute(
                sql: """
                    UPDATE mobile_transactions SET callback_state = ?, callback_attempts = callback_attempts + 1,
                        callback_next_at = ? WHERE id = ?
                    """,
                arguments: [state, retryAt, id]
            )
        }
    }

    /// The earliest moment a callback is due or a pending transaction lapses, if any.
    func nextCallbackWork() async throws -> Double? {
        try await pool.read { db in
            try Double.fetchOne(
                db,
                sql: """
                    SELECT MIN(t) FROM (
                        SELECT MIN(callback_next_at) AS t FROM mobile_transactions WHERE callback_state = 'due'
                        UNION ALL SELECT MIN(expires_at) FROM mobile_transactions
                            WHERE status = 'pending' AND callback_uri IS NOT NULL)
                    """
            )
        }
    }
}
