public import Foundation
public import GatehouseKernel

// The portal API: what a web application or helpdesk sends to start a push and what it gets back.

/// `POST /v1/portal/mobile-auth` (HTTP Basic, an API client): start a transaction for a user.
public struct PortalMobileAuthRequest: Codable, Sendable {
    /// The user as the identity provider named them. Required for push types; for OTP types it
    /// may be left out, and then whichever enrolled user scans the code answers it.
    public var userID: String?
    /// The identity provider that named the user; the server's default when absent.
    public var identityProvider: String?
    /// A mobile authentication type of the manifest.
    public var type: String
    /// The short message of the push, at most 155 characters; the type's default when absent.
    public var message: String?
    /// Any length; only ever sent sealed for the device.
    public var secureMessage: String?
    /// Data the user signs with the profile key (`signing_data`); required for a type with transaction signing.
    public var signingData: String?
    /// Called with a signed POST when the transaction ends.
    public var callbackURI: String?
    /// For OTP types: how the answer carries the code's QR form (`qr_code`): `svg` (the default),
    /// `png`, or `none`.
    public var qrCode: PortalQRCodeFormat?

    /// Creates a portal request for a user and a mobile authentication type.
    public init(
        userID: String?,
        type: String,
        message: String? = nil,
        secureMessage: String? = nil,
        signingData: String? = nil,
        callbackURI: String? = nil,
        identityProvider: String? = nil,
        qrCode: PortalQRCodeFormat? = nil
    ) {
        self.qrCode = qrCode
        self.userID = userID
        self.identityProvider = identityProvider
        self.type = type
        self.message = message
        self.secureMessage = secureMessage
        self.signingData = signingData
        self.callbackURI = callbackURI
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case identityProvider = "identity_provider"
        case type, message
        case secureMessage = "secure_message"
        case signingData = "signing_data"
        case callbackURI = "callback_uri"
        case qrCode = "qr_code"
    }
}

/// The picture of an OTP's QR code that the portal API returns.
public enum PortalQRCodeFormat: String, Codable, Sendable {
    /// An SVG image, as a `data:image/svg+xml;base64,` URI.
    case svg
    /// A PNG image, as a `data:image/png;base64,` URI.
    case png
    /// No picture: the portal draws the code itself.
    case none

    /// Reads `svg`, `png` or `none`; anything else is refused by name.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let format = PortalQRCodeFormat(rawValue: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "one of svg, png, none")
        }
        self = format
    }
}

/// The answer to `POST /v1/portal/mobile-auth`: the new transaction and who was asked.
public struct PortalMobileAuthResponse: Codable, Sendable {
    /// The new transaction's id (`transaction_id`), for `GET /v1/portal/mobile-auth/{id}`.
    public var transactionID: String
    /// How the user must approve, from the type's configuration (`auth_method`).
    public var authMethod: MobileAuthMethod
    /// Milliseconds, as in the seed's portal API.
    public var timeToLive: Int
    /// The number to show the user when number matching is on.
    public var number: Int?
    /// How many devices were asked (none yet for an OTP type: the device that scans is asked).
    public var devices: Int
    /// For OTP types: the single-use code the app scans or the user types (a ``MobileAuthOTP``'s text).
    public var otp: String?
    /// For OTP types: the code as a QR image, a `data:` URI an `<img src>` takes as it is.
    public var qrCode: String?

    /// Creates the answer for a started transaction.
    public init(
        transactionID: String,
        authMethod: MobileAuthMethod,
        timeToLive: Int,
        number: Int?,
        devices: Int,
        otp: String? = nil,
        qrCode: String? = nil
    ) {
        self.otp = otp
        self.qrCode = qrCode
        self.transactionID = transactionID
        self.authMethod = authMethod
        self.timeToLive = timeToLive
        self.number = number
        self.devices = devices
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case authMethod = "auth_method"
        case timeToLive = "time_to_live"
        case number, devices, otp
        case qrCode = "qr_code"
    }
}

/// `GET /v1/portal/mobile-auth/{id}`.
public struct PortalTransactionResult: Codable, Sendable, Equatable {
    /// The transaction's id (`transaction_id`).
    public var transactionID: String
    /// The user the transaction is for, as the identity provider named them (`user_id`): the
    /// portal's, or for an OTP type started without one, the user whose device scanned the code
    /// (`nil` until one did).
    public var userID: String?
    /// The identity provider that named the user (`identity_provider`).
    public var identityProvider: String?
    /// The mobile authentication type the portal asked for.
    public var type: String
    /// Where the transaction stands now.
    public var status: MobileAuthTransactionStatus
    /// Whether the user approved (`is_authenticated`): `true` exactly when `status` is approved.
    public var isAuthenticated: Bool
    /// The method that approved it (`pin` after a fallback from biometric, say).
    public var authenticationMethod: String?
    /// Why it was not approved: `not_accepted`, `not_recognised`, `invalid_answer`, `expired`,
    /// `superseded`, `user_deregistered`.
    public var reason: String?
    /// When the transaction started, in seconds since 1970 (`created_at`).
    public var createdAt: Double
    /// When the device answered, in seconds since 1970 (`answered_at`); `nil` while pending or when it expired.
    public var answeredAt: Double?
    /// With transaction signing: the device's signature, its key, and the server's check.
    public var signature: Base64URLData?
    /// The profile key that made `signature` (`user_public_key`).
    public var userPublicKey: PublicJWK?
    /// Whether the server found `signature` valid for the signing data (`signature_verified`).
    public var signatureVerified: Bool?

    /// Creates a result; `isAuthenticated` follows from `status`.
    public init(
        transactionID: String,
        userID: String?,
        identityProvider: String? = nil,
        type: String,
        status: MobileAuthTransactionStatus,
        authenticationMethod: String?,
        reason: String?,
        createdAt: Double,
        answeredAt: Double?,
        signature: Data?,
        userPublicKey: PublicJWK?,
        signatureVerified: Bool?
    ) {
        self.transactionID = transactionID
        self.userID = userID
        self.identityProvider = identityProvider
        self.type = type
        self.status = status
        self.isAuthenticated = status == .approved
        self.authenticationMethod = authenticationMethod
        self.reason = reason
        self.createdAt = createdAt
        self.answeredAt = answeredAt
        self.signature = signature.map(Base64URLData.init)
        self.userPublicKey = userPublicKey
        self.signatureVerified = signatureVerified
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case userID = "user_id"
        case identityProvider = "identity_provider"
        case type, status
        case isAuthenticated = "is_authenticated"
        case authenticationMethod = "authentication_method"
        case reason
        case createdAt = "created_at"
        case answeredAt = "answered_at"
        case signature
        case userPublicKey = "user_public_key"
        case signatureVerified = "signature_verified"
    }
}

/// The body of the signed POST to a transaction's `callback_uri`.
public struct PortalCallback: Codable, Sendable, Equatable {
    /// The transaction that ended (`transaction_id`).
    public var transactionID: String
    /// How it ended: approved, denied or expired.
    public var status: MobileAuthTransactionStatus
    /// The callback URL the portal gave, exactly as written (`callback_uri`).
    public var callbackURI: String

    /// Creates a callback body.
    public init(transactionID: String, status: MobileAuthTransactionStatus, callbackURI: String) {
        self.transactionID = transactionID
        self.status = status
        self.callbackURI = callbackURI
    }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case status
        case callbackURI = "callback_uri"
    }
}
