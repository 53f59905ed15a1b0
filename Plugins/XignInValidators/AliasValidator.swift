/// Checks the alias of an activation: a free name of ``minLength`` to ``maxLength`` characters.
///
/// Lengths count characters as people see them (grapheme clusters), so "Zoë's 📱" is 7 long
/// whatever its encoding. Surrounding white space does not count, and an alias of white space
/// only is empty.
public struct AliasValidator: FieldValidator, Hashable {
    public enum ResultCode: String, FieldValidationResult {
        case valid
        /// Nothing but white space was typed.
        case empty
        /// Fewer than ``AliasValidator/minLength`` characters.
        case tooShort
        /// More than ``AliasValidator/maxLength`` characters.
        case tooLong
    }

    public let minLength: Int
    public let maxLength: Int

    public init(minLength: Int, maxLength: Int) {
        self.minLength = minLength
        self.maxLength = maxLength
    }

    public func resultCode(for value: String) -> ResultCode {
        let length = value.trimmingWhitespace().count
        if length == 0 { return .empty }
        if length < minLength { return .tooShort }
        if length > maxLength { return .tooLong }
        return .valid
    }

    public func message(for code: ResultCode) -> String {
        switch code {
        case .valid: "The alias is valid."
        case .empty: "The alias must not be empty."
        case .tooShort: "The alias must be at least \(minLength) characters long."
        case .tooLong: "The alias cannot be longer than \(maxLength) characters."
        }
    }
}

extension String {
    func trimmingWhitespace() -> Substring {
        let start = firstIndex { !$0.isWhitespace } ?? endIndex
        let end = lastIndex { !$0.isWhitespace }.map { index(after: $0) } ?? start
        return self[start..<max(start, end)]
    }
}
