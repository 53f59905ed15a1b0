public import Foundation

/// Where a flow stands between two requests. The host stores it as it is and hands it back.
public struct FlowState: Sendable, Codable, Equatable {
    /// The stages the flow runs, fixed when it starts.
    public var plan: FlowPlan
    /// The index of the current stage; `plan.stages.count` once the flow is done.
    public var position: Int
    /// Whether the current stage holds one of the profile's attempts.
    public var attempt: AttemptHold
    /// The current stage's plugin session: kept by the server, never sent to the client.
    public var session: Data?
    /// The user the identity provider named (registration).
    public var subject: String?
    /// The credential the identity provider identified the user with, when it named one.
    public var grant: String?
    /// What the identity provider reported, handed to the app when the flow ends.
    public var info: CustomInfo?
    /// Registration data of completed stages, stored together when the flow ends, so a flow that
    /// fails half-way writes nothing.
    public var pending: [PendingRegistration]

    /// The state of a flow that has not started: at its first stage, holding no attempt, with
    /// nothing pending.
    public init(plan: FlowPlan) {
        self.plan = plan
        position = 0
        attempt = .none
        session = nil
        subject = nil
        info = nil
        pending = []
    }

    /// The stage the next message is for; `nil` when the flow is done.
    public var stage: FlowStage? { position < plan.stages.count ? plan.stages[position] : nil }
}

/// An attempt the current `authenticate` stage holds against the profile's counter.
public enum AttemptHold: String, Sendable, Codable {
    case none
    /// Held while a plugin looks at a message; given back unless the message fails.
    case held
    /// Counted as a failure: the plugin released something (a PIN evaluation) that lets the
    /// client test a guess, so only success clears it.
    case committed
}

/// Registration data an enrolment (or a rotating authentication) produced.
public struct PendingRegistration: Sendable, Codable, Equatable {
    /// The manifest id of the authenticator the data belongs to.
    public var authenticator: String
    /// The data, opaque to the host: the authenticator's server half reads it back at the next
    /// authentication.
    public var data: Data

    /// Makes pending registration data for the authenticator with manifest id `authenticator`.
    public init(authenticator: String, data: Data) {
        self.authenticator = authenticator
        self.data = data
    }
}

/// What a plugin's server half decided about one message, for any stage.
public enum StageOutcome: Sendable {
    /// More is needed from the client.
    case challenge(AuthenticatorChallenge)
    /// The identity provider named the user.
    case identified(RegisteredIdentity)
    /// The enrolment or the proof is good.
    case succeeded(AuthenticationSuccess)
    /// The message was refused.
    case failed(StageFailure)

    /// Runs an authenticator's server half and turns whatever it does into an outcome, failing
    /// closed: a thrown ``AuthenticationFailure`` keeps its flags, any other thrown error is a
    /// refusal that does not count.
    public static func authenticator(
        _ plugin: PluginTypeIdentifier,
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> AuthenticationOutcome
    ) async -> StageOutcome {
        do {
            switch try await body() {
            case .challenge(let challenge): return .challenge(challenge)
            case .success(let success): return .succeeded(success)
            case .failure(let failure): return .failed(StageFailure(failure))
            }
        } catch let failure as AuthenticationFailure {
            return .failed(StageFailure(failure))
        } catch let error as any DomainError {
            return .failed(StageFailure(error, countsAsAttempt: false))
        } catch {
            // It could not decide (its service is down, a bug): a temporary failure, never a
            // wrong answer, so an outage costs no attempt and deregisters nobody.
            return .failed(
                StageFailure(AuthenticationError(.authenticatorUnavailable, plugin: plugin), countsAsAttempt: false)
            )
        }
    }

    /// Runs an identity provider's server half, failing closed as above.
    public static func identityProvider(
        _ plugin: PluginTypeIdentifier,
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> RegistrationOutcome
    ) async -> StageOutcome {
        do {
            switch try await body() {
            case .challenge(let payload, let session):
                return .challenge(AuthenticatorChallenge(payload: payload, session: session))
            case .registered(let identity): return .identified(identity)
            case .failure(let error): return .failed(StageFailure(error, countsAsAttempt: false))
            case .replayed(let error, let subject, let grant):
                var failure = StageFailure(error, countsAsAttempt: false)
                failure.revokesSubject = subject
                failure.revokesGrant = grant
                return .failed(failure)
            }
        } catch let error as any DomainError {
            // Thrown, not decided: a provider that throws that it failed had no answer to give.
            var failure = StageFailure(error, countsAsAttempt: false)
            failure.isTemporary =
                error.codePlugin == nil && error.domainName == RegistrationDomain.name
                && error.codeNumber == RegistrationError.Code.externalIdentityProviderFailure.rawValue
            return .failed(failure)
        } catch {
            var failure = StageFailure(
                RegistrationError(
                    .externalIdentityProviderFailure,
                    message: "The \(plugin) identity provider failed: \(error)",
                    plugin: plugin
                ),
                countsAsAttempt: false
            )
            failure.isTemporary = true
            return .failed(failure)
        }
    }
}

/// A refused message: why, whether it counts towards the maximum, and whether the
/// authenticator's registration is gone (a locked-out sensor, a custom status 5000).
public struct StageFailure: Sendable {
    /// Why the message was refused; the client gets it.
    public var error: any DomainError
    /// Whether the refusal counts towards the profile's maximum of failures (a wrong answer does; a
    /// malformed or unchecked one does not).
    public var countsAsAttempt: Bool
    /// Whether the authenticator's registration for the profile is gone, so the PIN takes over.
    public var removesRegistration: Bool
    /// An identity provider saw its credential for this user used twice: revoke the sessions it
    /// issued.
    public var revokesSubject: String?
    /// The credential seen twice, when the provider names it: only its sessions are revoked.
    public var revokesGrant: String?
    /// The plugin could not decide — what it depends on failed (an identity provider's API is
    /// down) — so this is a temporary failure, not a refusal: the app may try again later.
    public var isTemporary = false

    /// Makes a refusal; it removes nothing unless `removesRegistration` says so.
    public init(_ error: any DomainError, countsAsAttempt: Bool, removesRegistration: Bool = false) {
        self.error = error
        self.countsAsAttempt = countsAsAttempt
        self.removesRegistration = removesRegistration
    }

    /// Makes a refusal from an authenticator's failure, keeping its flags.
    public init(_ failure: AuthenticationFailure) {
        self.init(
            failure.error,
            countsAsAttempt: failure.countsAsAttempt,
            removesRegistration: failure.removesRegistration
        )
    }
}

/// What the host does, in order, in one transaction. Closed: the machine speaks only these.
public enum FlowAction: Sendable, CustomStringConvertible {
    /// Hold one attempt while a plugin looks at a message (the machine checked there is room).
    case reserveAttempt
    /// A held attempt becomes a counted failure.
    case commitAttempt
    /// Give a held attempt back.
    case releaseAttempt
    /// Count a failure that held no attempt.
    case countFailure
    /// An attempt at `authenticator` failed: a counted refusal, or a released guess (a PIN
    /// evaluation) given up without its answer. The counter already holds it (an earlier
    /// `commitAttempt` or `countFailure`); the host reports it, once per failed attempt.
    case attemptFailed(authenticator: String)
    /// Success: the counter starts again from zero.
    case resetFailures
    /// The identity provider named the user: find the profile of that user on this client, or
    /// allocate a new profile id.
    case identifyUser(RegisteredIdentity)
    /// Write the profile of a registration (the user, the device key, the scope).
    case createProfile
    /// Keep an authenticator's registration data for the profile, replacing any older one.
    case storeRegistration(authenticator: String, data: Data)
    /// Forget an authenticator's registration for the profile.
    case removeRegistration(authenticator: String)
    /// Delete the profile, its registrations and its tokens: a lockout, its failures having
    /// reached the maximum (the machine deregisters for nothing else).
    case deregister
    /// Mint a new session for the profile.
    case issueTokens
    /// Revoke what a replayed credential issued before: the sessions of this identity provider's
    /// user `subject` that came from `grant`, or with no grant every session of `subject` on
    /// every device.
    case revokeUser(subject: String, grant: String?)
    /// Mark the flow's mobile authentication transaction approved (it must still be pending).
    case approveTransaction
    /// The flow of a mobile authentication ended without approval: deny its transaction, as
    /// refused (`refused`) or as cancelled by the user.
    case denyTransaction(refused: Bool)
    /// Keep the flow's new state (its session, its stage, the attempt it holds).
    case saveFlow(FlowState)
    /// The flow is over; forget it.
    case endFlow
    /// Answer the client.
    case reply(FlowReply)
    /// Refuse the request; the actions before it are still applied.
    case refuse(FlowRefusal)

    /// The action's name with what identifies it, never a secret or registration data, e.g.
    /// `storeRegistration(pin)`: for logs and test failures.
    public var description: String {
        switch self {
        case .reserveAttempt: "reserveAttempt"
        case .commitAttempt: "commitAttempt"
        case .releaseAttempt: "releaseAttempt"
        case .countFailure: "countFailure"
        case .attemptFailed(let authenticator): "attemptFailed(\(authenticator))"
        case .resetFailures: "resetFailures"
        case .identifyUser: "identifyUser"
        case .createProfile: "createProfile"
        case .storeRegistration(let authenticator, _): "storeRegistration(\(authenticator))"
        case .removeRegistration(let authenticator): "removeRegistration(\(authenticator))"
        case .deregister: "deregister"
        case .issueTokens: "issueTokens"
        case .revokeUser: "revokeUser"
        case .approveTransaction: "approveTransaction"
        case .denyTransaction(let refused): "denyTransaction(\(refused ? "refused" : "cancelled"))"
        case .saveFlow(let state): "saveFlow(\(state.stage.map(\.description) ?? "done"), \(state.attempt.rawValue))"
        case .endFlow: "endFlow"
        case .reply(let reply): "reply(\(reply.stage.map(\.description) ?? "done"))"
        case .refuse(let refusal):
            "refuse(\(refusal.error.codeName), \(refusal.stage.map(\.description) ?? "ended"))"
        }
    }
}

/// The answer to a request that the flow accepted.
public struct FlowReply: Sendable {
    /// Where the flow waits now; `nil` when it is done.
    public var stage: FlowStage?
    /// The plugin's challenge for the client half.
    public var challenge: Data?
    /// The stage the request completed, if it completed one.
    public var completed: FlowStage?
    /// What the completed stage reported.
    public var info: CustomInfo?
    /// For an `authenticate` stage: the counter before its first attempt.
    public var failureCounts: FailureCounts?

    /// Makes a reply; only `stage` is required.
    public init(
        stage: FlowStage?,
        challenge: Data? = nil,
        completed: FlowStage? = nil,
        info: CustomInfo? = nil,
        failureCounts: FailureCounts? = nil
    ) {
        self.stage = stage
        self.challenge = challenge
        self.completed = completed
        self.info = info
        self.failureCounts = failureCounts
    }
}

/// Facts only the host knows when a plugin's decision comes back, for the machine to rule on.
public struct OutcomeFacts: Sendable, Equatable {
    /// The attempt the flow held lapsed while the plugin looked (the host's hold lifetime ran
    /// out: the request was too slow, and others may have counted on the attempt being free).
    public var holdLapsed: Bool
    /// The registration the plugin checked against changed meanwhile (another request renewed
    /// or removed it), so its decision is about data that is no longer there.
    public var registrationChanged: Bool

    /// Makes the facts; both are `false` unless said otherwise.
    public init(holdLapsed: Bool = false, registrationChanged: Bool = false) {
        self.holdLapsed = holdLapsed
        self.registrationChanged = registrationChanged
    }
}

/// A refused request: the error, and where the flow waits now (`nil`: the flow is over).
public struct FlowRefusal: Sendable {
    /// Why the request was refused; the client gets it.
    public var error: any DomainError
    /// The stage the flow still waits at (retry, or the fallback it switched to); `nil` when the
    /// refusal ended the flow.
    public var stage: FlowStage?
    /// The counter after a counted failure.
    public var failureCounts: FailureCounts?
    /// Not a refusal: the plugin could not decide (see ``StageFailure/isTemporary``).
    public var isTemporary: Bool

    /// Makes a refusal that ends the flow unless `stage` is given.
    public init(
        _ error: any DomainError,
        stage: FlowStage? = nil,
        failureCounts: FailureCounts? = nil,
        isTemporary: Bool = false
    ) {
        self.error = error
        self.stage = stage
        self.failureCounts = failureCounts
        self.isTemporary = isTemporary
    }
}
