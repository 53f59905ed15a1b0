public import Foundation

/// Checks a phone number: digits with an optional leading `+`, spaces, dashes, dots and
/// parentheses as separators, 6 to 15 digits in all (E.164's maximum).
public struct PhoneValidator: FieldValidator, Hashable {
    /// The result of checking a phone number.
    public enum ResultCode: String, FieldValidationResult {
        case valid
        case empty
        case invalid
    }

    /// A phone number validator; its limits are fixed.
    public init() {}

    /// The code for `value`: `empty` for white space only, `invalid` for another character or a digit count outside
    /// 6–15.
    public func resultCode(for value: String) -> ResultCode {
        let text = value.trimmingWhitespace()
        if text.isEmpty { return .empty }
        var digits = 0
        for (offset, character) in text.enumerated() {
            switch character {
            case "0"..."9": digits += 1
            case "+" where offset == 0: continue
            case " ", "-", ".", "(", ")": continue
            default: return .invalid
            }
        }
        return (6...15).contains(digits) ? .valid : .invalid
    }

    /// An English sentence for `code`, for a form's error label.
    public func message(for code: ResultCode) -> String {
        switch code {
        case .valid: "The phone number is valid."
        case .empty: "The phone number must not be empty."
        case .invalid: "This is not a valid phone number."
        }
    }
}

/// Checks a name or place: not empty, at most ``maxLength`` characters, no control characters.
public struct NameValidator: FieldValidator, Hashable {
    /// The result of checking a name or place: `empty`, `invalid` (a control character) or `tooLong`.
    public enum ResultCode: String, FieldValidationResult {
        case valid
        case empty
        case invalid
        case tooLong
    }

    /// The most characters a value may have, after trimming white space.
    public let maxLength: Int

    /// A validator for values of at most `maxLength` characters (default 100).
    public init(maxLength: Int = 100) { self.maxLength = maxLength }

    /// The code for `value`: `empty`, then `invalid`, then `tooLong`, else `valid`.
    public func resultCode(for value: String) -> ResultCode {
        let text = value.trimmingWhitespace()
        if text.isEmpty { return .empty }
        if text.unicodeScalars.contains(where: \.isControlOrLineBreak) { return .invalid }
        return text.count > maxLength ? .tooLong : .valid
    }

    /// An English sentence for `code` that names this validator's limit, for a form's error label.
    public func message(for code: ResultCode) -> String {
        switch code {
        case .valid: "The value is valid."
        case .empty: "The value must not be empty."
        case .invalid: "The value contains characters that are not allowed."
        case .tooLong: "The value cannot be longer than \(maxLength) characters."
        }
    }
}

/// Checks a date of birth written as `YYYY-MM-DD`: a real calendar date, not in the future, and
/// not before 1900.
public struct BirthdateValidator: FieldValidator, Hashable {
    /// The result of checking a date of birth: `invalid` covers a malformed, unreal, future or pre-1900 date.
    public enum ResultCode: String, FieldValidationResult {
        case valid
        case empty
        case invalid
    }

    /// Dates after this one are refused as being in the future; fixed by the caller for tests.
    public let today: Date

    /// A validator that refuses dates after `today` (default: now).
    public init(today: Date = Date()) { self.today = today }

    /// The code for `value`: `empty` for white space only, `invalid` unless it is a real date from 1900 to `today`.
    public func resultCode(for value: String) -> ResultCode {
        let text = value.trimmingWhitespace()
        if text.isEmpty { return .empty }
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]), year >= 1900
        else { return .invalid }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let components = DateComponents(year: year, month: month, day: day)
        guard components.isValidDate(in: calendar), let date = calendar.date(from: components), date <= today else {
            return .invalid
        }
        return .valid
    }

    /// An English sentence for `code`, for a form's error label.
    public func message(for code: ResultCode) -> String {
        switch code {
        case .valid: "The date is valid."
        case .empty: "The date must not be empty."
        case .invalid: "Give a past date as YYYY-MM-DD."
        }
    }
}
