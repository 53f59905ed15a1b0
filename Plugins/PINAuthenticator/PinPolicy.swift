public import GatehouseKernel

/// The token server's rules for a new PIN, checked on the device: the PIN never reaches the
/// server (it is blinded for the server's OPRF), so the server cannot check the PIN itself. It
/// publishes the policy (its PIN authenticator's configuration) and sends it with each enrolment,
/// and takes a new PIN only from a client that names the current policy's digest; the SDK checks
/// the PIN in the create-PIN challenge, and `UserClient.validatePinWithPolicy(_:)` checks one
/// outside it. A modified client could still enrol a PIN the policy refuses, for its own user.
///
/// A PIN must be digits only and exactly ``length`` long, must not be on the blocklist (the
/// configured ``blacklist`` plus, unless switched off, a built-in list of the most common PINs),
/// must not be a sequence (unless ``sequencesAllowed``), and no digit may occur more than
/// ``maxSimilarDigits`` times.
public struct PinPolicy: Sendable, Hashable {
    /// The exact number of digits, from 5 to 32. Default 6, as NIST SP 800-63B asks of
    /// device-bound PINs.
    public var length: Int
    /// How many times one digit may occur anywhere in the PIN, from 1 to ``length``. Default 2:
    /// `112233` passes, `111234` and `121314` do not.
    public var maxSimilarDigits: Int
    /// Whether sequences such as `123456`, `135791` or `987654` are allowed. Default `false`.
    public var sequencesAllowed: Bool
    /// PINs refused besides the built-in ones; each must have ``length`` digits.
    public var blacklist: [String]
    /// Whether the built-in list of common PINs applies. Default `true`.
    public var blocksCommonPins: Bool

    /// Makes a policy; every rule has its documented default.
    public init(
        length: Int = 6,
        maxSimilarDigits: Int = 2,
        sequencesAllowed: Bool = false,
        blacklist: [String] = [],
        blocksCommonPins: Bool = true
    ) {
        self.length = length
        self.maxSimilarDigits = maxSimilarDigits
        self.sequencesAllowed = sequencesAllowed
        self.blacklist = blacklist
        self.blocksCommonPins = blocksCommonPins
    }

    /// Every rule `pin` breaks, most important first: not digits, wrong length, blocked,
    /// sequence, similar digits. Empty when the PIN is acceptable.
    public func violations(of pin: PIN) -> [PinValidationError] {
        var found: [PinValidationError] = []
        let digits = pin.digits
        if digits == nil {
            found.append(PinValidationError(.notNumeric))
        }
        let count = pin.count
        if count < length {
            found.append(
                PinValidationError(
                    .tooShort,
                    message: "The PIN must have \(length) digits; it has \(count).",
                    details: ErrorDetails(requiredLength: length)
                )
            )
        } else if count > length {
            found.append(
                PinValidationError(
                    .tooLong,
                    message: "The PIN must have \(length) digits; it has \(count).",
                    details: ErrorDetails(requiredLength: length)
                )
            )
        }
        guard let digits, !digits.isEmpty else { return found }
        if isBlocked(pin, digits: digits) {
            found.append(PinValidationError(.blacklisted))
        }
        if !sequencesAllowed, Self.isSequence(digits) {
            found.append(PinValidationError(.sequence))
        }
        if let mostFrequent = Self.highestDigitCount(digits), mostFrequent > maxSimilarDigits {
            found.append(
                PinValidationError(
                    .similarDigits,
                    message: "No digit may occur more than \(maxSimilarDigits) times in the PIN.",
                    details: ErrorDetails(maxSimilarDigits: maxSimilarDigits)
                )
            )
        }
        return found
    }

    private func isBlocked(_ pin: PIN, digits: [UInt8]) -> Bool {
        // Compare with every entry, without stopping early, so timing says nothing about the list.
        var blocked = false
        for entry in blacklist where pin.constantTimeEquals(PIN(entry)) { blocked = true }
        if blocksCommonPins, CommonPins.contains(digits) { blocked = true }
        return blocked
    }

    /// A sequence: at least three digits where every step is the same non-zero difference
    /// (`13579`, `97531`), or steps of +1 or −1 that wrap around from 9 to 0 (`789012`).
    static func isSequence(_ digits: [UInt8]) -> Bool {
        guard digits.count >= 3 else { return false }
        let steps = zip(digits.dropFirst(), digits).map { Int($0) - Int($1) }
        if let first = steps.first, first != 0, steps.allSatisfy({ $0 == first }) { return true }
        let wrapped = steps.map { ($0 + 10) % 10 }
        return wrapped.allSatisfy { $0 == 1 } || wrapped.allSatisfy { $0 == 9 }
    }

    static func highestDigitCount(_ digits: [UInt8]) -> Int? {
        var counts = [Int](repeating: 0, count: 10)
        for digit in digits { counts[Int(digit)] += 1 }
        return counts.max()
    }
}

extension PinPolicy: Codable {
    private enum CodingKeys: String, CodingKey {
        case length, maxSimilarDigits, sequencesAllowed, blacklist, blocksCommonPins
    }

    /// Reads a policy from configuration: each key may be left out for its default. Throws when a
    /// value is out of its range, when no PIN of `length` digits can meet `maxSimilarDigits`, or
    /// when a `blacklist` entry is not `length` digits.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        length = try container.decode(Int.self, forKey: .length, default: 6, in: 5...32)
        maxSimilarDigits = try container.decode(Int.self, forKey: .maxSimilarDigits, default: 2, in: 1...length)
        guard maxSimilarDigits * 10 >= length else {
            throw container.invalid(
                .maxSimilarDigits,
                "no PIN of \(length) digits can use each digit at most \(maxSimilarDigits) times; use at least \((length + 9) / 10)"
            )
        }
        sequencesAllowed = try container.decode(Bool.self, forKey: .sequencesAllowed, default: false)
        blocksCommonPins = try container.decode(Bool.self, forKey: .blocksCommonPins, default: true)
        let entries = try container.decode([String].self, forKey: .blacklist, default: [])
        for (index, entry) in entries.enumerated()
        where entry.isEmpty || entry.count != length || !entry.allSatisfy({ $0.isASCII && $0.isNumber }) {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: container.codingPath + [CodingKeys.blacklist, ListIndex(index)],
                    debugDescription: "expected a PIN of \(length) digits, found \"\(entry)\""
                )
            )
        }
        self.blacklist = entries
    }

    /// Writes every rule, defaults included, as the token server publishes the policy.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(length, forKey: .length)
        try container.encode(maxSimilarDigits, forKey: .maxSimilarDigits)
        try container.encode(sequencesAllowed, forKey: .sequencesAllowed)
        try container.encode(blacklist, forKey: .blacklist)
        try container.encode(blocksCommonPins, forKey: .blocksCommonPins)
    }

    private struct ListIndex: CodingKey {
        let intValue: Int?
        let stringValue: String
        init(_ index: Int) {
            intValue = index
            stringValue = "Index \(index)"
        }
        init?(intValue: Int) { self.init(intValue) }
        init?(stringValue: String) { nil }
    }
}

/// Validates PINs against a ``PinPolicy``, reporting every rule broken.
public struct PinPolicyValidator: Validator {
    /// The policy PINs are checked against.
    public let policy: PinPolicy

    /// Makes a validator of `policy`.
    public init(policy: PinPolicy) { self.policy = policy }

    /// Checks `input` against the policy, reporting every rule it breaks by its
    /// `PinValidationError` code name (`tooShort`, `sequence`…).
    public func validate(_ input: String) -> ValidationReport {
        ValidationReport(
            violations: policy.violations(of: PIN(input)).map {
                ValidationReport.Violation(code: ValidationCode(rawValue: $0.code.name), message: $0.message)
            }
        )
    }
}

/// `pin.policy`: the token server's PIN policy as a validator. Its configuration is the
/// ``PinPolicy``: `length`, `maxSimilarDigits`, `sequencesAllowed`, `blacklist`, `blocksCommonPins`.
public enum PinPolicyValidatorPlugin: ValidatorPlugin {
    /// The configuration is the policy itself.
    public typealias Configuration = PinPolicy

    /// `"pin.policy"`.
    public static let typeIdentifier: PluginTypeIdentifier = "pin.policy"
    /// One line for listings.
    public static let summary = "PIN policy: exact length, blocklist, no sequences, limited repeats of one digit"

    /// Makes a ``PinPolicyValidator`` of the configured policy.
    public static func makeValidator(configuration: PinPolicy, context: PluginContext) -> any Validator<String> {
        PinPolicyValidator(policy: configuration)
    }
}
