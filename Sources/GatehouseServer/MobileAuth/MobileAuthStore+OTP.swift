import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol

// OTP mobile authentication, the store's side: the device that scanned a code claims its
// transaction (OTPMobileAuth.swift has the endpoint and the code's form).

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
            let payload = PendingPayload(
                transactionID: otp.transactionID,
                profileID: profileID,
                type: configured,
                message: message,
                secureMessage: content?.secureMessage,
                signingData: content?.signingData,
                numberMatching: row["number"] as Int? != nil,
                expiresAt: expires
            )
            let sealedPayload = try Self.seal(payload, for: deviceKey)
            let seq = try self.insertDelivery(payload, sealed: sealedPayload, db)
            let sealed = sealedPayload.sealed
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
