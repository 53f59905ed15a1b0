public import Foundation

// The JSON messages between a XignIn registry client and the manager. snake_case on the wire.

/// `GET /xignin/v1/configuration?service_mapping_id=…`: what a registration must supply.
public struct ManagerConfigurationMessage: Codable, Sendable, Equatable {
    /// A length range the manager enforces, for the activation PIN or the alias.
    public struct Length: Codable, Sendable, Equatable {
        /// The fewest characters allowed (`min_length`).
        public var minLength: Int
        /// The most characters allowed (`max_length`).
        public var maxLength: Int

        /// Creates a length range.
        public init(minLength: Int, maxLength: Int) {
            self.minLength = minLength
            self.maxLength = maxLength
        }

        enum CodingKeys: String, CodingKey {
            case minLength = "min_length"
            case maxLength = "max_length"
        }
    }

    /// One registration category the manager offers: what it identifies by and what it collects.
    public struct Category: Codable, Sendable, Equatable {
        /// The category's id, which a registration names as `category`.
        public var id: String
        /// The identification types the category stands for (anonymous, e-mail, phone, ID card).
        public var types: [IdentificationType]
        /// The attributes a registration in this category must give.
        public var required: [PersonalAttribute]
        /// The attributes that identify the user (`identification_attributes`).
        public var identificationAttributes: [PersonalAttribute]

        /// Creates a category.
        public init(
            id: String,
            types: [IdentificationType],
            required: [PersonalAttribute],
            identificationAttributes: [PersonalAttribute]
        ) {
            self.id = id
            self.types = types
            self.required = required
            self.identificationAttributes = identificationAttributes
        }

        enum CodingKeys: String, CodingKey {
            case id, types, required
            case identificationAttributes = "identification_attributes"
        }
    }

    /// The manager's public URL (`manager_url`), which the activation mail and the client show.
    public var managerURL: String
    /// The activation PIN's length range, in digits.
    public var pin: Length
    /// The alias's length range, in characters.
    public var alias: Length
    /// The longest e-mail address accepted, in UTF-8 bytes (`email_max_length`).
    public var emailMaxLength: Int
    /// The registration categories, one of which a registration picks.
    public var categories: [Category]
    /// Whether the service mapping id given with the request is known to the manager.
    public var serviceMappingValid: Bool

    /// Creates the configuration message.
    public init(
        managerURL: String,
        pin: Length,
        alias: Length,
        emailMaxLength: Int,
        categories: [Category],
        serviceMappingValid: Bool
    ) {
        self.managerURL = managerURL
        self.pin = pin
        self.alias = alias
        self.emailMaxLength = emailMaxLength
        self.categories = categories
        self.serviceMappingValid = serviceMappingValid
    }

    enum CodingKeys: String, CodingKey {
        case managerURL = "manager_url"
        case pin, alias
        case emailMaxLength = "email_max_length"
        case categories
        case serviceMappingValid = "service_mapping_valid"
    }
}

/// `POST /xignin/v1/pin/evaluate`: the OPRF evaluation of a blinded activation PIN. At
/// registration (no `activation_code`) the manager makes a fresh key and returns a token for it;
/// at activation it uses the account's key, counts the attempt and returns a nonce to sign.
public struct PinEvaluationRequest: Codable, Sendable {
    /// The blinded P-384 element, base64url of 49 bytes (a compressed point on the curve).
    public var blinded: String
    /// The e-mailed activation code (`activation_code`) at activation; `nil` at registration.
    public var activationCode: String?

    /// Creates an evaluation request; a `nil` activation code asks for a registration's fresh key.
    public init(blinded: String, activationCode: String?) {
        self.blinded = blinded
        self.activationCode = activationCode
    }

    enum CodingKeys: String, CodingKey {
        case blinded
        case activationCode = "activation_code"
    }
}

/// The manager's OPRF evaluation of a blinded activation PIN.
public struct PinEvaluationResponse: Codable, Sendable {
    /// The evaluated element, base64url; the client unblinds it to the PIN's OPRF output.
    public var evaluation: String
    /// The manager's OPRF public key for this PIN (`oprf_public_key`), base64url, to check the evaluation.
    public var oprfPublicKey: String
    /// Registration: names the key for the registration request. Activation: names the attempt.
    public var token: String
    /// Activation only: what the PIN-derived key signs.
    public var nonce: String?

    /// Creates an evaluation answer; `nonce` is `nil` at registration.
    public init(evaluation: String, oprfPublicKey: String, token: String, nonce: String?) {
        self.evaluation = evaluation
        self.oprfPublicKey = oprfPublicKey
        self.token = token
        self.nonce = nonce
    }

    enum CodingKeys: String, CodingKey {
        case evaluation
        case oprfPublicKey = "oprf_public_key"
        case token, nonce
    }
}

/// `POST /xignin/v1/registrations`.
public struct ManagerRegistrationRequest: Codable, Sendable {
    /// The linked service the registration is for (`service_mapping_id`); `nil` for none.
    public var serviceMappingID: String?
    /// The id of one of the manager's categories.
    public var category: String
    /// The personal attributes' values, keyed by ``PersonalAttribute`` raw value; each at most 1024 characters.
    public var attributes: [String: String]
    /// The first activation's alias; `nil` gives the manager's default, "Activation 1".
    public var alias: String?
    /// Attributes for the linked service (`arbitrary_attributes`), at most 50; `nil` for none.
    public var arbitraryAttributes: [String: String]?
    /// The token of the activation PIN's evaluation, and the public key derived from its output.
    public var pinToken: String
    /// The X9.63 P-256 public key derived from the PIN's OPRF output, base64url of 65 bytes (`pin_public_key`).
    public var pinPublicKey: String

    /// Creates a registration request.
    public init(
        serviceMappingID: String?,
        category: String,
        attributes: [String: String],
        alias: String?,
        arbitraryAttributes: [String: String]?,
        pinToken: String,
        pinPublicKey: String
    ) {
        self.serviceMappingID = serviceMappingID
        self.category = category
        self.attributes = attributes
        self.alias = alias
        self.arbitraryAttributes = arbitraryAttributes
        self.pinToken = pinToken
        self.pinPublicKey = pinPublicKey
    }

    enum CodingKeys: String, CodingKey {
        case serviceMappingID = "service_mapping_id"
        case category, attributes, alias
        case arbitraryAttributes = "arbitrary_attributes"
        case pinToken = "pin_token"
        case pinPublicKey = "pin_public_key"
    }
}

/// The answer to a registration (201): the account is made and its activation code is on its way by e-mail.
public struct ManagerRegistrationResponse: Codable, Sendable, Equatable {
    /// The manager's public URL (`manager_url`).
    public var managerURL: String
    /// The new account's id at the manager (`account_id`).
    public var accountID: String
    /// The first activation's alias, as the manager stored it.
    public var alias: String

    /// Creates a registration answer.
    public init(managerURL: String, accountID: String, alias: String) {
        self.managerURL = managerURL
        self.accountID = accountID
        self.alias = alias
    }

    enum CodingKeys: String, CodingKey {
        case managerURL = "manager_url"
        case accountID = "account_id"
        case alias
    }
}

/// The manager's refusal of a registration's data: a verdict per attribute (and the alias).
public struct ManagerRegistrationRefusal: Codable, Sendable, Equatable {
    /// The OAuth-style error name: `invalid_attributes`.
    public var error: String
    /// A human-readable summary of what was refused (`error_description`).
    public var errorDescription: String
    /// The manager's verdict per refused attribute, keyed by ``PersonalAttribute`` raw value (`attribute_errors`).
    public var attributeErrors: [String: RegistrationInformationErrorCode]
    /// Why the alias was refused, as an ``AliasValidator/ResultCode`` raw value (`alias_error`); `nil` when it was not.
    public var aliasError: String?

    /// Creates a refusal.
    public init(
        error: String,
        errorDescription: String,
        attributeErrors: [String: RegistrationInformationErrorCode],
        aliasError: String?
    ) {
        self.error = error
        self.errorDescription = errorDescription
        self.attributeErrors = attributeErrors
        self.aliasError = aliasError
    }

    enum CodingKeys: String, CodingKey {
        case error
        case errorDescription = "error_description"
        case attributeErrors = "attribute_errors"
        case aliasError = "alias_error"
    }
}

/// `POST /xignin/v1/activations`: prove the activation PIN for an e-mailed activation code.
public struct ActivationRequest: Codable, Sendable {
    /// The activation code from the manager's e-mail (`activation_code`).
    public var activationCode: String
    /// The `token` of this activation's PIN evaluation, which names the attempt.
    public var token: String
    /// The PIN-derived key's signature over ``ActivationPinKey/signingInput(token:nonce:)``: base64url DER ECDSA.
    public var signature: String

    /// Creates an activation request.
    public init(activationCode: String, token: String, signature: String) {
        self.activationCode = activationCode
        self.token = token
        self.signature = signature
    }

    enum CodingKeys: String, CodingKey {
        case activationCode = "activation_code"
        case token, signature
    }
}

/// An activated identity manager, as the client lists it.
public struct IdentityManagerEntity: Codable, Sendable, Equatable {
    /// The activation's id at the manager (`activation_id`).
    public var activationID: String
    /// The account the activation belongs to (`account_id`).
    public var accountID: String
    /// The activation's alias, to tell it apart from others of the account.
    public var alias: String
    /// The manager's public URL (`manager_url`).
    public var managerURL: String

    /// Creates an entity.
    public init(activationID: String, accountID: String, alias: String, managerURL: String) {
        self.activationID = activationID
        self.accountID = accountID
        self.alias = alias
        self.managerURL = managerURL
    }

    enum CodingKeys: String, CodingKey {
        case activationID = "activation_id"
        case accountID = "account_id"
        case alias
        case managerURL = "manager_url"
    }
}

/// What the activation PIN's OPRF output becomes: a P-256 signing key only the PIN's holder can
/// derive, so the manager checks the PIN without ever receiving it.
public enum ActivationPinKey {
    /// The domain separator of the key derivation and the signing input; a new version changes both.
    public static let version = "gatehouse-xignin-activation-v1"

    /// What the PIN-derived key signs to activate: the code's attempt token and nonce.
    public static func signingInput(token: String, nonce: Data) -> Data {
        Data("\(version)|activate|\(token)|".utf8) + nonce
    }
}
