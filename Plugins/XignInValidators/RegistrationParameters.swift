public import Foundation

/// How a user can be identified at registration. A closed set, from the XignIn-Manager.
public enum IdentificationType: String, Codable, Sendable, CaseIterable {
    case anonymous
    case email
    case phone
    case idCard
}

/// A personal attribute a registration can collect.
public enum PersonalAttribute: String, Codable, Sendable, CaseIterable, Comparable {
    case email
    case phone
    case firstName
    case lastName
    case birthdate
    case placeOfBirth

    /// Orders attributes as they are declared, the order a form shows them in.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs) ?? 0 < allCases.firstIndex(of: rhs) ?? 0
    }
}

/// The user data a category collects: one ``RegistrationInformation`` per attribute, each with
/// its validator, whether the manager requires it, the value and the manager's verdict.
public struct RegistrationPersonalInformation: Sendable {
    /// The e-mail address.
    public var email: RegistrationInformation<EmailValidator>
    /// The phone number.
    public var phone: RegistrationInformation<PhoneValidator>
    /// The first name.
    public var firstName: RegistrationInformation<NameValidator>
    /// The last name.
    public var lastName: RegistrationInformation<NameValidator>
    /// The date of birth, as `YYYY-MM-DD`.
    public var birthdate: RegistrationInformation<BirthdateValidator>
    /// The place of birth.
    public var placeOfBirth: RegistrationInformation<NameValidator>

    /// Attributes with `required` marked as such, checked with the given e-mail validator.
    public init(
        required: Set<PersonalAttribute>,
        emailValidator: EmailValidator = EmailValidator(),
        today: Date = Date()
    ) {
        email = RegistrationInformation(validator: emailValidator, isRequired: required.contains(.email))
        phone = RegistrationInformation(validator: PhoneValidator(), isRequired: required.contains(.phone))
        firstName = RegistrationInformation(validator: NameValidator(), isRequired: required.contains(.firstName))
        lastName = RegistrationInformation(validator: NameValidator(), isRequired: required.contains(.lastName))
        birthdate = RegistrationInformation(
            validator: BirthdateValidator(today: today),
            isRequired: required.contains(.birthdate)
        )
        placeOfBirth = RegistrationInformation(validator: NameValidator(), isRequired: required.contains(.placeOfBirth))
    }

    /// The accepted values, by attribute.
    public var values: [PersonalAttribute: String] {
        var values: [PersonalAttribute: String] = [:]
        for attribute in PersonalAttribute.allCases { values[attribute] = value(of: attribute) }
        return values
    }

    /// The accepted value of `attribute`; `nil` when none was accepted yet.
    public func value(of attribute: PersonalAttribute) -> String? {
        switch attribute {
        case .email: email.value
        case .phone: phone.value
        case .firstName: firstName.value
        case .lastName: lastName.value
        case .birthdate: birthdate.value
        case .placeOfBirth: placeOfBirth.value
        }
    }

    /// Whether the manager requires `attribute` in this category.
    public func isRequired(_ attribute: PersonalAttribute) -> Bool {
        switch attribute {
        case .email: email.isRequired
        case .phone: phone.isRequired
        case .firstName: firstName.isRequired
        case .lastName: lastName.isRequired
        case .birthdate: birthdate.isRequired
        case .placeOfBirth: placeOfBirth.isRequired
        }
    }

    /// The manager's verdict on an attribute from the last registration attempt.
    public func error(of attribute: PersonalAttribute) -> AttributeError {
        switch attribute {
        case .email: email.error
        case .phone: phone.error
        case .firstName: firstName.error
        case .lastName: lastName.error
        case .birthdate: birthdate.error
        case .placeOfBirth: placeOfBirth.error
        }
    }

    /// Sets the manager's verdicts; attributes not named get `none`.
    public mutating func setErrors(_ errors: [PersonalAttribute: AttributeError]) {
        email.error = errors[.email] ?? .none
        phone.error = errors[.phone] ?? .none
        firstName.error = errors[.firstName] ?? .none
        lastName.error = errors[.lastName] ?? .none
        birthdate.error = errors[.birthdate] ?? .none
        placeOfBirth.error = errors[.placeOfBirth] ?? .none
    }

    /// What the manager itself would say about `values`: required attributes missing, and values
    /// their validators refuse. The manager runs this on everything a client sends.
    public func check(_ values: [PersonalAttribute: String]) -> [PersonalAttribute: AttributeError] {
        var errors: [PersonalAttribute: AttributeError] = [:]
        for attribute in PersonalAttribute.allCases {
            guard let value = values[attribute], !value.allSatisfy(\.isWhitespace) else {
                if isRequired(attribute) { errors[attribute] = .required }
                continue
            }
            if !accepts(value, for: attribute) { errors[attribute] = .invalid }
        }
        return errors
    }

    private func accepts(_ value: String, for attribute: PersonalAttribute) -> Bool {
        switch attribute {
        case .email: email.validator.resultCode(for: value) == .valid
        case .phone: phone.validator.resultCode(for: value) == .valid
        case .firstName: firstName.validator.resultCode(for: value) == .valid
        case .lastName: lastName.validator.resultCode(for: value) == .valid
        case .birthdate: birthdate.validator.resultCode(for: value) == .valid
        case .placeOfBirth: placeOfBirth.validator.resultCode(for: value) == .valid
        }
    }
}

/// The manager's verdict on one attribute.
public typealias AttributeError = RegistrationInformationErrorCode

/// One way to identify at registration: which identification types it stands for, which
/// attributes it collects and which of them identify the user.
public struct IdentificationCategory: Sendable, Identifiable {
    /// The category's id at the manager, sent as the registration's `category`.
    public let id: String
    /// The identification types the category stands for.
    public let types: Set<IdentificationType>
    /// The attributes that identify the user in this category.
    public let identificationAttributes: Set<PersonalAttribute>
    /// The attributes the category collects, with their values as the user fills them in.
    public var info: RegistrationPersonalInformation

    /// Creates a category.
    public init(
        id: String,
        types: Set<IdentificationType>,
        identificationAttributes: Set<PersonalAttribute>,
        info: RegistrationPersonalInformation
    ) {
        self.id = id
        self.types = types
        self.identificationAttributes = identificationAttributes
        self.info = info
    }
}

/// Everything a registration at a XignIn-style manager needs, to be filled in by the app: the
/// activation PIN, a category with its attributes, optionally an alias and arbitrary attributes
/// for a linked service.
public struct RegistrationParameters: Sendable {
    /// The manager the parameters came from.
    public let managerURL: URL
    /// Where the manager's API was reached, if that differs from ``managerURL``.
    public let endpoint: URL?
    /// The linked-service mapping given at initialisation, if the manager knows it.
    public let serviceMappingID: String?
    /// The activation PIN's length limits and the PIN the user chose.
    public var pinSpec: PinSpecification
    /// The alias's validator (the seed's `validatorAlias`).
    public let validatorAlias: AliasValidator
    /// The alias of the first activation, once ``setAlias(_:)`` accepts one; `nil` for the manager's default.
    public private(set) var alias: String?
    /// The manager's verdict on ``alias`` from the last registration attempt: nil when it took the
    /// alias (or none was sent), otherwise why it refused it (its validator may be stricter than
    /// ``validatorAlias`` was). ``setAlias(_:)`` clears it.
    public var aliasError: AliasValidator.ResultCode?
    /// The categories the manager offers, with the values filled in so far.
    public var categories: [IdentificationCategory]
    /// The id of the category ``setSelection(_:)`` chose; `nil` until one is chosen.
    public private(set) var selectedCategoryID: String?
    /// The attributes for the linked service, as ``setArbitraryUserAttributes(_:)`` set them.
    public private(set) var arbitraryUserAttributes: [String: String] = [:]

    /// Creates parameters with no category selected and no alias set.
    public init(
        managerURL: URL,
        endpoint: URL? = nil,
        serviceMappingID: String?,
        pinSpec: PinSpecification,
        validatorAlias: AliasValidator,
        categories: [IdentificationCategory]
    ) {
        self.managerURL = managerURL
        self.endpoint = endpoint
        self.serviceMappingID = serviceMappingID
        self.pinSpec = pinSpec
        self.validatorAlias = validatorAlias
        self.categories = categories
    }

    /// Selects the category to register with. `false` when it is not one of ``categories``.
    @discardableResult
    public mutating func setSelection(_ category: IdentificationCategory) -> Bool {
        guard categories.contains(where: { $0.id == category.id }) else { return false }
        selectedCategoryID = category.id
        return true
    }

    /// The selected category; setting it writes the category (its attribute values) back.
    public var selection: IdentificationCategory? {
        get { categories.first { $0.id == selectedCategoryID } }
        set {
            guard let newValue, let index = categories.firstIndex(where: { $0.id == newValue.id }) else { return }
            categories[index] = newValue
            selectedCategoryID = newValue.id
        }
    }

    /// Sets the alias of the first activation; a refused alias clears the one set before.
    @discardableResult
    public mutating func setAlias(_ alias: String) -> AliasValidator.ResultCode {
        let code = validatorAlias.resultCode(for: alias)
        self.alias = code == .valid ? alias : nil
        aliasError = nil
        return code
    }

    /// Attributes for the linked service. Kept by the manager only with a valid service mapping,
    /// and delivered to that service at the first activation.
    public mutating func setArbitraryUserAttributes(_ attributes: [String: String]) {
        arbitraryUserAttributes = attributes
    }
}
