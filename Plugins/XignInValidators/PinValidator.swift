public import GatehouseKernel

/// Checks an activation PIN against the manager's PIN specification: digits only, between
/// ``minLength`` and ``maxLength`` characters.
public struct PinValidator: FieldValidator, Hashable {
    /// The result of checking a PIN, in the order the checks run.
    public enum ResultCode: String, FieldValidationResult {
        case valid
        /// Nothing was typed.
        case empty
        /// Something other than the digits 0–9 was typed.
        case onlyNumbers
        /// Fewer than ``PinValidator/minLength`` digits.
        case tooShort
        /// More than ``PinValidator/maxLength`` digits.
        case tooLong
    }

    /// The fewest digits a PIN may have, from the manager's PIN specification.
    public let minLength: Int
    /// The most digits a PIN may have, from the manager's PIN specification.
    public let maxLength: Int

    /// A validator for PINs of `minLength` to `maxLength` digits.
    public init(minLength: Int, maxLength: Int) {
        self.minLength = minLength
        self.maxLength = maxLength
    }

    /// The code for a typed PIN: `empty`, `onlyNumbers`, `tooShort` or `tooLong` in that order, else `valid`.
    public func resultCode(for value: String) -> ResultCode {
        resultCode(for: PIN(value))
    }

    /// The code for a PIN, without turning it back into a `String`.
    public func resultCode(for pin: PIN) -> ResultCode {
        if pin.isEmpty { return .empty }
        guard let digits = pin.digits else { return .onlyNumbers }
        if digits.count < minLength { return .tooShort }
        if digits.count > maxLength { return .tooLong }
        return .valid
    }

    /// An English sentence for `code` that names this validator's limits, for a form's error label.
    public func message(for code: ResultCode) -> String {
        switch code {
        case .valid: "The PIN is valid."
        case .empty: "The PIN must not be empty."
        case .onlyNumbers: "Only numbers are allowed."
        case .tooShort: "The PIN must be at least \(minLength) digits long."
        case .tooLong: "The PIN can't be longer than \(maxLength) digits."
        }
    }
}

/// The manager's PIN specification and the activation PIN the user chose.
///
/// ```swift
/// switch parameters.pinSpec.setPin(typed) {
/// case .valid: break
/// case .tooShort: error = "PIN must be at least \(parameters.pinSpec.minLength) digits long"
/// …
/// }
/// ```
public struct PinSpecification: Sendable {
    /// The validator that checks each PIN the user types.
    public let validator: PinValidator
    /// The accepted PIN; `nil` until ``setPin(_:)`` accepts one.
    public private(set) var pin: PIN?

    /// A specification for PINs of `minLength` to `maxLength` digits, with no PIN chosen yet.
    public init(minLength: Int, maxLength: Int) {
        self.validator = PinValidator(minLength: minLength, maxLength: maxLength)
    }

    /// The fewest digits a PIN may have.
    public var minLength: Int { validator.minLength }
    /// The most digits a PIN may have.
    public var maxLength: Int { validator.maxLength }

    /// Checks `pin` and keeps it when valid; a refused PIN clears the one kept before.
    @discardableResult
    public mutating func setPin(_ pin: String) -> PinValidator.ResultCode {
        let candidate = PIN(pin)
        let code = validator.resultCode(for: candidate)
        self.pin = code == .valid ? candidate : nil
        return code
    }
}
