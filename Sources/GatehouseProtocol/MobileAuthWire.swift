import Crypto
public import Foundation
public import GatehouseKernel

// Mobile authentication on the wire: the device's enrolments, its pending list, the sealed
// payload and answer, and the portal API. docs/openapi.yaml describes the same messages.

/// `POST /v1/mobile-auth/enrolment` (access token): the device's HPKE key for this profile.
public struct MobileAuthEnrolmentRequest: Codable, Sendable {
    /// An X25519 public key, 32 raw bytes.
    public var publicKey: Base64URLData
    /// Creates an enrolment request for the device's raw X25519 public key.
    public init(publicKey: Data) { self.publicKey = Base64URLData(publicKey) }
    enum CodingKeys: String, CodingKey { case publicKey = "public_key" }
}

/// The server's HPKE key for this enrolment: answers are sealed for it.
public struct MobileAuthEnrolmentResponse: Codable, Sendable {
    /// The server's X25519 public key for this profile, 32 raw bytes (`server_public_key`).
    public var serverPublicKey: Base64URLData
    /// Creates the answer for the server's raw X25519 public key.
    public init(serverPublicKey: Data) { self.serverPublicKey = Base64URLData(serverPublicKey) }
    enum CodingKeys: String, CodingKey { case serverPublicKey = "server_public_key" }
}

/// Where the server sends a profile's pushes.
public enum PushPlatform: String, Codable, Sendable, CaseIterable {
    /// Apple Push Notification service: the payload is APNs JSON.
    case apns
    /// Firebase Cloud Messaging: the payload is an FCM HTTP v1 message.
    case fcm
    /// The server-sent-events channel the device keeps open to the token server.
    case events
}

/// `POST /v1/mobile-auth/push-enrolment` and `POST /v1/mobile-auth/push-token` (access token).
public struct PushEnrolmentRequest: Codable, Sendable {
    /// The token the push service gave the app (APNs device token, FCM registration token), or
    /// any stable id of the device for the events channel.
    public var pushToken: String
    /// The push service the token belongs to, and so how the server delivers.
    public var platform: PushPlatform
    /// Creates a push enrolment for a token on a platform.
    public init(pushToken: String, platform: PushPlatform) {
        self.pushToken = pushToken
        self.platform = platform
    }
    enum CodingKeys: String, CodingKey {
        case pushToken = "push_token"
        case platform
    }
}

/// The state of a profile's enrolments.
public struct MobileAuthEnrolmentStatus: Codable, Sendable, Equatable {
    /// Whether the profile has an HPKE key enrolled, so the server can send it mobile authentication requests.
    public var enrolled: Bool
    /// Whether the profile has a push token (`push_enrolled`); without one the device must poll the pending list.
    public var pushEnrolled: Bool
    /// Creates an enrolment status.
    public init(enrolled: Bool, pushEnrolled: Bool) {
        self.enrolled = enrolled
        self.pushEnrolled = pushEnrolled
    }
    enum CodingKeys: String, CodingKey {
        case enrolled
        case pushEnrolled = "push_enrolled"
    }
}

/// One pending transaction, as the push announced it: nothing sensitive.
public struct PendingMobileAuthItem: Codable, Sendable, Equatable {
    /// The transaction's id (`transaction_id`), the `{id}` to fetch its payload and answer it.
    public var transactionID: String
    /// The profile on this device the transaction is for (`profile_id`).
    public var profileID: String
    /// Seconds since 1970.
    public var createdAt: Double
    /// Seconds from `createdAt` until the transaction expires (`time_to_live`).
    public var timeToLive: Int
    /// The short message of the push, at most 155 characters, safe to show on a lock screen.
    public var message: String

    /// Creates a pending item.
    public init(transactionID: String, profileID: String, createdAt: Double, timeToLive: Int, message: String) {
        self.transactionID = transactionID
        self.profileID = profileID
        self.createdAt = createdAt
        self.timeToLive = timeToLive
        self.message = message
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case profileID = "profile_id"
        case createdAt = "created_at"
        case timeToLive = "time_to_live"
        case message
    }
}

/// `GET /v1/mobile-auth/pending`: newest first.
public struct PendingMobileAuthList: Codable, Sendable {
    /// The transactions still waiting for this device's answer, newest first.
    public var requests: [PendingMobileAuthItem]
    /// Creates the pending list.
    public init(requests: [PendingMobileAuthItem]) { self.requests = requests }
}

/// `GET /v1/mobile-auth/transactions/{id}`: the payload, sealed for the device's key.
public struct MobileAuthPayloadResponse: Codable, Sendable {
    /// The ``MobileAuthPayload`` as JSON, sealed with HPKE for the device's enrolled key.
    public var sealed: SealedBox
    /// Creates the answer for a sealed payload.
    public init(sealed: SealedBox) { self.sealed = sealed }
}

/// What the sealed payload holds.
public struct MobileAuthPayload: Codable, Sendable, Equatable {
    /// The transaction's id (`transaction_id`); the answer must name the same one.
    public var transactionID: String
    /// The profile the transaction is for (`profile_id`).
    public var profileID: String
    /// The name of the mobile authentication type in the manifest's `server.mobileAuth.types`.
    public var type: String
    /// How the user must approve: a confirmation, the PIN, a biometric or a custom authenticator.
    public var method: MobileAuthMethod
    /// The manifest id of the authenticator the method uses, if any.
    public var authenticator: String?
    /// The short message the push announced.
    public var message: String
    /// The longer message only the device sees (`secure_message`); `nil` when the portal sent none.
    public var secureMessage: String?
    /// The data to sign when the type uses transaction signing (`signing_data`); `nil` otherwise.
    public var signingData: String?
    /// Whether the user must type the number the portal shows (`number_matching`).
    public var numberMatching: Bool
    /// Single use: the answer must carry it back.
    public var nonce: Base64URLData
    /// When the transaction expires, in seconds since 1970 (`expires_at`).
    public var expiresAt: Double

    /// Creates a payload; the nonce is kept as base64url on the wire.
    public init(
        transactionID: String,
        profileID: String,
        type: String,
        method: MobileAuthMethod,
        authenticator: String?,
        message: String,
        secureMessage: String?,
        signingData: String?,
        numberMatching: Bool,
        nonce: Data,
        expiresAt: Double
    ) {
        self.transactionID = transactionID
        self.profileID = profileID
        self.type = type
        self.method = method
        self.authenticator = authenticator
        self.message = message
        self.secureMessage = secureMessage
        self.signingData = signingData
        self.numberMatching = numberMatching
        self.nonce = Base64URLData(nonce)
        self.expiresAt = expiresAt
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case profileID = "profile_id"
        case type, method, authenticator, message
        case secureMessage = "secure_message"
        case signingData = "signing_data"
        case numberMatching = "number_matching"
        case nonce
        case expiresAt = "expires_at"
    }
}

/// `POST /v1/mobile-auth/transactions/{id}/answer`: the answer, sealed for the server's key.
public struct MobileAuthAnswerRequest: Codable, Sendable {
    /// The ``MobileAuthAnswer`` as JSON, sealed with HPKE for the server's key of this enrolment.
    public var sealed: SealedBox
    /// Creates an answer request for a sealed answer.
    public init(sealed: SealedBox) { self.sealed = sealed }
}

/// What the sealed answer holds.
public struct MobileAuthAnswer: Codable, Sendable, Equatable {
    /// The user's choice.
    public enum Decision: String, Codable, Sendable {
        case accept, deny
    }

    /// The transaction answered (`transaction_id`); it must match the payload's.
    public var transactionID: String
    /// The payload's nonce.
    public var nonce: Base64URLData
    /// Whether the user accepts or denies the request.
    public var decision: Decision
    /// Why the user denied: not accepted, or not recognised (possible fraud); `nil` when accepting.
    public var reason: MobileAuthDenialReason?
    /// The number the user typed, when number matching is on.
    public var number: Int?
    /// With transaction signing: the profile key's ES256 signature over
    /// ``signedContent(transactionID:signingData:decision:)``.
    public var signature: Base64URLData?
    /// With transaction signing: the profile's public key that made `signature` (`public_key`).
    public var publicKey: PublicJWK?

    /// Creates an answer; the optional fields are left out when `nil`.
    public init(
        transactionID: String,
        nonce: Data,
        decision: Decision,
        reason: MobileAuthDenialReason? = nil,
        number: Int? = nil,
        signature: Data? = nil,
        publicKey: PublicJWK? = nil
    ) {
        self.transactionID = transactionID
        self.nonce = Base64URLData(nonce)
        self.decision = decision
        self.reason = reason
        self.number = number
        self.signature = signature.map(Base64URLData.init)
        self.publicKey = publicKey
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case nonce, decision, reason, number, signature
        case publicKey = "public_key"
    }

    /// What a transaction signature covers: the transaction, the SHA-256 of its signing data and
    /// the decision. (The hash, so the server can check the signature without keeping the data.)
    public static func signedContent(transactionID: String, signingDataHash: Data, decision: Decision) -> Data {
        let hash = signingDataHash.base64URLEncodedString
        return Data("gatehouse-transaction-signature/v1\n\(transactionID)\n\(decision.rawValue)\n\(hash)".utf8)
    }

    /// What a transaction signature covers, from the signing data itself: hashes it with SHA-256 first.
    public static func signedContent(transactionID: String, signingData: String, decision: Decision) -> Data {
        signedContent(
            transactionID: transactionID,
            signingDataHash: Data(SHA256.hash(data: Data(signingData.utf8))),
            decision: decision
        )
    }
}

/// The answer's result: handled, or a flow to run first (PIN, biometric, custom).
public struct MobileAuthAnswerResponse: Codable, Sendable {
    /// Where the transaction stands after the answer.
    public var status: MobileAuthTransactionStatus
    /// Set when the method needs an authenticator: approve by finishing this flow.
    public var flow: FlowResponse?

    /// Creates an answer result, with a flow when the method needs one.
    public init(status: MobileAuthTransactionStatus, flow: FlowResponse? = nil) {
        self.status = status
        self.flow = flow
    }
}

/// Where a transaction stands.
public enum MobileAuthTransactionStatus: String, Codable, Sendable {
    case pending, approved, denied, expired
}
