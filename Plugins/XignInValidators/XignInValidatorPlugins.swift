public import GatehouseKernel

/// `xignin.pin`: the activation PIN of a XignIn registration.
///
/// Configuration: `minLength` (default 5) and `maxLength` (default 32), from 1 to 64 digits.
public enum XignInPinValidatorPlugin: ValidatorPlugin {
    /// The `xignin.pin` entry's settings in the manifest.
    public struct Configuration: Decodable, Sendable, Hashable {
        /// The fewest digits a PIN may have (1–64, default 5).
        public var minLength: Int
        /// The most digits a PIN may have (1–64, default 32; not below `minLength`).
        public var maxLength: Int

        /// Creates a configuration in code; the values are not range-checked here.
        public init(minLength: Int = 5, maxLength: Int = 32) {
            self.minLength = minLength
            self.maxLength = maxLength
        }

        private enum CodingKeys: String, CodingKey { case minLength, maxLength }

        /// Decodes the manifest entry; throws when a length is outside 1–64 or `maxLength` is below `minLength`.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            minLength = try container.decode(Int.self, forKey: .minLength, default: 5, in: 1...64)
            maxLength = try container.decode(Int.self, forKey: .maxLength, default: 32, in: 1...64)
            guard minLength <= maxLength else {
                throw container.invalid(
                    .maxLength,
                    "must not be less than minLength (\(minLength)), found \(maxLength)"
                )
            }
        }
    }

    /// The plugin's type in the manifest.
    public static let typeIdentifier: PluginTypeIdentifier = "xignin.pin"
    /// One line describing the plugin, for plugin listings.
    public static let summary = "XignIn activation PIN: digits only, between a minimum and a maximum length"

    /// A ``PinValidator`` with the configured lengths.
    public static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        PinValidator(minLength: configuration.minLength, maxLength: configuration.maxLength)
    }
}

/// `xignin.email`: an e-mail address.
///
/// Configuration: `maxLength` (default 254 bytes, from 6 to 254).
public enum XignInEmailValidatorPlugin: ValidatorPlugin {
    /// The `xignin.email` entry's settings in the manifest.
    public struct Configuration: Decodable, Sendable, Hashable {
        /// The longest address accepted, in UTF-8 bytes (6–254, default 254).
        public var maxLength: Int

        /// Creates a configuration in code; the value is not range-checked here.
        public init(maxLength: Int = 254) { self.maxLength = maxLength }

        private enum CodingKeys: String, CodingKey { case maxLength }

        /// Decodes the manifest entry; throws when `maxLength` is outside 6–254.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            maxLength = try container.decode(Int.self, forKey: .maxLength, default: 254, in: 6...254)
        }
    }

    /// The plugin's type in the manifest.
    public static let typeIdentifier: PluginTypeIdentifier = "xignin.email"
    /// One line describing the plugin, for plugin listings.
    public static let summary = "E-mail address as a mail server accepts it (RFC 5321/5322/6531)"

    /// An ``EmailValidator`` with the configured maximum length.
    public static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        EmailValidator(maxLength: configuration.maxLength)
    }
}

/// `xignin.alias`: the display name of an activation.
///
/// Configuration: `minLength` (default 2) and `maxLength` (default 50), from 1 to 256 characters.
public enum XignInAliasValidatorPlugin: ValidatorPlugin {
    /// The `xignin.alias` entry's settings in the manifest.
    public struct Configuration: Decodable, Sendable, Hashable {
        /// The fewest characters an alias may have (1–256, default 2).
        public var minLength: Int
        /// The most characters an alias may have (1–256, default 50; not below `minLength`).
        public var maxLength: Int

        /// Creates a configuration in code; the values are not range-checked here.
        public init(minLength: Int = 2, maxLength: Int = 50) {
            self.minLength = minLength
            self.maxLength = maxLength
        }

        private enum CodingKeys: String, CodingKey { case minLength, maxLength }

        /// Decodes the manifest entry; throws when a length is outside 1–256 or `maxLength` is below `minLength`.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            minLength = try container.decode(Int.self, forKey: .minLength, default: 2, in: 1...256)
            maxLength = try container.decode(Int.self, forKey: .maxLength, default: 50, in: 1...256)
            guard minLength <= maxLength else {
                throw container.invalid(
                    .maxLength,
                    "must not be less than minLength (\(minLength)), found \(maxLength)"
                )
            }
        }
    }

    /// The plugin's type in the manifest.
    public static let typeIdentifier: PluginTypeIdentifier = "xignin.alias"
    /// One line describing the plugin, for plugin listings.
    public static let summary = "Activation alias: a free name between a minimum and a maximum number of characters"

    /// An ``AliasValidator`` with the configured lengths.
    public static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        AliasValidator(minLength: configuration.minLength, maxLength: configuration.maxLength)
    }
}

/// All XignIn validator plugins.
public enum XignInValidators {
    /// The three plugin types, to pass to a `PluginRegistry` in this order: PIN, e-mail, alias.
    public static let plugins: [any ValidatorPlugin.Type] = [
        XignInPinValidatorPlugin.self, XignInEmailValidatorPlugin.self, XignInAliasValidatorPlugin.self,
    ]
}
