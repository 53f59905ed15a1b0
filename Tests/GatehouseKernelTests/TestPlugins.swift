import Foundation
import GatehouseKernel
import Synchronization

/// A validator plugin for registry tests: refuses inputs longer than `maxLength`.
enum LengthValidatorPlugin: ValidatorPlugin {
    struct Configuration: Decodable, Sendable {
        var maxLength: Int
        private enum CodingKeys: String, CodingKey { case maxLength }
        init(from decoder: any Decoder) throws {
            maxLength = try decoder.container(keyedBy: CodingKeys.self).decode(
                Int.self,
                forKey: .maxLength,
                default: 3,
                in: 1...100
            )
        }
    }

    static let typeIdentifier: PluginTypeIdentifier = "test.length"
    static let summary = "Refuses long input"
    static let built = Mutex(0)

    struct LengthValidator: Validator {
        let maxLength: Int
        func validate(_ input: String) -> ValidationReport {
            input.count <= maxLength ? .valid : .invalid("tooLong", "At most \(maxLength) characters.")
        }
    }

    static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        built.withLock { $0 += 1 }
        return LengthValidator(maxLength: configuration.maxLength)
    }
}

/// Another validator plugin that claims the same type identifier.
enum ImpostorValidatorPlugin: ValidatorPlugin {
    struct Configuration: Decodable, Sendable {}
    static let typeIdentifier: PluginTypeIdentifier = "test.length"
    static let summary = "Claims a taken name"
    static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        LengthValidatorPlugin.LengthValidator(maxLength: 1)
    }
}

/// A server half whose outcome is fixed, for chain tests.
struct FixedVerifier: AuthenticatorVerifier {
    enum Behaviour: Sendable {
        case outcome(AuthenticationOutcome)
        case throwing
    }

    let descriptor: AuthenticatorDescriptor
    let behaviour: Behaviour
    let calls = CallCounter()

    init(_ id: String, _ behaviour: Behaviour) {
        descriptor = AuthenticatorDescriptor(id: id, type: "test.fixed", name: id)
        self.behaviour = behaviour
    }

    var callCount: Int { calls.count.withLock { $0 } }

    struct Broken: Error {}

    func enroll(_ request: VerificationRequest) async throws -> AuthenticationOutcome { try await verify(request) }

    func verify(_ request: VerificationRequest) async throws -> AuthenticationOutcome {
        calls.count.withLock { $0 += 1 }
        switch behaviour {
        case .outcome(let outcome): return outcome
        case .throwing: throw Broken()
        }
    }
}

/// An authenticator plugin whose halves are fixed verifiers, for registry tests.
enum FixedAuthenticatorPlugin: AuthenticatorPlugin {
    struct Configuration: Decodable, Sendable {}
    static let typeIdentifier: PluginTypeIdentifier = "test.fixed"
    static let summary = "Always succeeds"

    struct Client: Authenticator {
        let descriptor: AuthenticatorDescriptor
        func enroll(_ context: AuthenticatorContext) async throws -> AuthenticatorResult { .completed(info: nil) }
        func authenticate(_ context: AuthenticatorContext) async throws -> AuthenticatorResult { .completed(info: nil) }
    }

    static func makeAuthenticator(configuration: Configuration, context: PluginContext) -> any Authenticator {
        Client(descriptor: context.descriptor)
    }

    static func makeVerifier(configuration: Configuration, context: PluginContext) -> any AuthenticatorVerifier {
        FixedVerifier(context.id, .outcome(.success(AuthenticationSuccess())))
    }
}

final class CallCounter: Sendable {
    let count = Mutex(0)
}

/// A validator plugin that publishes a key its configuration never reads (`maxLenght`).
enum MisspeltPublishingPlugin: ValidatorPlugin {
    typealias Configuration = LengthValidatorPlugin.Configuration
    static let typeIdentifier: PluginTypeIdentifier = "test.misspelt"
    static let summary = "Publishes a misspelt key"
    static let publishedConfigurationKeys: Set<String> = ["maxLenght"]
    static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        LengthValidatorPlugin.LengthValidator(maxLength: configuration.maxLength)
    }
}

/// The same plugin spelling its published key right.
enum PublishingPlugin: ValidatorPlugin {
    typealias Configuration = LengthValidatorPlugin.Configuration
    static let typeIdentifier: PluginTypeIdentifier = "test.publishing"
    static let summary = "Publishes its maximum length"
    static let publishedConfigurationKeys: Set<String> = ["maxLength"]
    static func makeValidator(configuration: Configuration, context: PluginContext) -> any Validator<String> {
        LengthValidatorPlugin.LengthValidator(maxLength: configuration.maxLength)
    }
}
