public import Foundation
public import GatehouseKernel

// The token server's JSON messages. Field names are snake_case on the wire, as in OAuth.
// docs/openapi.yaml describes the same messages.

/// An OAuth-style error body: `error` and `error_description`, plus Gatehouse's code and details.
public struct ErrorBody: Codable, Sendable, Equatable {
    public var error: String
    public var errorDescription: String
    /// The `DomainError` code behind the refusal, when there is one (e.g. 9009 invalid PIN).
    public var gatehouseCode: Int?
    /// The code's domain and name (`Authentication`, `invalidPin`), so a client rebuilds the
    /// error it stands for, a plugin's own codes included.
    public var gatehouseDomain: String?
    public var gatehouseCodeName: String?
    /// The plugin type that defines the code; absent for Gatehouse's own codes.
    public var gatehouseCodePlugin: String?
    public var remainingFailureCount: Int?
    public var maxFailureCount: Int?
    public var customInfo: CustomInfo?
    /// For a refused flow message: the stage the flow still waits at (try again, or the PIN it
    /// fell back to). Absent when the refusal ended the flow.
    public var flowStage: FlowStage?

    public init(
        error: String,
        errorDescription: String,
        gatehouseCode: Int? = nil,
        gatehouseDomain: String? = nil,
        gatehouseCodeName: String? = nil,
        gatehouseCodePlugin: String? = nil,
        remainingFailureCount: Int? = nil,
        maxFailureCount: Int? = nil,
        customInfo: CustomInfo? = nil,
        flowStage: FlowStage? = nil
    ) {
        self.error = error
        self.errorDescription = errorDescription
        self.gatehouseCode = gatehouseCode
        self.gatehouseDomain = gatehouseDomain
        self.gatehouseCodeName = gatehouseCodeName
        self.gatehouseCodePlugin = gatehouseCodePlugin
        self.remainingFailureCount = remainingFailureCount
        self.maxFailureCount = maxFailureCount
        self.customInfo = customInfo
        self.flowStage = flowStage
    }

    enum CodingKeys: String, CodingKey {
        case error
        case errorDescription = "error_description"
        case gatehouseCode = "gatehouse_code"
        case gatehouseDomain = "gatehouse_domain"
        case gatehouseCodeName = "gatehouse_code_name"
        case gatehouseCodePlugin = "gatehouse_code_plugin"
        case remainingFailureCount = "remaining_failure_count"
        case maxFailureCount = "max_failure_count"
        case customInfo = "custom_info"
        case flowStage = "flow_stage"
    }
}

/// `POST /v1/clients`: an app installation registers its key.
public struct ClientRegistrationRequest: Codable, Sendable {
    public var appID: String
    public var publicKey: PublicJWK

    public init(appID: String, publicKey: PublicJWK) {
        self.appID = appID
        self.publicKey = publicKey
    }

    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case publicKey = "public_key"
    }
}

public struct ClientRegistrationResponse: Codable, Sendable {
    public var clientID: String
    public init(clientID: String) { self.clientID = clientID }
    enum CodingKeys: String, CodingKey { case clientID = "client_id" }
}

/// `GET /v1/configuration`: what the server offers.
public struct ServerConfigurationResponse: Codable, Sendable {
    public struct Provider: Codable, Sendable, Equatable {
        public var id: String
        public var type: String
        public var name: String
        public var isDefault: Bool
        /// The configuration the plugin publishes for its client half (absent: none).
        public var config: ConfigValue?

        public init(id: String, type: String, name: String, isDefault: Bool, config: ConfigValue? = nil) {
            self.id = id
            self.type = type
            self.name = name
            self.isDefault = isDefault
            self.config = config
        }

        enum CodingKeys: String, CodingKey {
            case id, type, name, config
            case isDefault = "is_default"
        }
    }

    public struct AuthenticatorInfo: Codable, Sendable, Equatable {
        public var id: String
        public var type: String
        public var name: String
        /// `pin`, `biometric` or `custom`.
        public var kind: AuthenticatorKind
        /// The configuration the plugin publishes for its client half (absent: none).
        public var config: ConfigValue?

        public init(id: String, type: String, name: String, kind: AuthenticatorKind, config: ConfigValue? = nil) {
            self.id = id
            self.type = type
            self.name = name
            self.kind = kind
            self.config = config
        }
    }

    public var identityProviders: [Provider]
    public var authenticators: [AuthenticatorInfo]
    public var maxPinFailures: Int

    public init(identityProviders: [Provider], authenticators: [AuthenticatorInfo], maxPinFailures: Int) {
        self.identityProviders = identityProviders
        self.authenticators = authenticators
        self.maxPinFailures = maxPinFailures
    }

    enum CodingKeys: String, CodingKey {
        case identityProviders = "identity_providers"
        case authenticators
        case maxPinFailures = "max_pin_failures"
    }
}

/// `POST /v1/registration` (DPoP with the client key): start registering a user.
public struct RegistrationStartRequest: Codable, Sendable {
    public var clientID: String
    /// `nil` picks the server's default identity provider.
    public var identityProvider: String?
    /// `nil` or empty means the application's default scopes.
    public var scopes: [String]?
    /// The key the new profile's tokens will be bound to.
    public var profileKey: PublicJWK
    /// A stateless registration: no authenticators, one session the app keeps in memory.
    public var stateless: Bool?

    public init(
        clientID: String,
        identityProvider: String?,
        scopes: [String]?,
        profileKey: PublicJWK,
        stateless: Bool? = nil
    ) {
        self.clientID = clientID
        self.identityProvider = identityProvider
        self.scopes = scopes
        self.profileKey = profileKey
        self.stateless = stateless
    }

    enum CodingKeys: String, CodingKey {
        case clientID = "client_id"
        case identityProvider = "identity_provider"
        case scopes
        case profileKey = "profile_key"
        case stateless
    }
}

/// `POST /v1/authentication` (DPoP with the profile key): start authenticating a profile.
public struct AuthenticationStartRequest: Codable, Sendable {
    public var profileID: String
    /// The authenticator's manifest id; `nil` means the PIN.
    public var authenticator: String?

    public init(profileID: String, authenticator: String?) {
        self.profileID = profileID
        self.authenticator = authenticator
    }

    enum CodingKeys: String, CodingKey {
        case profileID = "profile_id"
        case authenticator
    }
}

/// `POST /v1/flows/{id}`: one message for the plugin of the flow's current stage, or a control
/// action. Exactly one of the two.
public struct FlowMessageRequest: Codable, Sendable {
    /// What the client can do to a flow besides sending its plugin a message.
    public enum Action: String, Codable, Sendable {
        /// Give up; a held attempt is given back.
        case cancel
        /// Switch the current `authenticate` stage to the PIN.
        case fallback
    }

    public var message: Base64URLData?
    public var action: Action?

    public init(message: Data) { self.message = Base64URLData(message) }
    public init(action: Action) { self.action = action }
}

/// The server's answer to a flow start or a flow message.
public struct FlowResponse: Codable, Sendable, Equatable {
    public var flowID: String
    /// The stage the next message is for; absent when the flow is done.
    public var stage: FlowStage?
    /// The plugin's server half wants another message.
    public var challenge: Base64URLData?
    /// The stage just completed, if the last message completed one.
    public var completedStage: FlowStage?
    /// What the completed stage reported (a custom API's or custom authenticator's status and data).
    public var info: CustomInfo?
    /// For an `authenticate` stage: failure counts before its first attempt.
    public var failureCounts: FailureCounts?
    /// The profile, once known.
    public var profileID: String?
    /// Tokens, when the flow ends in a session.
    public var tokens: TokenResponse?
    /// A finished registration: the user's identifier at the identity provider, for the device
    /// to show beside the profile.
    public var subject: String?

    public init(flowID: String, stage: FlowStage?) {
        self.flowID = flowID
        self.stage = stage
    }

    enum CodingKeys: String, CodingKey {
        case flowID = "flow_id"
        case stage, challenge
        case completedStage = "completed_stage"
        case info
        case failureCounts = "failure_counts"
        case profileID = "profile_id"
        case tokens, subject
    }
}

/// `POST /v1/authenticators/register` and `/deregister` (access token): the authenticator's
/// manifest id.
public struct AuthenticatorRequest: Codable, Sendable {
    public var authenticator: String
    public init(authenticator: String) { self.authenticator = authenticator }
}

/// `GET /v1/authenticators` (access token): what the server offers, and which the profile has.
public struct AuthenticatorListResponse: Codable, Sendable, Equatable {
    public struct Entry: Codable, Sendable, Equatable {
        public var id: String
        public var type: String
        public var name: String
        public var kind: AuthenticatorKind
        public var registered: Bool

        public init(id: String, type: String, name: String, kind: AuthenticatorKind, registered: Bool) {
            self.id = id
            self.type = type
            self.name = name
            self.kind = kind
            self.registered = registered
        }
    }

    public var authenticators: [Entry]
    public init(authenticators: [Entry]) { self.authenticators = authenticators }
}

extension AuthenticatorListResponse.Entry {
    /// The entry for an authenticator the server's configuration offers.
    public init(_ offered: ServerConfigurationResponse.AuthenticatorInfo, registered: Bool) {
        self.init(id: offered.id, type: offered.type, name: offered.name, kind: offered.kind, registered: registered)
    }
}

/// `POST /v1/deregister` (DPoP with the profile key).
public struct DeregistrationRequest: Codable, Sendable {
    public var profileID: String
    public init(profileID: String) { self.profileID = profileID }
    enum CodingKeys: String, CodingKey { case profileID = "profile_id" }
}

/// `GET /v1/resource/profile`: the example protected resource.
public struct ProfileResource: Codable, Sendable, Equatable {
    public var profileID: String
    public var subject: String
    public var identityProvider: String
    public var scope: String

    public init(profileID: String, subject: String, identityProvider: String, scope: String) {
        self.profileID = profileID
        self.subject = subject
        self.identityProvider = identityProvider
        self.scope = scope
    }

    enum CodingKeys: String, CodingKey {
        case profileID = "profile_id"
        case subject
        case identityProvider = "identity_provider"
        case scope
    }
}
