import Crypto
import Foundation
public import GatehouseKernel

/// `example.invitation`: registration with an invitation code from the manifest; each code names its user and works once.
public enum InvitationIdentityProviderPlugin: IdentityProviderPlugin {
    /// `invitations`: each code (at least 8 characters) and the user it invites. The server's alone: never published.
    public struct Configuration: Decodable, Sendable {
        /// Each invitation code and the user id it registers.
        public var invitations: [String: String]
        /// Reads `config`; throws when a code is shorter than 8 characters.
        public init(from decoder: any Decoder) throws {
            let config = try decoder.container(keyedBy: Keys.self)
            invitations = try config.decode([String: String].self, forKey: .invitations, default: [:])
            if let short = invitations.keys.sorted().first(where: { $0.count < 8 }) {
                throw config.invalid(.invitations, "the code \"\(short)\" is shorter than 8 characters")
            }
        }
        private enum Keys: String, CodingKey { case invitations }
    }
    /// `"example.invitation"`.
    public static let typeIdentifier: PluginTypeIdentifier = "example.invitation"
    /// One line for listings.
    public static let summary = "Registration with a single-use invitation code from the manifest"
    /// Makes the app's half, ``InvitationClient``.
    public static func makeIdentityProvider(
        configuration: Configuration,
        context: PluginContext
    ) -> any IdentityProvider {
        InvitationClient(descriptor: context.descriptor)
    }
    /// Makes the server's half from the codes; throws a `ConfigurationError` when the manifest gives no code.
    public static func makeHost(configuration: Configuration, context: PluginContext) throws -> any IdentityProviderHost
    {
        // Checked here, not when decoding: the app builds its half without the codes.
        guard !configuration.invitations.isEmpty else {
            throw ConfigurationError(path: [.key("invitations")], problem: "give at least one invitation code")
        }
        var users: [String: String] = [:]
        for (code, user) in configuration.invitations { users[InvitationHost.grant(Data(code.utf8))] = user }
        return InvitationHost(descriptor: context.descriptor, users: users)
    }
}

extension RegistrationError.Code {
    /// The code is not one of the manifest's, or it was used before.
    public static var invitationNotValid: Self {
        Self(
            19001,
            name: "invitationNotValid",
            defaultMessage: "That invitation code is not valid.",
            plugin: "example.invitation"
        )
    }
}

/// The app's half: asks for the code and sends it. A refusal is the server half's error, thrown by `send`.
public struct InvitationClient: IdentityProvider {
    /// This identity provider as the manifest configures it: its id, name and plugin type.
    public let descriptor: IdentityProviderDescriptor
    /// Asks the app for the code and sends it; throws `GenericError` `actionCancelled` when the app cancels.
    public func register(_ context: RegistrationContext) async throws -> RegistrationResult {
        let ask = CustomRegistrationChallenge(identityProvider: descriptor, step: .finish)
        guard case .data(let code) = await context.responder.customRegistration(ask) else {
            throw GenericError(.actionCancelled)
        }
        let message = Data((code ?? "").trimmingCharacters(in: .whitespaces).utf8)
        guard case .completed(_, let info) = try await context.server.send(message) else {
            throw GenericError(
                .requestInvalid,
                message: "The server asked for more than the code.",
                plugin: descriptor.type
            )
        }
        return RegistrationResult(info: info)
    }
}

/// The server's half: a known code names its user once; its second use is a replay, which revokes what the first opened.
public struct InvitationHost: IdentityProviderHost {
    /// This identity provider as the manifest configures it: its id, name and plugin type.
    public let descriptor: IdentityProviderDescriptor
    let users: [String: String]  // by the code's digest: looked up without comparing codes byte by byte
    let used = UsedInvitations()  // this process's memory: a cluster or a restart needs a shared store instead

    /// Names the code's user the first time; refuses an unknown code, and a used one as a replay.
    public func handle(_ request: RegistrationStepRequest) async throws -> RegistrationOutcome {
        let grant = Self.grant(request.message)
        let refusal = RegistrationError(.invitationNotValid)
        guard let subject = users[grant] else { return .failure(refusal) }
        guard await used.take(grant) else { return .replayed(refusal, subject: subject, grant: grant) }
        return .registered(RegisteredIdentity(subject: subject, grant: grant))
    }

    /// What names a code's sessions: its SHA-256, so no store keeps the code itself.
    static func grant(_ code: Data) -> String { "invitation:" + Data(SHA256.hash(data: code)).base64EncodedString() }
}

actor UsedInvitations {
    private var grants: Set<String> = []
    func take(_ grant: String) -> Bool { grants.insert(grant).inserted }
}
