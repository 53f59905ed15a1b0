/// Checks the alias of an activation: a free name of ``minLength`` to ``maxLength`` characters.
///
/// Lengths count characters as people see them (grapheme clusters), so "Zoë's 📱" is 7 long
/// whatever its encoding. Surrounding white space does not count, and an alias of white space
/// only is empty. Control characters and line breaks are refused: the alias is written into mail
/// headers and onto screens, where a line break would start a header of the sender's choosing.
public struct AliasValidator: FieldValidator, Hashable {
    /// The result of checking an alias, in the order the checks run.
    public enum ResultCode: String, FieldValidationResult {
        case valid
        /// Nothing but white space was typed.
        case empty
        /// Fewer than ``AliasValidator/minLength`` characters.
        case tooShort
        /// More than ``AliasValidator/maxLength`` characters.
        case tooLong
        /// A control character or a line break.
        case invalid
    }

    /// The fewest characters an alias may have, after trimming white space.
    public let minLength: Int
    /// The most characters an alias may have, after trimming white space.
    public let maxLength: Int

    /// A validator for aliases of `minLength` to `maxLength` characters.
    public init(minLength: Int, maxLength: Int) {
        self.minLength = minLength
        self.maxLength = maxLength
    }

    /// The code for `value`: `invalid` first, then `empty`, `tooShort` and `tooLong`.
    public func resultCode(for value: String) -> ResultCode {
        let text = value.trimmingWhitespace()
        if text.unicodeScalars.contains(where: \.isControlOrLineBreak) { return .invalid }
        let length = text.count
        if length == 0 { return .empty }
        if length < minLength { return .tooShort }
        if length > maxLength { return .tooLong }
        return .valid
    }

    /// An English sentence for `code` that names this validator's limits, for a form's error label.
    public func message(for code: ResultCode) -> String {
        switch code {
        case .valid: "The alias is valid."
        case .empty: "The alias must not be empty."
        case .tooShort: "The alias must be at least \(minLength) characters long."
        case .tooLong: "The alias cannot be longer than \(maxLength) characters."
        case .invalid: "The alias must not contain control characters or line breaks."
        }
    }
}

extension Unicode.Scalar {
    /// C0 and C1 controls (CR, LF, NUL, ESC among them) and the Unicode line and paragraph
    /// separators.
    var isControlOrLineBreak: Bool {
        switch properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: true
        default: false
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
