import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol

// OTP mobile authentication: the portal shows a single-use code (a QR code) instead of the server
// pushing; the enrolled device that scans it claims the transaction, gets the payload sealed for
// itself, and answers exactly as it answers a push. The server keeps the code's SHA-256 only, and
// what only the device may read (secure message, signing data) encrypted with a key derived from
// the code, so until the claim nothing in the database opens it.

/// The secret parts of an OTP transaction, kept until a device claims the code.
struct OTPContent: Codable, Sendable {
    var secureMessage: String?
    var signingData: String?

    /// The code's key for this transaction's content: HKDF over the code, never stored.
    private static func key(code: String, transactionID: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Data(code.utf8)),
            salt: Data(transactionID.utf8),
            info: Data("gatehouse otp content v1".utf8),
            outputByteCount: 32
        )
    }

    func sealed(code: String, transactionID: String) throws -> Data {
        try ChaChaPoly.seal(
            try WireCoding.encode(self),
            using: Self.key(code: code, transactionID: transactionID),
            authenticating: Data(transactionID.utf8)
        ).combined
    }

    static func open(_ data: Data, code: String, transactionID: String) throws -> OTPContent {
        let opened = try ChaChaPoly.open(
            try ChaChaPoly.SealedBox(combined: data),
            using: key(code: code, transactionID: transactionID),
            authenticating: Data(transactionID.utf8)
        )
        return try WireCoding.decode(OTPContent.self, from: opened)
    }
}

extension MobileAuthOTP {
    /// A fresh code for a transaction: 128 random bits.
    static func generate(for transactionID: String) -> MobileAuthOTP {
        MobileAuthOTP(transactionID: transactionID, code: Data.random(count: 16).base64URLEncodedString)
    }

    /// What the store keeps of the code.
    var hash: Data { Data(SHA256.hash(data: Data(code.utf8))) }
}

extension TokenServer {
    /// `POST /v1/mobile-auth/otp?profile=ID`: the device claims the transaction of a code it
    /// scanned, and gets its request with the payload sealed for it.
    func claimOTPMobileAuth(_ request: WireRequest) async throws -> WireResponse {
        let mobileAuth = try mobileAuthConfiguration()
        let profileID = try profileParameter(request)
        let body = try decodeBody(MobileAuthOTPClaim.self, request)
        guard let otp = MobileAuthOTP(body.otp) else {
            throw ServerError(
                MobileAuthRequestError(.notHandleable, message: "This is not a mobile authentication code."),
                status: 400
            )
        }
        let proof = try proof(request)
        let claimed = try await store.claimOTP(otp, profileID: profileID, proof: proof) { name in
            mobileAuth.types.first { $0.name == name && $0.delivery == .otp }
        }
        return WireResponse(
            status: 200,
            headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: try WireCoding.encode(
                MobileAuthEvent(
                    request: claimed.notification,
                    sealed: try WireCoding.decode(SealedBox.self, from: claimed.sealed)
                )
            )
        )
    }
}

extension ServerStore {
    /// Claims an OTP transaction for the device: the code is spent, the transaction is bound to
    /// the device's user (when the portal named none), and the payload is sealed for the device.
    ///
    /// The device's own errors come first (deregistered, not enrolled, disenrolled), then the
    /// code's (unknown or wrong is `notFound`), then the transaction's: claimed or ended is
    /// `alreadyHandled`, expired or for another user `notFound`. A refused claim changes nothing, so a code scanned by the wrong
    /// phone still works on the right one.
    func claimOTP(
        _ otp: MobileAuthOTP,
        profileID: String,
        proof: ProofUse,
        type: @escaping @Sendable (String) -> MobileAuthConfiguration.TransactionType?
    ) async throws -> PendingDelivery {
        try await write { db in
            let device = try self.enrolledDevice(profileID, proof: proof, db)
            guard
                let row = try SQLRow.fetchOne(
                    db,
                    sql:
                        "SELECT * FROM mobile_transactions WHERE id = ? AND delivery = 'otp' \(db.dialect.lockingRows)",
                    arguments: [otp.transactionID]
                )
            else { throw StoreRefusal.notFound(MobileAuthRequestError(.notFound)) }
            // The code first: without it, nothing is said about the transaction, not even whether
            // it expired or was claimed.
            guard let stored = row["otp_hash"] as Data?, ConstantTime.equals(otp.hash, stored) else {
                throw StoreRefusal.notFound(MobileAuthRequestError(.notFound, message: "This code is not valid."))
            }
            // Claimed once: the claim made the transaction's one delivery.
            guard
                try Int.fetchOne(
                    db,
                    sql: "SELECT 1 FROM mobile_deliveries WHERE transaction_id = ?",
                    arguments: [otp.transactionID]
                ) == nil
            else {
                throw StoreRefusal.conflict(
                    MobileAuthRequestError(.alreadyHandled, message: "This code was scanned already.")
                )
            }
            // Expired is "not found", answered or superseded "already handled", as for pushes.
            if let refusal = try self.transaction(row).refusalToDevice(at: proof.now) {
                throw Self.storeRefusal(refusal)
            }
            let identityProvider: String = device["identity_provider"]
            let subject: String = device["subject"]
            let wanted: String = row["subject"]
            guard wanted.isEmpty || (wanted == subject && row["identity_provider"] == identityProvider) else {
                throw StoreRefusal.notFound(
                    MobileAuthRequestError(.notFound, message: "This code is for another user.")
                )
            }
            guard let configured = type(row["type"]) else {
                throw StoreRefusal.inconsistent("The transaction's type is no longer configured as an OTP type.")
            }
            guard let deviceKey = Curve25519.KeyAgreement.PublicKey(wire: Base64URLData(device["device_key"])) else {
                throw StoreRefusal.forbidden(MobileAuthRequestError(.notEnrolled, message: "Enrol this device again."))
            }
            let content = try (row["otp_content"] as Data?).map {
                try OTPContent.open($0, code: otp.code, transactionID: otp.transactionID)
            }
            let created: Double = row["created_at"]
            let expires: Double = row["expires_at"]
            let message: String = row["message"]
            let (seq, sealed) = try self.insertDelivery(
                PendingPayload(
                    transactionID: otp.transactionID,
                    profileID: profileID,
                    type: configured,
                    message: message,
                    secureMessage: content?.secureMessage,
                    signingData: content?.signingData,
                    numberMatching: row["number"] as Int? != nil,
                    expiresAt: expires
                ),
                deviceKey: deviceKey,
                db
            )
            try db.execute(
                sql: """
                    UPDATE mobile_transactions SET otp_content = NULL, identity_provider = ?, subject = ?
                    WHERE id = ?
                    """,
                arguments: [identityProvider, subject, otp.transactionID]
            )
            try self.record(proof, db)
            return PendingDelivery(
                seq: seq,
                notification: PushNotification(
                    transactionID: otp.transactionID,
                    profileID: profileID,
                    message: message,
                    createdAt: created,
                    timeToLive: Int((expires - created).rounded())
                ),
                sealed: sealed
            )
        }
    }
}
