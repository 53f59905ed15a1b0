/// What the manager said about an attribute's value when a registration was refused.
public enum RegistrationInformationErrorCode: String, Codable, Sendable, Hashable, CaseIterable {
    /// Nothing wrong.
    case none
    /// The manager found the value malformed.
    case invalid
    /// The value is taken by another account, or blocked.
    case notAvailable
    /// The attribute is required and no value was given.
    case required
}

/// One attribute of a registration (e-mail, phone, name…): whether the manager requires it, the
/// value the user gave, and the manager's verdict on it after a registration attempt.
public struct RegistrationInformation<FieldValidatorType: FieldValidator>: Sendable {
    /// The manager's verdict on the value, as its registration refusal reports it.
    public typealias ErrorCode = RegistrationInformationErrorCode

    /// The validator that checks each value the user types for this attribute.
    public let validator: FieldValidatorType
    /// Whether the registration fails without a value.
    public let isRequired: Bool
    /// The accepted value; `nil` until ``setValue(value:)`` accepts one.
    public private(set) var value: String?
    /// The manager's verdict from the last registration attempt.
    public var error: ErrorCode

    /// Creates an attribute; `value` is taken as given, without checking it.
    public init(validator: FieldValidatorType, isRequired: Bool, value: String? = nil, error: ErrorCode = .none) {
        self.validator = validator
        self.isRequired = isRequired
        self.value = value
        self.error = error
    }

    /// Checks `value` and keeps it when valid, clearing the manager's previous verdict; a refused
    /// value resets the attribute to no value, so a stale value can never be sent.
    @discardableResult
    public mutating func setValue(value: String) -> FieldValidatorType.ResultCode {
        let code = validator.resultCode(for: value)
        if code == .valid {
            self.value = value
            self.error = .none
        } else {
            self.value = nil
        }
        return code
    }

    /// Removes the value.
    public mutating func clear() { value = nil }
}
