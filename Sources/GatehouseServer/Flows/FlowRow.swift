import Foundation
import GatehouseKernel
import GatehouseProtocol

/// A flow as stored: who may continue it, what it is about, and the kernel machine's state.
struct FlowRow: Sendable {
    var id: String
    var clientID: String
    var profileID: String?
    /// Registration: the identity provider, and the key the new profile's tokens will be bound to.
    var identityProvider: String?
    var profileKey: String?
    var scope: String
    /// The key whose DPoP proofs may continue the flow.
    var keyThumbprint: String
    var version: Int64
    var expiresAt: Double
    /// When the attempt the flow holds lapses, if it holds one.
    var heldUntil: Double?
    /// The mobile authentication transaction the flow approves, if it is one.
    var transactionID: String?
    /// A stateless registration: its profile lives as long as its session, beside any stored one.
    var stateless: Bool
    var state: FlowState

    init(
        id: String,
        clientID: String,
        profileID: String?,
        identityProvider: String? = nil,
        profileKey: String? = nil,
        scope: String,
        keyThumbprint: String,
        expiresAt: Double,
        plan: FlowPlan,
        transactionID: String? = nil,
        stateless: Bool = false
    ) {
        self.id = id
        self.clientID = clientID
        self.profileID = profileID
        self.identityProvider = identityProvider
        self.profileKey = profileKey
        self.scope = scope
        self.keyThumbprint = keyThumbprint
        self.version = 0
        self.expiresAt = expiresAt
        self.heldUntil = nil
        self.transactionID = transactionID
        self.stateless = stateless
        self.state = FlowState(plan: plan)
    }

    init(_ row: SQLRow) throws {
        id = row["id"]
        clientID = row["client_id"]
        profileID = row["profile_id"]
        identityProvider = row["identity_provider"]
        profileKey = row["profile_key"]
        scope = row["scope"]
        keyThumbprint = row["key_thumbprint"]
        version = row["version"]
        expiresAt = row["expires_at"]
        heldUntil = row["held_until"]
        transactionID = row["transaction_id"]
        stateless = row["stateless"]
        state = try WireCoding.decode(FlowState.self, from: row["state"] as Data)
    }
}

/// What applying a flow's actions produced.
struct FlowApplied: Sendable {
    enum Outcome: Sendable {
        case reply(FlowReply)
        case refusal(FlowRefusal)
    }

    var flowID: String
    var profileID: String?
    var outcome: Outcome
    var tokens: TokenResponse?
    /// The flow's mobile authentication transaction, when applying ended it.
    var endedTransaction: String?
    /// The flow's kind, for metrics and the audit log.
    var kind: FlowKind?
    /// A registration that created its profile: the user's subject, for the device.
    var subject: String?
    /// What changed, in order: counted by the metrics and written to the audit log once the
    /// transaction that made the changes has committed.
    var events: [FlowEvent] = []
}

/// A change a flow made that operators watch.
enum FlowEvent: Sendable, Equatable {
    case profileCreated
    /// An attempt failed (the machine's `attemptFailed`).
    case attemptFailed(authenticator: String)
    case registrationStored(authenticator: String)
    /// An authenticator's registration removed after its own failures (a sensor lockout).
    case registrationRemoved(authenticator: String)
    /// The profile deregistered at the maximum of failures, by this change; the authenticator
    /// of the stage the flow was at, when it was at one.
    case lockedOut(authenticator: String?)
    case userSessionsRevoked
    case ended
}

/// What the profile must (not) have for a flow to start.
enum RegistrationRequirement: Sendable {
    /// The authenticator must be registered (authentication, change PIN).
    case registered(String)
    /// The authenticator must not be registered yet (registering another authenticator).
    case notRegistered(String)
}
