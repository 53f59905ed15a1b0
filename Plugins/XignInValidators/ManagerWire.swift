public import Foundation

// The JSON messages between a XignIn registry client and the manager. snake_case on the wire.

/// `GET /xignin/v1/configuration?service_mapping_id=…`: what a registration must supply.
public struct ManagerConfigurationMessage: Codable, Sendable, Equatable {
    public struct Length: Codable, Sendable, Equatable {
        public var minLength: Int
        public var maxLength: Int

        public init(minLength: Int, maxLength: Int) {
            self.minLength = minLength
            self.maxLength = maxLength
        }

        enum CodingKeys: String, CodingKey {
            case minLength = "min_length"
            case maxLength = "max_length"
        }
    }

    public struct Category: Codable, Sendable, Equatable {
        public var id: String
        public var types: [IdentificationType]
        public var required: [PersonalAttribute]
        public var identificationAttributes: [PersonalAttribute]

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

    public var managerURL: String
    public var pin: Length
    public var alias: Length
    public var emailMaxLength: Int
    public var categories: [Category]
    /// Whether the service mapping id given with the request is known to the manager.
    public var serviceMappingValid: Bool

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
    public var blinded: String
    public var activationCode: String?

    public init(blinded: String, activationCode: String?) {
        self.blinded = blinded
        self.activationCode = activationCode
    }

    enum CodingKeys: String, CodingKey {
        case blinded
        case activationCode = "activation_code"
    }
}

public struct PinEvaluationResponse: Codable, Sendable {
    public var evaluation: String
    public var oprfPublicKey: String
    /// Registration: names the key for the registration request. Activation: names the attempt.
    public var token: String
    /// Activation only: what the PIN-derived key signs.
    public var nonce: String?

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
    public var serviceMappingID: String?
    public var category: String
    public var attributes: [String: String]
    public var alias: String?
    public var arbitraryAttributes: [String: String]?
    /// The token of the activation PIN's evaluation, and the public key derived from its output.
    public var pinToken: String
    public var pinPublicKey: String

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

public struct ManagerRegistrationResponse: Codable, Sendable, Equatable {
    public var managerURL: String
    public var accountID: String
    public var alias: String

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
    public var error: String
    public var errorDescription: String
    public var attributeErrors: [String: RegistrationInformationErrorCode]
    public var aliasError: String?

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
    public var activationCode: String
    public var token: String
    public var signature: String

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
    public var activationID: String
    public var accountID: String
    public var alias: String
    public var managerURL: String

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
    public static let version = "gatehouse-xignin-activation-v1"

    /// What the PIN-derived key signs to activate: the code's attempt token and nonce.
    public static func signingInput(token: String, nonce: Data) -> Data {
        Data("\(version)|activate|\(token)|".utf8) + nonce
    }
}
