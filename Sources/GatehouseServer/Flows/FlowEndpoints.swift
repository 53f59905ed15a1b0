import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

// The flow endpoints: each picks a plan, hands the plugin of the current stage its message, and
// lets the store apply what the kernel's FlowMachine decides. No rule of a flow lives here.

extension TokenServer {
    // MARK: - Starting flows

    func startRegistration(_ request: WireRequest) async throws -> WireResponse {
        let body = try decodeBody(RegistrationStartRequest.self, request)
        let proof = try proof(request)
        let provider: HostedIdentityProvider
        if let id = body.identityProvider {
            guard let named = identityProviders.first(where: { $0.descriptor.id == id }) else {
                throw ServerError(
                    RegistrationError(.invalidIdentityProvider, message: "There is no identity provider \"\(id)\".")
                )
            }
            provider = named
        } else {
            provider = defaultIdentityProvider
        }
        guard let profileKey = body.profileKey.publicKey().map(PublicJWK.init) else {
            throw ServerError.invalidRequest("Invalid field profile_key: not a P-256 key.")
        }
        guard let client = try await store.client(body.clientID) else {
            throw ServerError(
                401,
                "invalid_client",
                "The client is not registered; register the device again.",
                code: 9002
            )
        }
        guard client.keyThumbprint == proof.keyThumbprint else {
            throw ServerError.invalidProof("The DPoP proof is not signed by the client's key.")
        }
        let stateless = body.stateless == true
        if stateless, configuration.clients.first(where: { $0.id == client.appID })?.statelessRegistration != true {
            throw ServerError(RegistrationError(.stateless), status: 400)
        }
        let flow = FlowRow(
            id: newFlowID(),
            clientID: body.clientID,
            profileID: nil,
            identityProvider: provider.descriptor.id,
            profileKey: profileKey.thumbprint,
            scope: try scope(requested: body.scopes, appID: client.appID),
            keyThumbprint: proof.keyThumbprint,
            expiresAt: proof.now + Double(configuration.flowLifetime),
            plan: .registration(
                identityProvider: provider.descriptor.id,
                enrol: stateless ? [] : registrationAuthenticators
            ),
            stateless: stateless
        )
        return try respond(await store.startRegistration(flow, proof: proof))
    }

    /// The scopes to grant: those asked for, all allowed for the app, or the app's defaults.
    private func scope(requested: [String]?, appID: String) throws -> String {
        guard let client = configuration.clients.first(where: { $0.id == appID }) else {
            throw ServerError(401, "invalid_client", "The application \"\(appID)\" may no longer register.")
        }
        let scopes = requested.flatMap { $0.isEmpty ? nil : $0 } ?? client.defaultScopes
        if let refused = scopes.first(where: { !client.allowedScopes.contains($0) }) {
            throw ServerError(400, "invalid_scope", "The scope \"\(refused)\" is not allowed for \(appID).")
        }
        return Array(Set(scopes)).sorted().joined(separator: " ")
    }

    func startAuthentication(_ request: WireRequest) async throws -> WireResponse {
        let body = try decodeBody(AuthenticationStartRequest.self, request)
        let proof = try proof(request)
        let authenticator = try hostedAuthenticator(body.authenticator ?? pinAuthenticator.descriptor.id)
        let plan = FlowPlan.authentication(with: authenticator.descriptor.id, fallback: pinAuthenticator.descriptor.id)
        return try await startProfileFlow(body.profileID, plan, .registered(authenticator.descriptor.id), proof)
    }

    func startChangePin(_ request: WireRequest) async throws -> WireResponse {
        let token = try bearerToken(request)
        let proof = try proof(request, accessToken: token)
        guard request.body.isEmpty || (try? decodeBody([String: String].self, request))?.isEmpty == true else {
            throw ServerError.invalidRequest("Changing the PIN takes no body.")
        }
        let session = try await store.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now)
        let pin = pinAuthenticator.descriptor.id
        return try await startProfileFlow(session.profileID, .changePin(pin), .registered(pin), proof)
    }

    /// Registers another authenticator for the session's profile: the PIN first, then its
    /// enrolment. The PIN itself is always registered.
    func startAuthenticatorRegistration(_ request: WireRequest) async throws -> WireResponse {
        let token = try bearerToken(request)
        let proof = try proof(request, accessToken: token)
        let body = try decodeBody(AuthenticatorRequest.self, request)
        let authenticator = try hostedAuthenticator(body.authenticator)
        guard authenticator.kind != .pin else {
            throw ServerError(
                AuthenticationError(.authenticatorAlreadyRegistered, message: "The PIN is always registered."),
                status: 409
            )
        }
        let session = try await store.accessSession(token, keyThumbprint: proof.keyThumbprint, now: proof.now)
        let plan = FlowPlan.authenticatorRegistration(authenticator.descriptor.id, pin: pinAuthenticator.descriptor.id)
        return try await startProfileFlow(session.profileID, plan, .notRegistered(authenticator.descriptor.id), proof)
    }

    private func startProfileFlow(
        _ profileID: String,
        _ plan: FlowPlan,
        _ requirement: RegistrationRequirement,
        _ proof: ServerStore.ProofUse
    ) async throws -> WireResponse {
        let flow = FlowRow(
            id: newFlowID(),
            clientID: "",
            profileID: profileID,
            scope: "",
            keyThumbprint: proof.keyThumbprint,
            expiresAt: proof.now + Double(configuration.flowLifetime),
            plan: plan
        )
        return try respond(await store.startProfileFlow(flow, requirement: requirement, proof: proof))
    }

    func hostedAuthenticator(_ id: String) throws -> HostedAuthenticator {
        guard let found = authenticators.first(where: { $0.descriptor.id == id }) else {
            throw ServerError(
                AuthenticationError(.authenticatorNotSupported, message: "The server has no authenticator \"\(id)\".")
            )
        }
        return found
    }

    private func newFlowID() -> String { Data.random(count: 24).base64URLEncodedString }

    // MARK: - Flow messages

    func flowMessage(id: String, _ request: WireRequest) async throws -> WireResponse {
        guard (16...64).contains(id.utf8.count), Data(base64URLEncoded: id) != nil else {
            throw ServerError(404, "not_found", "The flow does not exist or has expired.")
        }
        let body = try decodeBody(FlowMessageRequest.self, request)
        guard (body.message == nil) != (body.action == nil) else {
            throw ServerError.invalidRequest("Send either a message or an action.")
        }
        let proof = try proof(request)
        let (loaded, registration, subject) = try await store.flow(
            id,
            keyThumbprint: proof.keyThumbprint,
            now: proof.now
        )
        if let action = body.action {
            let control: ServerStore.FlowControl = action == .cancel ? .cancel : .fallBack
            return try respond(await store.control(control, flow: loaded, proof: proof))
        }
        guard let message = body.message?.data else { throw ServerError.invalidRequest("The message is empty.") }
        let flow: FlowRow
        let proofRecorded: Bool
        switch try await store.messageArrived(loaded, proof: proof) {
        case .proceed(let held, let recorded): (flow, proofRecorded) = (held, recorded)
        case .ended(let ended): return try respond(ended)
        }
        // The plugin runs outside any transaction; its outcome is applied in the next one.
        let outcome = await ServerTracing.flowStep(kind: flow.state.plan.kind, stage: flow.state.stage) {
            await runPlugin(of: flow, message: message, registration: registration, subject: subject)
        }
        let applied = try await store.apply(
            outcome,
            to: flow,
            proof: proof,
            proofRecorded: proofRecorded,
            now: clock.now.timeIntervalSince1970,
            registrationSeen: registration
        )
        return try respond(applied)
    }

    private func runPlugin(
        of flow: FlowRow,
        message: Data,
        registration: Data?,
        subject: String?
    ) async
        -> StageOutcome
    {
        let profile = UserProfile(id: flow.profileID ?? "")
        let request = VerificationRequest(
            subject: subject ?? "",
            profile: profile,
            message: message,
            session: flow.state.session,
            registration: registration,
            now: clock.now
        )
        switch flow.state.stage {
        case .identity(let id):
            guard let provider = identityProviders.first(where: { $0.descriptor.id == id }) else {
                return .failed(StageFailure(Self.unconfigured(id), countsAsAttempt: false))
            }
            let step = RegistrationStepRequest(
                message: message,
                session: flow.state.session,
                scopes: flow.scope.split(separator: " ").map(String.init),
                now: clock.now
            )
            return await StageOutcome.identityProvider(provider.descriptor.type) {
                try await provider.host.handle(step)
            }
        case .enrol(let id):
            guard let hosted = authenticators.first(where: { $0.descriptor.id == id }) else {
                return .failed(StageFailure(Self.unconfigured(id), countsAsAttempt: false))
            }
            return await StageOutcome.authenticator(hosted.descriptor.type) {
                try await hosted.verifier.enroll(request)
            }
        case .authenticate(let id):
            guard let hosted = authenticators.first(where: { $0.descriptor.id == id }) else {
                return .failed(StageFailure(Self.unconfigured(id), countsAsAttempt: false))
            }
            return await StageOutcome.authenticator(hosted.descriptor.type) {
                try await hosted.verifier.verify(request)
            }
        case nil:
            return .failed(
                StageFailure(GenericError(.requestInvalid, message: "The flow is finished."), countsAsAttempt: false)
            )
        }
    }

    private static func unconfigured(_ id: String) -> GenericError {
        GenericError(.configurationInvalid, message: "The flow's plugin \"\(id)\" is no longer configured.")
    }

    func flowResponse(_ reply: FlowReply, _ applied: FlowApplied) -> FlowResponse {
        var response = FlowResponse(flowID: applied.flowID, stage: reply.stage)
        response.challenge = reply.challenge.map(Base64URLData.init)
        response.completedStage = reply.completed
        response.info = reply.info
        response.failureCounts = reply.failureCounts
        response.profileID = applied.profileID
        response.tokens = applied.tokens
        response.subject = applied.subject
        return response
    }

    /// The wire form of what the machine decided.
    func respond(_ applied: FlowApplied) throws -> WireResponse {
        // A mobile authentication's flow may have ended its transaction: its callback is due.
        if let transaction = applied.endedTransaction { callbacks?.wake(endedBy: transaction) }
        record(applied)
        switch applied.outcome {
        case .reply(let reply):
            return try json(flowResponse(reply, applied))
        case .refusal(let refusal):
            var error = ServerError(
                refusal.error,
                failureCounts: refusal.failureCounts,
                temporary: refusal.isTemporary
            )
            error.body.flowStage = refusal.stage
            logger.debug(
                "Flow refused",
                metadata: ["flow": "\(applied.flowID)", "error": "\(refusal.error.codeName)"]
            )
            return error.response
        }
    }

    /// Counts a flow step and writes what it changed to the audit log; the step's transaction
    /// has committed, so everything recorded happened.
    func record(_ applied: FlowApplied) {
        let kind = applied.kind
        switch applied.outcome {
        case .reply:
            metrics.flowStep(
                kind: kind,
                outcome: applied.events.contains(.ended) ? "completed" : "continued",
                error: ""
            )
        case .refusal(let refusal):
            metrics.flowStep(kind: kind, outcome: "refused", error: refusal.error.codeName)
        }
        let profile = applied.profileID ?? "none"
        for event in applied.events {
            switch event {
            case .profileCreated:
                audit.notice("Profile registered", metadata: ["event": "registration", "profile": "\(profile)"])
            case .attemptFailed:
                metrics.event("authentication_failure", kind: kind)
            case .lockedOut(let authenticator):
                metrics.event("lockout", kind: kind)
                var metadata: Logger.Metadata = ["event": "lockout", "profile": "\(profile)"]
                if let authenticator { metadata["authenticator"] = "\(authenticator)" }
                audit.notice("Profile deregistered after too many failed attempts", metadata: metadata)
            case .registrationRemoved(let authenticator):
                // The machine removes a registration only for the authenticator's own lockout.
                metrics.event("authenticator_lockout", kind: kind)
                audit.notice(
                    "Authenticator deregistered after too many failed attempts",
                    metadata: [
                        "event": "authenticator_lockout", "profile": "\(profile)", "authenticator": "\(authenticator)",
                    ]
                )
            case .registrationStored(let authenticator) where kind == .changePin:
                audit.notice(
                    "PIN changed",
                    metadata: ["event": "pin_change", "profile": "\(profile)", "authenticator": "\(authenticator)"]
                )
            case .registrationStored(let authenticator) where kind == .authenticatorRegistration:
                audit.notice(
                    "Authenticator registered",
                    metadata: [
                        "event": "authenticator_registration", "profile": "\(profile)",
                        "authenticator": "\(authenticator)",
                    ]
                )
            case .userSessionsRevoked:
                metrics.event("authorization_code_replayed", kind: kind)
                audit.notice(
                    "A replayed credential revoked the sessions it had issued",
                    metadata: ["event": "credential_replay", "profile": "\(profile)"]
                )
            default:
                break
            }
        }
    }
}
