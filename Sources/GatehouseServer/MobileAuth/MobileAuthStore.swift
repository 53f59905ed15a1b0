import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol

// Mobile authentication's state: enrolments and starting transactions here; the device's side in
// MobileAuthStore+Device.swift; ending, the portal's reads and the callback outbox in
// MobileAuthStore+Outcomes.swift. Every change is one transaction, as for flows.

/// A user as the portal names them: subjects are unique per identity provider only.
struct MobileAuthUser: Sendable, Hashable {
    var identityProvider: String
    var subject: String
}

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
        try await write { db in
            let session = try self.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            guard !session.stateless else {
                throw StoreRefusal.forbidden(MobileAuthEnrollmentError(.statelessUser))
            }
            // One enrolment of a user at a time: what `single` and `override` decide from the
            // other devices' enrolments must still hold when this one commits.
            if db.dialect == .postgres {
                try db.execute(
                    sql: "SELECT 1 FROM profiles WHERE identity_provider = ? AND subject = ? ORDER BY id FOR UPDATE",
                    arguments: [session.identityProvider, session.subject]
                )
            }
            let others = try String.fetchAll(
                db,
                sql: """
                    SELECT profile_id FROM mobile_enrolments
                    WHERE identity_provider = ? AND subject = ? AND profile_id != ? AND NOT disenrolled
                    """,
                arguments: [session.identityProvider, session.subject, session.profileID]
            )
            switch mode {
            case .single where !others.isEmpty:
                throw StoreRefusal.conflict(MobileAuthEnrollmentError(.userAlreadyEnrolled))
            case .override:
                for other in others where try self.disenrolDevice(other, now: proof.now, db) {
                    try self.appendAudit(
                        [
                            AuditEntry(
                                event: .deviceDisenrolled,
                                actor: .user,
                                identityProvider: session.identityProvider,
                                subject: session.subject,
                                profileID: other,
                                detail: ["reason": "superseded_by_enrolment", "by_profile": session.profileID]
                            )
                        ],
                        now: proof.now,
                        db
                    )
                }
            case .single, .multiple: break
            }
            try self.record(proof, db)
            let serverKey = Curve25519.KeyAgreement.PrivateKey()
            try db.execute(
                sql: """
                    INSERT INTO mobile_enrolments (profile_id, identity_provider, subject, device_key, server_key,
                        created_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT(profile_id) DO UPDATE SET device_key = excluded.device_key,
                        server_key = excluded.server_key, disenrolled = FALSE, created_at = excluded.created_at
                    """,
                arguments: [
                    session.profileID, session.identityProvider, session.subject, deviceKey,
                    serverKey.rawRepresentation, proof.now,
                ]
            )
            return serverKey.publicKey.rawRepresentation
        }
    }

    /// Disenrols the device of `profileID` from mobile authentication inside the caller's
    /// transaction: its push token is forgotten, the transactions only it was asked end, and its
    /// events channels end. The device learns it on its next request (`userDisenrolled`).
    /// Returns whether it was enrolled (and not disenrolled already).
    @discardableResult
    func disenrolDevice(_ profileID: String, now: Double, _ db: any SQLSession) throws -> Bool {
        try db.execute(
            sql:
                "UPDATE mobile_enrolments SET disenrolled = TRUE, push_token = NULL WHERE profile_id = ? AND NOT disenrolled",
            arguments: [profileID]
        )
        guard db.changesCount > 0 else { return false }
        try endTransactions(askedOf: profileID, .disenrolled, now: now, db)
        // Its events channels look again, find it disenrolled, and end.
        try db.announce(EventChannelHub.wakeAnnouncement(profileID))
        return true
    }

    /// Sets where the profile's pushes go. Needs the mobile-auth enrolment first; `refresh`: only
    /// replace a push token the profile already has.
    func enrolPush(
        token: String,
        proof: ProofUse,
        pushToken: String,
        platform: PushPlatform,
        refresh: Bool
    ) async throws -> MobileAuthEnrolmentStatus {
        try await write { db in
            let session = try self.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            let enrolment = try SQLRow.fetchOne(
                db,
                sql:
                    "SELECT disenrolled, push_token FROM mobile_enrolments WHERE profile_id = ? \(db.dialect.lockingRows)",
                arguments: [session.profileID]
            )
            let disenrolled = enrolment?["disenrolled"] as Bool?
            guard disenrolled == false else {
                throw StoreRefusal.conflict(
                    disenrolled == true
                        ? MobileAuthEnrollmentError(.notEnrolled, message: "The profile was disenrolled; enrol again.")
                        : MobileAuthEnrollmentError(.notEnrolled)
                )
            }
            if refresh, enrolment?["push_token"] as String? == nil {
                throw StoreRefusal.conflict(
                    MobileAuthEnrollmentError(.notEnrolled, message: "Enrol for push first; then refresh its token.")
                )
            }
            try self.record(proof, db)
            do {
                try db.execute(
                    sql: "UPDATE mobile_enrolments SET push_token = ?, platform = ? WHERE profile_id = ?",
                    arguments: [pushToken, platform.rawValue, session.profileID]
                )
            } catch is UniqueConstraintViolation {
                throw StoreRefusal.conflict(MobileAuthEnrollmentError(.deviceAlreadyEnrolled))
            }
            return try self.enrolmentStatus(session.profileID, db)
        }
    }

    /// Whether the session's profile is enrolled, and for push.
    func enrolmentStatus(token: String, proof: ProofUse) async throws -> MobileAuthEnrolmentStatus {
        // A write, though it changes nothing else: the proof is spent with what it read, as at
        // every other endpoint, so it cannot be replayed.
        try await write { db in
            let session = try self.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now, db)
            try self.record(proof, db)
            return try self.enrolmentStatus(session.profileID, db)
        }
    }

    private func enrolmentStatus(_ profileID: String, _ db: any SQLSession) throws -> MobileAuthEnrolmentStatus {
        let row = try SQLRow.fetchOne(
            db,
            sql: "SELECT push_token FROM mobile_enrolments WHERE profile_id = ? AND NOT disenrolled",
            arguments: [profileID]
        )
        return MobileAuthEnrolmentStatus(
            enrolled: row != nil,
            pushEnrolled: row.map { $0["push_token"] as String? != nil } ?? false
        )
    }

    // MARK: - Starting transactions

    /// What the portal asked, as the store keeps and seals it.
    struct NewTransaction: Sendable {
        var id: String
        var apiClient: String
        var user: MobileAuthUser
        var type: MobileAuthConfiguration.TransactionType
        var message: String
        var secureMessage: String?
        var signingData: String?
        var callbackURI: String?
        var number: Int?
        /// For OTP types: SHA-256 of the single-use code. `user` may then be empty (both fields):
        /// the device that claims the code names the user.
        var otpHash: Data?
        /// For OTP types: the secure message and signing data, encrypted with the code's key.
        var otpContent: Data?
        /// Refuse (``OpenTransactionExists``) while the API client has a pending transaction for
        /// the user: the login's sign-in pushes, one at a time.
        var onlyOneOpen = false
        var now: Double
    }

    /// The API client has a pending transaction for the user already.
    struct OpenTransactionExists: Error {
        /// When it lapses.
        var until: Double
    }

    /// A device asked to answer, and where its push goes.
    struct Delivery: Sendable {
        var seq: Int64
        var profileID: String
        var pushToken: String?
        var platform: PushPlatform?
    }

    /// Starts a transaction: one sealed payload per enrolled device of the user; the API client's
    /// older pending transactions of the type are superseded. Returns the devices to notify.
    ///
    /// A device's deliveries are numbered in the order they commit (its events channel sends
    /// what is numbered after the last it sent): SQLite commits one change at a time; on
    /// PostgreSQL the devices' rows are locked first, so a transaction started at the same time
    /// for the same device numbers its delivery only once this one has committed.
    func startTransaction(_ new: NewTransaction) async throws -> [Delivery] {
        // Sealing is most of a start's work: done before the change for the devices a lookup
        // finds, so the one writer (SQLite) or the locked rows (PostgreSQL) wait for none of it.
        // A device enrolled or re-keyed in between is sealed for within the change.
        let sealedAhead = new.otpHash == nil ? try await sealAhead(new) : [:]
        return try await write { db in
            let devices = try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT profile_id, device_key, push_token, platform FROM mobile_enrolments
                    WHERE identity_provider = ? AND subject = ? AND NOT disenrolled ORDER BY created_at DESC
                    \(db.dialect.lockingRows)
                    """,
                arguments: [new.user.identityProvider, new.user.subject]
            )
            // An OTP transaction without a user is for whoever scans it; one with a user needs a
            // device that can.
            guard !devices.isEmpty || (new.otpHash != nil && new.user.subject.isEmpty) else {
                throw StoreRefusal.noEnrolledDevice
            }
            // Checked here, after the user's devices are locked (PostgreSQL) or in the one writer
            // (SQLite): two starts at once cannot both find none open.
            if new.onlyOneOpen,
                let until = try Double.fetchOne(
                    db,
                    sql: """
                        SELECT MAX(expires_at) FROM mobile_transactions
                        WHERE api_client = ? AND identity_provider = ? AND subject = ? AND status = 'pending'
                        AND expires_at > ?
                        """,
                    arguments: [new.apiClient, new.user.identityProvider, new.user.subject, new.now]
                )
            {
                throw OpenTransactionExists(until: until)
            }
            if new.type.supersedesPending, !new.user.subject.isEmpty {
                let superseded = try SQLRow.fetchAll(
                    db,
                    sql: """
                        SELECT id, \(Self.transactionColumns) FROM mobile_transactions
                        WHERE api_client = ? AND identity_provider = ? AND subject = ? AND type = ? AND status = 'pending'
                        """,
                    arguments: [new.apiClient, new.user.identityProvider, new.user.subject, new.type.name]
                )
                for row in superseded {
                    var older = try self.transaction(row)
                    try self.carryOut(older.superseded(at: new.now), transaction: row["id"], db)
                }
            }
            try db.execute(
                sql: """
                    INSERT INTO mobile_transactions (id, api_client, identity_provider, subject, type, method, message,
                        number, signing_data_hash, callback_uri, status, created_at, expires_at, delivery, otp_hash,
                        otp_content)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    new.id, new.apiClient, new.user.identityProvider, new.user.subject, new.type.name,
                    new.type.method.rawValue, new.message, new.number,
                    new.signingData.map { Data(SHA256.hash(data: Data($0.utf8))) }, new.callbackURI,
                    MobileAuthTransaction.State.pending.status.rawValue, new.now, new.now + Double(new.type.timeToLive),
                    new.otpHash == nil ? "push" : "otp", new.otpHash, new.otpContent,
                ]
            )
            // An OTP transaction is sealed for the device that claims its code, when it does.
            if new.otpHash != nil { return [] }
            var deliveries: [Delivery] = []
            for device in devices {
                let profileID: String = device["profile_id"]
                let deviceKey: Data = device["device_key"]
                let payload = PendingPayload(transaction: new, profileID: profileID)
                let sealed: SealedPayload
                if let ahead = sealedAhead[profileID], ahead.deviceKey == deviceKey {
                    sealed = ahead
                } else {
                    guard let key = Curve25519.KeyAgreement.PublicKey(wire: Base64URLData(deviceKey)) else { continue }
                    sealed = try Self.seal(payload, for: key)
                }
                let seq = try self.insertDelivery(payload, sealed: sealed, db)
                deliveries.append(
                    Delivery(
                        seq: seq,
                        profileID: profileID,
                        pushToken: device["push_token"],
                        platform: (device["platform"] as String?).flatMap(PushPlatform.init(rawValue:))
                    )
                )
            }
            return deliveries
        }
    }

    /// What a device's sealed payload says of a transaction.
    struct PendingPayload: Sendable {
        var transactionID: String
        var profileID: String
        var type: MobileAuthConfiguration.TransactionType
        var message: String
        var secureMessage: String?
        var signingData: String?
        var numberMatching: Bool
        var expiresAt: Double

        init(
            transactionID: String,
            profileID: String,
            type: MobileAuthConfiguration.TransactionType,
            message: String,
            secureMessage: String?,
            signingData: String?,
            numberMatching: Bool,
            expiresAt: Double
        ) {
            self.transactionID = transactionID
            self.profileID = profileID
            self.type = type
            self.message = message
            self.secureMessage = secureMessage
            self.signingData = signingData
            self.numberMatching = numberMatching
            self.expiresAt = expiresAt
        }

        init(transaction new: NewTransaction, profileID: String) {
            transactionID = new.id
            self.profileID = profileID
            type = new.type
            message = new.message
            secureMessage = new.secureMessage
            signingData = new.signingData
            numberMatching = new.number != nil
            expiresAt = new.now + Double(new.type.timeToLive)
        }
    }

    /// A payload sealed for one device key, with the hash of its single-use nonce.
    struct SealedPayload: Sendable {
        /// The raw key it is sealed for.
        var deviceKey: Data
        /// The ``SealedBox`` as stored and sent.
        var sealed: Data
        var nonceHash: Data
    }

    /// The start's payloads sealed for the user's enrolled devices, as a lookup finds them.
    private func sealAhead(_ new: NewTransaction) async throws -> [String: SealedPayload] {
        let devices = try await lookupStatement { db in
            try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT profile_id, device_key FROM mobile_enrolments
                    WHERE identity_provider = ? AND subject = ? AND NOT disenrolled
                    """,
                arguments: [new.user.identityProvider, new.user.subject]
            )
        }
        var sealed: [String: SealedPayload] = [:]
        for device in devices {
            let profileID: String = device["profile_id"]
            guard let key = Curve25519.KeyAgreement.PublicKey(wire: Base64URLData(device["device_key"])) else {
                continue
            }
            sealed[profileID] = try Self.seal(PendingPayload(transaction: new, profileID: profileID), for: key)
        }
        return sealed
    }

    /// Seals the payload for one device key, with a fresh single-use nonce.
    static func seal(
        _ payload: PendingPayload,
        for deviceKey: Curve25519.KeyAgreement.PublicKey
    ) throws
        -> SealedPayload
    {
        let nonce = Data.random(count: 32)
        let sealed = try WireCoding.encode(
            try SealedBox.seal(
                try WireCoding.encode(
                    MobileAuthPayload(
                        transactionID: payload.transactionID,
                        profileID: payload.profileID,
                        type: payload.type.name,
                        method: payload.type.method,
                        authenticator: payload.type.authenticator,
                        message: payload.message,
                        secureMessage: payload.secureMessage,
                        signingData: payload.signingData,
                        numberMatching: payload.numberMatching,
                        nonce: nonce,
                        expiresAt: payload.expiresAt
                    )
                ),
                for: deviceKey,
                purpose: .payload,
                transactionID: payload.transactionID
            )
        )
        return SealedPayload(
            deviceKey: deviceKey.rawRepresentation,
            sealed: sealed,
            nonceHash: Data(SHA256.hash(data: nonce))
        )
    }

    /// Stores a device's delivery of its sealed payload and wakes the device's events channel (on
    /// whichever instance it is open). Returns the delivery's sequence number.
    func insertDelivery(_ payload: PendingPayload, sealed: SealedPayload, _ db: any SQLSession) throws -> Int64 {
        guard
            let seq = try Int64.fetchOne(
                db,
                sql: """
                    INSERT INTO mobile_deliveries (transaction_id, profile_id, sealed, nonce_hash) VALUES (?, ?, ?, ?)
                    RETURNING seq
                    """,
                arguments: [payload.transactionID, payload.profileID, sealed.sealed, sealed.nonceHash]
            )
        else { throw ServerDatabaseError("The database did not number a delivery.") }
        try db.announce(EventChannelHub.wakeAnnouncement(payload.profileID))
        return seq
    }
}
