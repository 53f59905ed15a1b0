public import GatehouseKernel

/// The result codes of one XignIn field validator, such as ``EmailValidator/ResultCode``.
public protocol FieldValidationResult: RawRepresentable<String>, Hashable, Sendable, CaseIterable {
    /// The code that means the value is accepted.
    static var valid: Self { get }
}

/// A validator of one registration field, with typed result codes as in the XignIn SDK.
public protocol FieldValidator: Validator<String> {
    associatedtype ResultCode: FieldValidationResult
    /// The code for `value`.
    func resultCode(for value: String) -> ResultCode
    /// A sentence explaining a code other than `valid`, using this validator's limits.
    func message(for code: ResultCode) -> String
}

extension FieldValidator {
    /// The kernel's view of the same check, so the validator can sit in a `PluginRegistry`.
    public func validate(_ input: String) -> ValidationReport {
        let code = resultCode(for: input)
        return code == .valid ? .valid : .invalid(ValidationCode(rawValue: code.rawValue), message(for: code))
    }
}
