import Foundation
import GatehouseKernel
public import GatehouseOutbound
public import XignInValidators

/// The XignIn manager's settings: the manifest's `xignin` section. Every key has a default.
public struct XignInManagerConfiguration: Decodable, Sendable {
    /// Whether this manager takes registrations, or a third party does (then clients get a clear error).
    public enum RegistrationMode: String, Decodable, Sendable {
        case open
        case thirdParty
    }

    /// A length range: the one the manager's configuration endpoint sends.
    public typealias Length = ManagerConfigurationMessage.Length
    /// A way to identify, with the attributes it collects and requires: the one the manager's
    /// configuration endpoint sends.
    public typealias Category = ManagerConfigurationMessage.Category

    /// A ``Length`` as the manifest spells it (camelCase, `maxLength` defaulting to `minLength`),
    /// checked.
    private struct ManifestLength: Decodable {
        var value: Length

        init(_ value: Length) { self.value = value }

        private enum CodingKeys: String, CodingKey { case minLength, maxLength }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let minLength = try container.decode(Int.self, forKey: .minLength)
            let maxLength = try container.decode(Int.self, forKey: .maxLength, default: minLength, in: 1...256)
            guard (1...maxLength).contains(minLength) else {
                throw container.invalid(
                    .minLength,
                    "expected a value from 1 to maxLength (\(maxLength)), found \(minLength)"
                )
            }
            value = Length(minLength: minLength, maxLength: maxLength)
        }
    }

    /// A ``Category`` as the manifest spells it (camelCase; `identificationAttributes` defaulting
    /// to `required`), checked.
    private struct ManifestCategory: Decodable {
        var value: Category

        init(_ value: Category) { self.value = value }

        private enum CodingKeys: String, CodingKey { case id, types, required, identificationAttributes }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let id = try container.decode(String.self, forKey: .id)
            let types = try container.decode([IdentificationType].self, forKey: .types)
            guard !types.isEmpty else { throw container.invalid(.types, "list at least one identification type") }
            let required = try container.decode([PersonalAttribute].self, forKey: .required, default: [])
            value = Category(
                id: id,
                types: types,
                required: required,
                identificationAttributes: try container.decode(
                    [PersonalAttribute].self,
                    forKey: .identificationAttributes,
                    default: required
                )
            )
        }
    }

    /// A linked service that gets an account after the first activation.
    public struct ServiceMapping: Decodable, Sendable, Equatable {
        /// The mapping's name (`id`): sent as `service_mapping_id` with each delivery.
        public var id: String
        /// The `webhook` URL each delivery is posted to. Checked whole at start-up (`OutboundURL`): a port out of range, a user, a dot segment or
        /// a non-canonical spelling is a manifest error, not a failure at the first delivery.
        public var webhook: OutboundURL

        private enum CodingKeys: String, CodingKey { case id, webhook }

        /// A mapping named `id` that delivers to `webhook`.
        public init(id: String, webhook: OutboundURL) {
            self.id = id
            self.webhook = webhook
        }

        /// Reads `id` and `webhook` (both required). Throws when either is missing or the URL is
        /// not one the server may call.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            let text = try container.decode(String.self, forKey: .webhook)
            do {
                webhook = try OutboundURL(text)
            } catch {
                throw container.invalid(.webhook, "\"\(text)\": \(error.reason)")
            }
        }
    }

    /// The URL clients are told to use for this manager. Default: `/xignin` under the URL the
    /// token server is reached at (``XignInManager/served(at:)``).
    public var managerURL: String?
    /// `open` (default) or `thirdParty`.
    public var registration: RegistrationMode
    /// Who handles registration when `registration` is `thirdParty`, for the error message.
    public var thirdPartyName: String
    /// The activation PIN's length (default 5–32 digits).
    public var pin: Length
    /// The alias's length (default 2–50 characters).
    public var alias: Length
    /// The longest e-mail address accepted (default 254).
    public var emailMaxLength: Int
    /// E-mail domains refused as not available.
    public var blockedEmailDomains: [String]
    /// Default: one category, `email`, that requires an e-mail address.
    public var categories: [Category]
    /// The linked services that get each account after its first activation (default: none).
    public var serviceMappings: [ServiceMapping]
    /// Seconds an activation code stays valid (60–2592000, default 604800).
    public var activationCodeLifetime: Int
    /// Wrong activation PINs before a code is locked (1–20, default 5).
    public var maxActivationAttempts: Int
    /// Anonymous PIN evaluations (each stores a key for ten minutes) one client address may ask
    /// for a minute (0–10000, default 30; 0: no limit).
    public var evaluationsPerMinute: Int

    private enum CodingKeys: String, CodingKey {
        case managerURL, registration, thirdPartyName, pin, alias, emailMaxLength, blockedEmailDomains, categories,
            serviceMappings, activationCodeLifetime, maxActivationAttempts, evaluationsPerMinute
    }

    /// Reads the section; every key may be left out. Throws on a value out of its range, an empty
    /// or duplicated category list, a category with no type, or a bad service mapping.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        managerURL = try container.decodeIfPresent(String.self, forKey: .managerURL)
        registration = try container.decode(RegistrationMode.self, forKey: .registration, default: .open)
        thirdPartyName = try container.decode(String.self, forKey: .thirdPartyName, default: "a third party")
        pin = try container.decode(
            ManifestLength.self,
            forKey: .pin,
            default: ManifestLength(Length(minLength: 5, maxLength: 32))
        ).value
        alias = try container.decode(
            ManifestLength.self,
            forKey: .alias,
            default: ManifestLength(Length(minLength: 2, maxLength: 50))
        ).value
        emailMaxLength = try container.decode(Int.self, forKey: .emailMaxLength, default: 254, in: 6...254)
        blockedEmailDomains = try container.decode([String].self, forKey: .blockedEmailDomains, default: []).map {
            $0.lowercased()
        }
        categories = try container.decode(
            [ManifestCategory].self,
            forKey: .categories,
            default: [
                ManifestCategory(
                    Category(id: "email", types: [.email], required: [.email], identificationAttributes: [.email])
                )
            ]
        ).map(\.value)
        guard !categories.isEmpty else { throw container.invalid(.categories, "list at least one category") }
        guard Set(categories.map(\.id)).count == categories.count else {
            throw container.invalid(.categories, "category ids must be unique")
        }
        serviceMappings = try container.decode([ServiceMapping].self, forKey: .serviceMappings, default: [])
        activationCodeLifetime = try container.decode(
            Int.self,
            forKey: .activationCodeLifetime,
            default: 604_800,
            in: 60...2_592_000
        )
        maxActivationAttempts = try container.decode(Int.self, forKey: .maxActivationAttempts, default: 5, in: 1...20)
        evaluationsPerMinute = try container.decode(Int.self, forKey: .evaluationsPerMinute, default: 30, in: 0...10000)
    }

    /// The personal information a category collects, with the manager's validators.
    func information(for category: Category) -> RegistrationPersonalInformation {
        RegistrationPersonalInformation(
            required: Set(category.required),
            emailValidator: EmailValidator(maxLength: emailMaxLength)
        )
    }
}
