/// A family of errors that belong together, such as PIN validation or registration.
///
/// Each seed domain is one domain type; ``GatehouseError`` specialised for it is that domain's
/// error type (``PinValidationError``, ``GenericError``, …).
public protocol ErrorDomain: Sendable {
    /// The domain's name as it appears in diagnostics, e.g. `"PinValidation"`.
    static var name: String { get }
    /// The codes Gatehouse itself defines in this domain, to turn a number back into its code.
    static var knownCodes: [GatehouseError<Self>.Code] { get }
}

extension ErrorDomain {
    /// No codes: a domain that defines none turns every number into an unknown code.
    public static var knownCodes: [GatehouseError<Self>.Code] { [] }
}

/// What every Gatehouse error offers, whatever its domain: for code that reports errors without
/// knowing their domain (a command-line tool, a log line, an HTTP error body).
public protocol DomainError: Error, Sendable, CustomStringConvertible {
    /// The domain's name, e.g. `"Generic"`.
    var domainName: String { get }
    /// The numeric code, stable across releases (9000–9999: show to the user; 10000 and up:
    /// misconfiguration or states that should not happen).
    var codeNumber: Int { get }
    /// The code's short name, e.g. `"userDeregistered"`.
    var codeName: String { get }
    /// The plugin that defines the code, for a plugin's own code; `nil` for Gatehouse's codes.
    var codePlugin: PluginTypeIdentifier? { get }
    /// A sentence a person can act on.
    var message: String { get }
    /// Typed extras, such as the allowed maximum of similar digits.
    var details: ErrorDetails { get }
}

extension DomainError {
    /// `nil`: an error type that does not say otherwise carries one of Gatehouse's own codes.
    public var codePlugin: PluginTypeIdentifier? { nil }
}

/// An error of one domain: an open code, a message a person can act on, typed details, the
/// plugin that raised it and the error underneath, if any.
///
/// Catch it by code, as with GRDB's result codes:
/// ```swift
/// catch let error as GenericError where error.code == .userDeregistered { … }
/// ```
/// Codes are an open set: a plugin adds its own as static members of ``Code``, naming itself as
/// their `plugin`, so that two plugins' codes never compare equal:
/// ```swift
/// extension AuthenticationError.Code {
///     static let voiceNotRecognised = Self(19001, name: "voiceNotRecognised",
///         defaultMessage: "The voice was not recognised.", plugin: "acme.voice")
/// }
/// ```
public struct GatehouseError<Domain: ErrorDomain>: DomainError, CustomDebugStringConvertible {
    /// An error code. Two codes are equal when their numbers and their plugins are.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable number of this code.
        public let rawValue: Int
        /// A short name, e.g. `"blacklisted"`.
        public let name: String
        /// The message used when an error is raised without one of its own.
        public let defaultMessage: String
        /// The plugin type that defines this code; `nil` for Gatehouse's own codes. It travels with
        /// the code over HTTP, so an app catches a plugin's code as the plugin defined it.
        public let plugin: PluginTypeIdentifier?

        /// Makes a code.
        ///
        /// - Parameters:
        ///   - rawValue: The stable number. A plugin picks numbers of its own (19000 and up, say);
        ///     they only need to differ from its other codes, since ``plugin`` tells plugins apart.
        ///   - name: A short name, e.g. `"voiceNotRecognised"`.
        ///   - defaultMessage: A sentence a person can act on, used when an error is raised without
        ///     one.
        ///   - plugin: The plugin type that defines the code; `nil` only for Gatehouse's own codes.
        public init(_ rawValue: Int, name: String, defaultMessage: String, plugin: PluginTypeIdentifier? = nil) {
            self.rawValue = rawValue
            self.name = name
            self.defaultMessage = defaultMessage
            self.plugin = plugin
        }

        /// Whether two codes are the same code: same number and same defining plugin. Names and
        /// messages do not count.
        public static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.rawValue == rhs.rawValue && lhs.plugin == rhs.plugin
        }
        /// Hashes the number and the plugin, the parts equality compares.
        public func hash(into hasher: inout Hasher) {
            hasher.combine(rawValue)
            hasher.combine(plugin)
        }
        /// The domain, name, number and plugin, e.g. `"PinValidation.tooShort (9014)"`, for logs.
        public var description: String {
            "\(Domain.name).\(name) (\(rawValue)\(plugin.map { ", plugin \($0)" } ?? ""))"
        }
    }

    /// What went wrong, as an open code of this domain; catch on it.
    public var code: Code
    /// A sentence a person can act on; the code's ``Code/defaultMessage`` unless the raiser gave
    /// one.
    public var message: String
    /// Typed extras, such as the PIN length the policy requires; empty for most codes.
    public var details: ErrorDetails
    /// The plugin type that raised the error, when a plugin did.
    public var plugin: PluginTypeIdentifier?
    /// The error that caused this one, kept for diagnostics.
    public var underlying: (any Error & Sendable)?

    /// Makes an error of this domain.
    ///
    /// - Parameters:
    ///   - code: What went wrong.
    ///   - message: A sentence a person can act on; `nil` takes the code's ``Code/defaultMessage``.
    ///   - details: Typed extras for the code, empty by default.
    ///   - plugin: The plugin type that raises the error; `nil` takes the code's own
    ///     ``Code/plugin``.
    ///   - underlying: The error that caused this one, kept for diagnostics.
    public init(
        _ code: Code,
        message: String? = nil,
        details: ErrorDetails = ErrorDetails(),
        plugin: PluginTypeIdentifier? = nil,
        underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message ?? code.defaultMessage
        self.details = details
        self.plugin = plugin ?? code.plugin
        self.underlying = underlying
    }

    /// The domain's name, e.g. `"Generic"`.
    public var domainName: String { Domain.name }
    /// The code's stable number.
    public var codeNumber: Int { code.rawValue }
    /// The code's short name, e.g. `"userDeregistered"`.
    public var codeName: String { code.name }
    /// The plugin that defines the code; `nil` for Gatehouse's own codes.
    public var codePlugin: PluginTypeIdentifier? { code.plugin }
    /// The message, so that printing the error shows the sentence a person can act on.
    public var description: String { message }

    /// The code, the message, the raising plugin and the underlying error, for logs and test
    /// failures.
    public var debugDescription: String {
        var text = "\(code): \(message)"
        if let plugin { text += " [plugin \(plugin)]" }
        if let underlying { text += " (caused by: \(String(reflecting: underlying)))" }
        return text
    }
}

/// Typed extras an error may carry, replacing the seeds' `userInfo` keys.
public struct ErrorDetails: Sendable, Hashable {
    /// The most times one digit may occur in a PIN (`PinValidation.similarDigits`).
    public var maxSimilarDigits: Int?
    /// The PIN length the policy requires (`PinValidation.tooShort` / `.tooLong`).
    public var requiredLength: Int?
    /// Failures left before the profile is deregistered (`Authentication.invalidPin`).
    public var remainingFailureCount: Int?
    /// What a custom API or custom authenticator said about the failure.
    public var customInfo: CustomInfo?
    /// The authenticator that was deregistered (`Authentication.authenticatorDeregistered`).
    public var authenticatorID: String?

    /// Makes the extras of an error; every one is `nil` unless its code uses it.
    public init(
        maxSimilarDigits: Int? = nil,
        requiredLength: Int? = nil,
        remainingFailureCount: Int? = nil,
        customInfo: CustomInfo? = nil,
        authenticatorID: String? = nil
    ) {
        self.maxSimilarDigits = maxSimilarDigits
        self.requiredLength = requiredLength
        self.remainingFailureCount = remainingFailureCount
        self.customInfo = customInfo
        self.authenticatorID = authenticatorID
    }
}
