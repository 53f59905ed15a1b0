import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol

/// Runs a flow the server started, stage by stage, with the app's plugins: whatever the stages
/// are, the client only follows the server's plan. A refusal that leaves the flow open (a wrong
/// PIN, a custom status 4000) asks the same stage again with the error; one that switched the
/// flow to the PIN goes on with the PIN; anything else ends the flow.
struct FlowRunner: Sendable {
    let calls: ServerCalls
    let plugins: LoadedPlugins
    /// Signs the flow's requests: the device key during a registration, the profile key after.
    let key: P256.Signing.PrivateKey
    let responder: any ChallengeResponder
    let scopes: [String]
    /// The values an authenticator already keeps for the profile.
    let storedValues: @Sendable (UserProfile, String) throws -> [String: Data]
    /// The server forgot an authenticator of the profile: forget it here at once, whatever
    /// becomes of the flow.
    let forget: @Sendable (UserProfile, String) throws -> Void

    struct Outcome: Sendable {
        var final: FlowResponse
        var profile: UserProfile?
        /// What the identity provider reported.
        var identityInfo: CustomInfo?
        /// What the last authenticator reported.
        var info: CustomInfo?
        /// The enrolled authenticators and every touched authenticator's values.
        var changes = ClientStore.ProfileChanges()
        /// Whether an authentication ended with the fallback instead of the authenticator asked for.
        var fellBack = false
    }

    /// How often a message refused because other requests hold every attempt left is sent again.
    static let busyRetryLimit = 4

    func run(_ start: FlowResponse, profile initial: UserProfile?) async throws -> Outcome {
        var response = start
        var outcome = Outcome(final: start, profile: initial)
        var previousError: (any DomainError)?
        var failureCounts = start.failureCounts
        var staged: [String: StagedPluginStorage] = [:]
        var busyRetries = 0
        while let stage = response.stage {
            if let id = response.profileID { outcome.profile = UserProfile(id: id) }
            let channel = FlowChannel(response, key: key)
            do {
                // A cancelled task asks the user nothing more.
                try Task.checkCancellation()
                switch stage {
                case .identity(let id):
                    let result = try await identityProvider(id).register(
                        RegistrationContext(scopes: scopes, server: conversation(channel), responder: responder)
                    )
                    outcome.identityInfo = result.info
                case .enrol(let id), .authenticate(let id):
                    guard let profile = outcome.profile else {
                        throw GenericError(.requestInvalid, message: "The server did not name the profile.")
                    }
                    let enrolling = stage == .enrol(id)
                    let storage = try staged[id] ?? StagedPluginStorage(enrolling ? [:] : storedValues(profile, id))
                    staged[id] = storage
                    let context = AuthenticatorContext(
                        profile: profile,
                        storage: storage,
                        server: conversation(channel),
                        responder: responder,
                        failureCounts: failureCounts,
                        previousError: previousError
                    )
                    let plugin = try authenticator(id)
                    switch try await enrolling ? plugin.enroll(context) : plugin.authenticate(context) {
                    case .completed(let info):
                        outcome.info = info ?? outcome.info
                        if enrolling { outcome.changes.registered.append(id) }
                    case .fallbackToPin(let reason):
                        previousError = reason.map {
                            AuthenticationError(.customAuthenticatorFailure, details: ErrorDetails(customInfo: $0))
                        }
                        response = try await control(.fallback, response)
                        failureCounts = response.failureCounts
                        outcome.fellBack = true
                        continue
                    }
                }
                let next = await channel.last
                guard next.stage != stage else {
                    throw GenericError(
                        .requestInvalid,
                        message: "The \(stage.plugin) plugin ended its part before the server finished the stage."
                    )
                }
                response = next
                failureCounts = response.failureCounts
                previousError = nil
                busyRetries = 0
            } catch {
                guard let refusal = await channel.refusal else {
                    // The flow stopped on this side (cancelled, or a local failure): tell the
                    // server, which gives back an attempt not yet tested — even when the caller's
                    // task was cancelled, hence a task of its own.
                    let cancelled = response
                    await Task { _ = try? await control(.cancel, cancelled) }.value
                    if error is CancellationError || Task.isCancelled { throw GenericError(.actionCancelled) }
                    throw error
                }
                guard let next = refusal.flowStage else { throw error }
                if refusal.gatehouseCodePlugin == nil,
                    refusal.gatehouseCode == GenericError.Code.actionAlreadyInProgress.rawValue
                {
                    // Every attempt left is held by other requests: wait a little, a few times.
                    busyRetries += 1
                    guard busyRetries <= Self.busyRetryLimit else { throw error }
                    try await Task.sleep(for: .milliseconds(50 << busyRetries))
                } else {
                    previousError = error as? any DomainError
                }
                if next != stage {
                    // The server forgot the authenticator (lockout, status 5000) and switched to the PIN.
                    if let profile = outcome.profile { try forget(profile, stage.plugin) }
                    staged[stage.plugin] = nil
                    outcome.changes.removed.append(stage.plugin)
                    outcome.fellBack = true
                }
                if let remaining = refusal.remainingFailureCount, let maximum = refusal.maxFailureCount {
                    failureCounts = FailureCounts(maximum: maximum, previous: maximum - remaining)
                }
                var retry = FlowResponse(flowID: response.flowID, stage: next)
                retry.profileID = outcome.profile?.id
                response = retry
            }
        }
        // The last answer names the profile too (a registration with nothing to enrol ends at once).
        if let id = response.profileID { outcome.profile = UserProfile(id: id) }
        outcome.final = response
        for (id, storage) in staged { outcome.changes.values[id] = await storage.values }
        return outcome
    }

    private func identityProvider(_ id: String) throws -> any IdentityProvider {
        guard let provider = plugins.identityProviders.first(where: { $0.descriptor.id == id })?.identityProvider
        else {
            throw RegistrationError(
                .invalidIdentityProvider,
                message: "The app has no plugin for the identity provider \"\(id)\"."
            )
        }
        return provider
    }

    private func authenticator(_ id: String) throws -> any Authenticator {
        guard let authenticator = plugins.authenticator(id: id)?.authenticator else {
            throw AuthenticationError(.authenticatorNotSupported, message: "The app has no authenticator \"\(id)\".")
        }
        return authenticator
    }

    private func control(_ action: FlowMessageRequest.Action, _ response: FlowResponse) async throws -> FlowResponse {
        try await calls.call(
            "POST",
            Endpoint.flow(response.flowID),
            body: FlowMessageRequest(action: action),
            key: key
        )
    }

    /// The channel a plugin's client half uses to reach its server half within one flow.
    private func conversation(_ channel: FlowChannel) -> ServerConversation {
        ServerConversation { [calls] message in
            let flowID = await channel.last.flowID
            await channel.record(refusal: nil)
            let response: FlowResponse
            do {
                response = try await calls.exchange(
                    "POST",
                    Endpoint.flow(flowID),
                    body: FlowMessageRequest(message: message),
                    key: channel.key
                )
            } catch let refusal as ServerCalls.Refusal {
                await channel.record(refusal: refusal.body)
                throw refusal.error
            }
            await channel.update(response)
            if let challenge = response.challenge { return .challenge(challenge.data) }
            return .completed(nil, info: response.info)
        }
    }
}

/// The state of one flow as the client sees it: the last response, the last refusal, and the
/// key that signs.
actor FlowChannel {
    private(set) var last: FlowResponse
    private(set) var refusal: ErrorBody?
    nonisolated let key: P256.Signing.PrivateKey

    init(_ start: FlowResponse, key: P256.Signing.PrivateKey) {
        last = start
        self.key = key
    }

    func update(_ response: FlowResponse) { last = response }
    func record(refusal: ErrorBody?) { self.refusal = refusal }
}
