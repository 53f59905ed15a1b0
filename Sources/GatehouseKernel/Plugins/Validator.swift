/// Checks what a person typed, reporting every rule the input breaks.
///
/// Validators are synchronous and pure: the same input gives the same report. The primary
/// associated type lets the registry hold `[any Validator<String>]`.
public protocol Validator<Input>: Sendable {
    /// What the validator checks: `String` for every validator a manifest configures.
    associatedtype Input
    /// Checks `input`, reporting every rule it breaks.
    func validate(_ input: Input) -> ValidationReport
}

/// The short, stable name of a validation result, such as `"valid"`, `"tooShort"` or `"blacklisted"`.
public struct ValidationCode: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible
{
    /// The name itself, e.g. `"tooShort"`.
    public let rawValue: String
    /// Makes a code from its name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Makes a code from a literal, e.g. `let tooShort: ValidationCode = "tooShort"`.
    public init(stringLiteral value: String) { self.rawValue = value }
    /// The name itself.
    public var description: String { rawValue }

    /// The input breaks no rule.
    public static let valid: ValidationCode = "valid"
}

/// What a validator found: nothing, or the rules the input breaks, most important first.
public struct ValidationReport: Hashable, Sendable, CustomStringConvertible {
    /// One broken rule.
    public struct Violation: Hashable, Sendable {
        /// Which rule is broken, e.g. `"tooShort"`: stable, for code and tests to match on.
        public var code: ValidationCode
        /// A sentence a person can act on.
        public var message: String

        /// Makes a violation.
        public init(code: ValidationCode, message: String) {
            self.code = code
            self.message = message
        }
    }

    /// Broken rules, most important first; empty when the input is valid.
    public var violations: [Violation]

    /// Makes a report of `violations`, most important first.
    public init(violations: [Violation]) { self.violations = violations }

    /// A report that found nothing wrong.
    public static let valid = ValidationReport(violations: [])

    /// A report of one broken rule.
    public static func invalid(_ code: ValidationCode, _ message: String) -> ValidationReport {
        ValidationReport(violations: [Violation(code: code, message: message)])
    }

    /// Whether the input breaks no rule.
    public var isValid: Bool { violations.isEmpty }

    /// The most important result: ``ValidationCode/valid`` or the first violation's code.
    public var code: ValidationCode { violations.first?.code ?? .valid }

    /// Every code, most important first; `["valid"]` when valid.
    public var codes: [ValidationCode] { isValid ? [.valid] : violations.map(\.code) }

    /// The codes, comma-separated, e.g. `"tooShort, notNumeric"`.
    public var description: String { codes.map(\.rawValue).joined(separator: ", ") }
}
