public import GatehouseKernel

/// `xignin.pin`: the activation PIN of a XignIn registration.
///
/// Configuration: `minLength` (default 5) and `maxLength` (default 32), from 1 to 64 digits.
public enum XignInPinValidatorPlugin: ValidatorPlugin {
    public struct Configuration: Decodable, Sendable, Hashable {
        public var minLength: Int
        public var maxLength: Int

        public init(minLength: Int = 5, maxLength: Int = 32) {
            self.minLength = minLength
            self.maxLength = maxLength
        }

        private enum CodingKeys: String, CodingKey { case minLength, maxLength }

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

    public static let typeIdentifier: PluginTypeIdentifier = "xignin.pin"
    public static let summary = "XignIn activation PIN: digits only, between a minimum and a maximum length"

    public static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        PinValidator(minLength: configuration.minLength, maxLength: configuration.maxLength)
    }
}

/// `xignin.email`: an e-mail address.
///
/// Configuration: `maxLength` (default 254 bytes, from 6 to 254).
public enum XignInEmailValidatorPlugin: ValidatorPlugin {
    public struct Configuration: Decodable, Sendable, Hashable {
        public var maxLength: Int

        public init(maxLength: Int = 254) { self.maxLength = maxLength }

        private enum CodingKeys: String, CodingKey { case maxLength }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            maxLength = try container.decode(Int.self, forKey: .maxLength, default: 254, in: 6...254)
        }
    }

    public static let typeIdentifier: PluginTypeIdentifier = "xignin.email"
    public static let summary = "E-mail address as a mail server accepts it (RFC 5321/5322/6531)"

    public static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        EmailValidator(maxLength: configuration.maxLength)
    }
}

/// `xignin.alias`: the display name of an activation.
///
/// Configuration: `minLength` (default 2) and `maxLength` (default 50), from 1 to 256 characters.
public enum XignInAliasValidatorPlugin: ValidatorPlugin {
    public struct Configuration: Decodable, Sendable, Hashable {
        public var minLength: Int
        public var maxLength: Int

        public init(minLength: Int = 2, maxLength: Int = 50) {
            self.minLength = minLength
            self.maxLength = maxLength
        }

        private enum CodingKeys: String, CodingKey { case minLength, maxLength }

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

    public static let typeIdentifier: PluginTypeIdentifier = "xignin.alias"
    public static let summary = "Activation alias: a free name between a minimum and a maximum number of characters"

    public static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        AliasValidator(minLength: configuration.minLength, maxLength: configuration.maxLength)
    }
}

/// All XignIn validator plugins.
public enum XignInValidators {
    public static let plugins: [any ValidatorPlugin.Type] = [
        XignInPinValidatorPlugin.self, XignInEmailValidatorPlugin.self, XignInAliasValidatorPlugin.self,
    ]
}
