public import Foundation
public import GatehouseKernel

// The token server's JSON messages. Field names are snake_case on the wire, as in OAuth.
// docs/openapi.yaml describes the same messages.

/// An OAuth-style error body: `error` and `error_description`, plus Gatehouse's code and details.
public struct ErrorBody: Codable, Sendable, Equatable {
    /// The OAuth error name (`error`), such as `invalid_grant` or `invalid_token`.
    public var error: String
    /// A human-readable explanation (`error_description`), for logs rather than for users.
    public var errorDescription: String
    /// The `DomainError` code behind the refusal, when there is one (e.g. 9009 invalid PIN).
    public var gatehouseCode: Int?
    /// The code's domain and name (`Authentication`, `invalidPin`), so a client rebuilds the
    /// error it stands for, a plugin's own codes included.
    public var gatehouseDomain: String?
    /// The code's name (`gatehouse_code_name`), such as `invalidPin`.
    public var gatehouseCodeName: String?
    /// The plugin type that defines the code; absent for Gatehouse's own codes.
    public var gatehouseCodePlugin: String?
    /// After a counted failure (a wrong PIN): attempts left before the profile is deregistered
    /// (`remaining_failure_count`).
    public var remainingFailureCount: Int?
    /// After a counted failure: attempts allowed in all, 0 for unlimited (`max_failure_count`).
    public var maxFailureCount: Int?
    /// What a custom authenticator or custom API reported with the refusal (`custom_info`).
    public var customInfo: CustomInfo?
    /// For a refused flow message: the stage the flow still waits at (try again, or the PIN it
    /// fell back to). Absent when the refusal ended the flow.
    public var flowStage: FlowStage?

    /// Creates an error body; every Gatehouse field is optional and left out of the JSON when `nil`.
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
    /// The application's id from the manifest's `server.clients[].id` (`app_id`).
    public var appID: String
    /// The installation's public key (`public_key`): P-256, P-384 or Ed25519; its DPoP proofs sign with it.
    public var publicKey: PublicJWK

    /// Creates a registration request for an application and the installation's key.
    public init(appID: String, publicKey: PublicJWK) {
        self.appID = appID
        self.publicKey = publicKey
    }

    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case publicKey = "public_key"
    }
}

/// The answer to `POST /v1/clients` (201): the id the installation uses from then on.
public struct ClientRegistrationResponse: Codable, Sendable {
    /// The installation's client id (`client_id`), sent with each registration it starts.
    public var clientID: String
    /// Creates the answer for a registered installation.
    public init(clientID: String) { self.clientID = clientID }
    enum CodingKeys: String, CodingKey { case clientID = "client_id" }
}

/// `GET /v1/configuration`: what the server offers.
public struct ServerConfigurationResponse: Codable, Sendable {
    /// An identity provider the server offers for registration.
    public struct Provider: Codable, Sendable, Equatable {
        /// The provider's manifest id, the value a registration sends as `identity_provider`.
        public var id: String
        /// The plugin type that implements the provider, such as `idp.browser`.
        public var type: String
        /// The provider's display name from the manifest, for a picker.
        public var name: String
        /// Whether a registration without `identity_provider` uses this provider (`is_default`).
        public var isDefault: Bool
        /// The configuration the plugin publishes for its client half (absent: none).
        public var config: ConfigValue?

        /// Creates a provider entry.
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

    /// An authenticator the server offers, the PIN among them.
    public struct AuthenticatorInfo: Codable, Sendable, Equatable {
        /// The authenticator's manifest id, the value sent as `authenticator` to start or register it.
        public var id: String
        /// The plugin type that implements the authenticator, such as `pin` or `biometric.simulated`.
        public var type: String
        /// The authenticator's display name from the manifest.
        public var name: String
        /// `pin`, `biometric` or `custom`.
        public var kind: AuthenticatorKind
        /// The configuration the plugin publishes for its client half (absent: none).
        public var config: ConfigValue?

        /// Creates an authenticator entry.
        public init(id: String, type: String, name: String, kind: AuthenticatorKind, config: ConfigValue? = nil) {
            self.id = id
            self.type = type
            self.name = name
            self.kind = kind
            self.config = config
        }
    }

    /// The identity providers a registration may use (`identity_providers`).
    public var identityProviders: [Provider]
    /// The authenticators a profile may register or authenticate with.
    public var authenticators: [AuthenticatorInfo]
    /// Wrong PINs in a row before the profile is deregistered, 0 for unlimited (`max_pin_failures`).
    public var maxPinFailures: Int

    /// Creates the configuration answer.
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
    /// The id `POST /v1/clients` gave the installation (`client_id`).
    public var clientID: String
    /// `nil` picks the server's default identity provider.
    public var identityProvider: String?
    /// `nil` or empty means the application's default scopes.
    public var scopes: [String]?
    /// The key the new profile's tokens will be bound to.
    public var profileKey: PublicJWK
    /// A stateless registration: no authenticators, one session the app keeps in memory.
    public var stateless: Bool?

    /// Creates a registration start; `stateless` is left out of the JSON when `nil`.
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
    /// The profile to authenticate, as the server named it at registration (`profile_id`).
    public var profileID: String
    /// The authenticator's manifest id; `nil` means the PIN.
    public var authenticator: String?

    /// Creates an authentication start for a profile; a `nil` authenticator means the PIN.
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

    /// The message for the current stage's plugin, base64url on the wire; `nil` when `action` is set.
    public var message: Base64URLData?
    /// A control action instead of a message; `nil` when `message` is set.
    public var action: Action?

    /// Creates a request that carries a message for the current stage's plugin.
    public init(message: Data) { self.message = Base64URLData(message) }
    /// Creates a request that carries a control action.
    public init(action: Action) { self.action = action }
}

/// The server's answer to a flow start or a flow message.
public struct FlowResponse: Codable, Sendable, Equatable {
    /// The flow's id (`flow_id`), the `{id}` of every later `POST /v1/flows/{id}`.
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

    /// Creates an answer for a flow at a stage; the other fields start out `nil`.
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
    /// The authenticator's manifest id.
    public var authenticator: String
    /// Creates a request for the authenticator with this manifest id.
    public init(authenticator: String) { self.authenticator = authenticator }
}

/// `GET /v1/authenticators` (access token): what the server offers, and which the profile has.
public struct AuthenticatorListResponse: Codable, Sendable, Equatable {
    /// One authenticator the server offers, and whether this profile has registered it.
    public struct Entry: Codable, Sendable, Equatable {
        /// The authenticator's manifest id.
        public var id: String
        /// The plugin type that implements the authenticator.
        public var type: String
        /// The authenticator's display name from the manifest.
        public var name: String
        /// Whether the authenticator is the PIN, a biometric or a custom one.
        public var kind: AuthenticatorKind
        /// Whether the profile behind the access token has registered this authenticator.
        public var registered: Bool

        /// Creates an entry.
        public init(id: String, type: String, name: String, kind: AuthenticatorKind, registered: Bool) {
            self.id = id
            self.type = type
            self.name = name
            self.kind = kind
            self.registered = registered
        }
    }

    /// Every authenticator the server offers, the PIN included.
    public var authenticators: [Entry]
    /// Creates the list.
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
    /// The profile to deregister (`profile_id`); the DPoP proof must be signed with its key.
    public var profileID: String
    /// Creates a deregistration request for a profile.
    public init(profileID: String) { self.profileID = profileID }
    enum CodingKeys: String, CodingKey { case profileID = "profile_id" }
}

/// `GET /v1/resource/profile`: the example protected resource.
public struct ProfileResource: Codable, Sendable, Equatable {
    /// The profile the access token was issued to (`profile_id`).
    public var profileID: String
    /// The user's identifier at the identity provider that registered the profile.
    public var subject: String
    /// The manifest id of the identity provider that registered the profile (`identity_provider`).
    public var identityProvider: String
    /// The access token's scopes, space-separated.
    public var scope: String

    /// Creates the resource for a profile.
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
