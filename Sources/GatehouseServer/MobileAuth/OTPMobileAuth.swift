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
