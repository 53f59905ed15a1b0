/// Checks an e-mail address the way a mail server would accept it for delivery.
///
/// The address is `local@domain` (RFC 5321 and 5322, with the internationalised forms of
/// RFC 6531): the local part is a dot-atom of at most 64 bytes; the domain is a host name of at
/// least two labels, each 1–63 letters, digits or hyphens, not starting or ending with a hyphen,
/// and a top-level label that is not all digits. Quoted local parts and address literals
/// (`user@[192.0.2.1]`) are refused: no registration needs them, and they are a common way to
/// smuggle odd input past checks.
public struct EmailValidator: FieldValidator, Hashable {
    /// The result of checking an e-mail address.
    public enum ResultCode: String, FieldValidationResult {
        case valid
        /// Nothing but white space was typed.
        case empty
        /// Not an address.
        case invalid
    }

    /// The longest address accepted, in UTF-8 bytes (RFC 5321 allows 254).
    public let maxLength: Int

    /// A validator for addresses of at most `maxLength` UTF-8 bytes (default 254).
    public init(maxLength: Int = 254) { self.maxLength = maxLength }

    /// The code for `value`: `empty` for white space only, otherwise `valid` or `invalid`.
    public func resultCode(for value: String) -> ResultCode {
        if value.allSatisfy(\.isWhitespace) { return .empty }
        return Self.isAddress(value, maxLength: maxLength) ? .valid : .invalid
    }

    /// An English sentence for `code`, for a form's error label.
    public func message(for code: ResultCode) -> String {
        switch code {
        case .valid: "The e-mail address is valid."
        case .empty: "The e-mail address must not be empty."
        case .invalid: "This is not a valid e-mail address."
        }
    }

    static func isAddress(_ address: String, maxLength: Int) -> Bool {
        guard address.utf8.count <= maxLength, let at = address.lastIndex(of: "@") else { return false }
        let local = address[..<at]
        let domain = address[address.index(after: at)...]
        return isLocalPart(local) && isDomain(domain)
    }

    /// Characters RFC 5322 allows in an atom besides letters and digits.
    private static let atomSymbols = Set("!#$%&'*+-/=?^_`{|}~")

    private static func isLocalPart(_ local: Substring) -> Bool {
        guard (1...64).contains(local.utf8.count) else { return false }
        return local.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { atom in
            !atom.isEmpty
                && atom.unicodeScalars.allSatisfy { scalar in
                    if scalar.isASCII {
                        return ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar)
                            || ("0"..."9").contains(scalar)
                            || atomSymbols.contains(Character(scalar))
                    }
                    return isInternationalText(scalar)
                }
        }
    }

    private static func isDomain(_ domain: Substring) -> Bool {
        guard (1...253).contains(domain.utf8.count) else { return false }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, let topLevel = labels.last else { return false }
        guard !topLevel.allSatisfy(\.isNumber) else { return false }
        return labels.allSatisfy { label in
            (1...63).contains(label.utf8.count)
                && label.first != "-" && label.last != "-"
                && label.unicodeScalars.allSatisfy { scalar in
                    if scalar.isASCII {
                        return ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar)
                            || ("0"..."9").contains(scalar)
                            || scalar == "-"
                    }
                    return isInternationalText(scalar)
                }
        }
    }

    /// Letters, marks and digits beyond ASCII (RFC 6531); never spaces, controls or symbols that
    /// look like separators.
    private static func isInternationalText(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
            .nonspacingMark, .spacingMark, .enclosingMark, .decimalNumber:
            return true
        default:
            return false
        }
    }
}
