public import GatehouseKernel

/// A third-party validator in one file: Dutch postal codes such as "1234 AB".
public struct PostalCodeValidator: Validator {
    /// Whether a space must separate the digits from the letters ("1234 AB", not "1234AB").
    public var requiresSpace: Bool

    /// Checks `input`, case-insensitively: `badNumber`, `badLetters` or `badSpacing` when it is no postal code.
    public func validate(_ input: String) -> ValidationReport {
        let text = Array(input.uppercased())
        let digits = text.prefix(4)
        let letters = text.dropFirst(4).drop { $0 == " " }
        let spaces = text.count - digits.count - letters.count
        guard digits.count == 4, digits.allSatisfy({ ("0"..."9").contains($0) }), digits.first != "0" else {
            return .invalid("badNumber", "A postal code starts with four digits, the first not 0.")
        }
        guard letters.count == 2, letters.allSatisfy({ ("A"..."Z").contains($0) }),
            !["SA", "SD", "SS"].contains(String(letters))
        else { return .invalid("badLetters", "A postal code ends with two letters (not SA, SD or SS).") }
        guard spaces <= 1, !requiresSpace || spaces == 1 else {
            return .invalid("badSpacing", requiresSpace ? "Put a space before letters." : "Use one space at most.")
        }
        return .valid
    }
}

/// Registers as `example.postalCode`; config `requiresSpace` (default false).
public enum PostalCodeValidatorPlugin: ValidatorPlugin {
    /// The `config` of an `example.postalCode` entry.
    public struct Configuration: Decodable, Sendable {
        /// `requiresSpace`: whether a space must separate digits and letters; `nil` (left out) means `false`.
        public var requiresSpace: Bool?
    }

    /// `"example.postalCode"`.
    public static let typeIdentifier: PluginTypeIdentifier = "example.postalCode"
    /// One line for listings.
    public static let summary = "Dutch postal code, e.g. 1234 AB"

    /// Makes a ``PostalCodeValidator`` with the configured spacing rule.
    public static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        PostalCodeValidator(requiresSpace: configuration.requiresSpace ?? false)
    }
}
