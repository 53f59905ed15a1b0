import Foundation
import GRDB
import GatehouseKernel
import GatehouseProtocol
import Logging

/// A flow as stored: who may continue it, where it stands, and its plugin's session.
struct FlowRecord: Sendable {
    enum Kind: String { case registration, authentication, changePin }

    var id: String
    var kind: Kind
    var clientID: String
    var profileID: String?
    var stage: FlowStage
    var plugin: String
    var session: Data?
    var attemptReserved: Bool
    var identityProvider: String?
    var scope: String
    var profileKey: String?
    var subject: String?
    var keyThumbprint: String
    var version: Int64

    init?(_ row: Row) {
        guard let kind = Kind(rawValue: row["kind"]), let stage = FlowStage(rawValue: row["stage"]) else { return nil }
        id = row["id"]
        self.kind = kind
        clientID = row["client_id"]
        profileID = row["profile_id"]
        self.stage = stage
        plugin = row["plugin"]
        session = row["session"]
        attemptReserved = row["attempt_reserved"]
        identityProvider = row["identity_provider"]
        scope = row["scope"]
        profileKey = row["profile_key"]
        subject = row["subject"]
        keyThumbprint = row["key_thumbprint"]
        version = row["version"]
    }
}

/// What a transaction decided: go on, or refuse after committing (a counted failure, a revoked
/// family, a deregistration must persist even though the request is refused).
enum Decision<Value: Sendable>: Sendable {
    case proceed(Value)
    case refuse(ServerError)

    func get() throws -> Value {
        switch self {
        case .proceed(let value): return value
        case .refuse(let error): throw error
        }
    }
}

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
        let flowID = Data.random(count: 24).base64URLEncodedString
        let now = now
        let expires = now + Double(configuration.flowLifetime)
        try await store.pool.write { db in
            guard
                let client = try Row.fetchOne(
                    db,
                    sql: "SELECT app_id, key_thumbprint FROM clients WHERE id = ?",
                    arguments: [body.clientID]
                )
            else {
                throw ServerError(
                    401,
                    "invalid_client",
                    "The client is not registered; register the device again.",
                    code: 9002
                )
            }
            guard client["key_thumbprint"] == proof.keyThumbprint else {
                throw ServerError.invalidProof("The DPoP proof is not signed by the client's key.")
            }
            let scope = try self.scope(requested: body.scopes, appID: client["app_id"])
            try self.recordProof(proof, db)
            try db.execute(sql: "DELETE FROM flows WHERE expires_at < ?", arguments: [now - 3600])
            try db.execute(
                sql: """
                    INSERT INTO flows (id, kind, client_id, stage, plugin, identity_provider, scope, profile_key, key_thumbprint, expires_at)
                    VALUES (?, 'registration', ?, 'identity', ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    flowID, body.clientID, provider.descriptor.id, provider.descriptor.id, scope, profileKey.thumbprint,
                    proof.keyThumbprint, expires,
                ]
            )
        }
        var response = FlowResponse(flowID: flowID, stage: .identity)
        response.plugin = provider.descriptor.id
        return try json(response)
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
        let authenticator = try authenticator(named: body.authenticator)
        return try await startAuthenticationFlow(
            kind: .authentication,
            profileID: body.profileID,
            authenticator: authenticator,
            proof: proof,
            accessTokenHash: nil
        )
    }

    func startChangePin(_ request: WireRequest) async throws -> WireResponse {
        let token = try bearerToken(request)
        let proof = try proof(request, accessToken: token)
        guard request.body.isEmpty || (try? decodeBody([String: String].self, request))?.isEmpty == true else {
            throw ServerError.invalidRequest("Changing the PIN takes no body.")
        }
        let session = try await store.pool.read { db in try self.validAccessToken(token, proof: proof, db) }
        return try await startAuthenticationFlow(
            kind: .changePin,
            profileID: session.profileID,
            authenticator: pinAuthenticator,
            proof: proof,
            accessTokenHash: nil
        )
    }

    private func authenticator(named id: String?) throws -> HostedAuthenticator {
        guard let id else { return pinAuthenticator }
        guard let found = authenticators.first(where: { $0.descriptor.id == id }) else {
            throw ServerError(
                AuthenticationError(.authenticatorNotRegistered, message: "There is no authenticator \"\(id)\".")
            )
        }
        return found
    }

    private func startAuthenticationFlow(
        kind: FlowRecord.Kind,
        profileID: String,
        authenticator: HostedAuthenticator,
        proof: DPoP.VerifiedProof,
        accessTokenHash: String?
    ) async throws -> WireResponse {
        let flowID = Data.random(count: 24).base64URLEncodedString
        let maximum = configuration.maxPinFailures
        let expires = now + Double(configuration.flowLifetime)
        let pluginID = authenticator.descriptor.id
        let decision = try await store.pool.write { db -> Decision<Int> in
            guard let profile = try Row.fetchOne(db, sql: "SELECT * FROM profiles WHERE id = ?", arguments: [profileID])
            else {
                return .refuse(.userDeregistered)
            }
            guard profile["key_thumbprint"] == proof.keyThumbprint else {
                throw ServerError.invalidProof("The DPoP proof is not signed by this profile's key.")
            }
            let registered = try Bool.fetchOne(
                db,
                sql: "SELECT 1 FROM registrations WHERE profile_id = ? AND authenticator = ?",
                arguments: [profileID, pluginID]
            )
            guard registered == true else {
                throw ServerError(AuthenticationError(.authenticatorNotRegistered))
            }
            try self.recordProof(proof, db)
            let failures: Int = profile["failures"]
            if maximum > 0, failures >= maximum {
                try self.deregisterProfile(profileID, db)
                return .refuse(.userDeregistered)
            }
            try db.execute(
                sql: """
                    INSERT INTO flows (id, kind, client_id, profile_id, stage, plugin, scope, key_thumbprint, expires_at)
                    VALUES (?, ?, ?, ?, 'authentication', ?, ?, ?, ?)
                    """,
                arguments: [
                    flowID, kind.rawValue, profile["client_id"] as String, profileID, pluginID,
                    profile["scope"] as String,
                    proof.keyThumbprint, expires,
                ]
            )
            return .proceed(failures)
        }
        let failures = try decision.get()
        var response = FlowResponse(flowID: flowID, stage: .authentication)
        response.plugin = pluginID
        response.profileID = profileID
        response.failureCounts = FailureCounts(maximum: maximum, previous: failures)
        return try json(response)
    }

    // MARK: - Flow messages

    func flowMessage(id: String, _ request: WireRequest) async throws -> WireResponse {
        guard (16...64).contains(id.utf8.count), Data(base64URLEncoded: id) != nil else {
            throw ServerError(404, "not_found", "The flow does not exist or has expired.")
        }
        let body = try decodeBody(FlowMessageRequest.self, request)
        let proof = try proof(request)
        let now = now
        // Read the flow; nothing is written until the plugin has answered.
        let loaded = try await store.pool.read { db -> (FlowRecord, Data?) in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM flows WHERE id = ?", arguments: [id]),
                let flow = FlowRecord(row)
            else { throw ServerError(404, "not_found", "The flow does not exist; start again.") }
            guard flow.keyThumbprint == proof.keyThumbprint else {
                throw ServerError.invalidProof("The DPoP proof is not signed by the key that started the flow.")
            }
            guard (row["expires_at"] as Double) > now else {
                throw ServerError(
                    404,
                    "not_found",
                    "The flow expired; start again.",
                    code: flow.kind == .registration ? RegistrationError.Code.customRegistrationExpired.rawValue : nil
                )
            }
            if flow.kind != .registration, let profileID = flow.profileID,
                try Bool.fetchOne(db, sql: "SELECT 1 FROM profiles WHERE id = ?", arguments: [profileID]) != true
            {
                throw ServerError.userDeregistered
            }
            var registration: Data?
            if flow.stage == .authentication, let profileID = flow.profileID {
                registration = try Data.fetchOne(
                    db,
                    sql: "SELECT data FROM registrations WHERE profile_id = ? AND authenticator = ?",
                    arguments: [profileID, flow.plugin]
                )
            }
            return (flow, registration)
        }
        let (flow, registration) = loaded
        let message = body.message.data
        switch flow.stage {
        case .identity:
            guard let provider = identityProviders.first(where: { $0.descriptor.id == flow.plugin }) else {
                throw ServerError(500, "server_error", "The flow's identity provider is no longer configured.")
            }
            let outcome = try await provider.host.handle(
                RegistrationStepRequest(
                    message: message,
                    session: flow.session,
                    scopes: flow.scope.split(separator: " ").map(String.init),
                    now: clock.now
                )
            )
            return try await applyIdentity(outcome, flow: flow, proof: proof)
        case .pinEnrolment:
            let outcome = try await pinAuthenticator.verifier.enroll(
                VerificationRequest(
                    subject: flow.subject ?? "",
                    profile: UserProfile(id: flow.profileID ?? ""),
                    message: message,
                    session: flow.session,
                    now: clock.now
                )
            )
            return try await applyEnrolment(outcome, flow: flow, proof: proof)
        case .authentication:
            guard let verifier = authenticators.first(where: { $0.descriptor.id == flow.plugin })?.verifier else {
                throw ServerError(500, "server_error", "The flow's authenticator is no longer configured.")
            }
            let outcome = try await verifier.verify(
                VerificationRequest(
                    subject: flow.subject ?? "",
                    profile: UserProfile(id: flow.profileID ?? ""),
                    message: message,
                    session: flow.session,
                    registration: registration,
                    now: clock.now
                )
            )
            return try await applyAuthentication(outcome, flow: flow, proof: proof)
        case .done:
            throw ServerError(404, "not_found", "The flow does not exist or has expired.")
        }
    }

    /// Claims the flow for this step: succeeds only if nobody moved it on since it was read, so
    /// each step (and each single-use nonce) is used at most once, even by concurrent requests.
    private func claim(_ flow: FlowRecord, _ db: Database) throws {
        try db.execute(
            sql: "UPDATE flows SET version = version + 1 WHERE id = ? AND version = ?",
            arguments: [flow.id, flow.version]
        )
        guard db.changesCount == 1 else {
            throw ServerError(409, "invalid_request", "The flow was continued by another request.")
        }
    }

    private func continueFlow(
        _ flow: FlowRecord,
        challenge payload: Data,
        session: Data,
        _ db: Database
    ) throws -> FlowResponse {
        try db.execute(sql: "UPDATE flows SET session = ? WHERE id = ?", arguments: [session, flow.id])
        var response = FlowResponse(flowID: flow.id, stage: flow.stage)
        response.plugin = flow.plugin
        response.profileID = flow.profileID
        response.challenge = Base64URLData(payload)
        return response
    }

    private func applyIdentity(
        _ outcome: RegistrationOutcome,
        flow: FlowRecord,
        proof: DPoP.VerifiedProof
    ) async throws -> WireResponse {
        let pinID = pinAuthenticator.descriptor.id
        let decision = try await store.pool.write { db -> Decision<FlowResponse> in
            try self.recordProof(proof, db)
            try self.claim(flow, db)
            switch outcome {
            case .challenge(let payload, let session):
                return .proceed(try self.continueFlow(flow, challenge: payload, session: session, db))
            case .registered(let identity):
                let existing = try String.fetchOne(
                    db,
                    sql: "SELECT id FROM profiles WHERE client_id = ? AND identity_provider = ? AND subject = ?",
                    arguments: [flow.clientID, flow.plugin, identity.subject]
                )
                let profileID = try existing ?? self.newProfileID(db)
                try db.execute(
                    sql:
                        "UPDATE flows SET stage = 'pinEnrolment', plugin = ?, session = NULL, profile_id = ?, subject = ? WHERE id = ?",
                    arguments: [pinID, profileID, identity.subject, flow.id]
                )
                var response = FlowResponse(flowID: flow.id, stage: .pinEnrolment)
                response.plugin = pinID
                response.completedStage = .identity
                response.info = identity.info
                response.profileID = profileID
                return .proceed(response)
            case .failure(let error):
                try db.execute(sql: "DELETE FROM flows WHERE id = ?", arguments: [flow.id])
                return .refuse(ServerError(error))
            }
        }
        return try json(try decision.get())
    }

    private func newProfileID(_ db: Database) throws -> String {
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<16 {
            let id = String((0..<6).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
            let taken = try Bool.fetchOne(
                db,
                sql: "SELECT 1 FROM profiles WHERE id = ? UNION SELECT 1 FROM flows WHERE profile_id = ?",
                arguments: [id, id]
            )
            if taken != true { return id }
        }
        throw ServerError(503, "temporarily_unavailable", "Could not allocate a profile id; try again.")
    }

    private func applyEnrolment(
        _ outcome: AuthenticationOutcome,
        flow: FlowRecord,
        proof: DPoP.VerifiedProof
    ) async throws -> WireResponse {
        let now = now
        let decision = try await store.pool.write { db -> Decision<FlowResponse> in
            try self.recordProof(proof, db)
            try self.claim(flow, db)
            switch outcome {
            case .challenge(let challenge):
                return .proceed(
                    try self.continueFlow(flow, challenge: challenge.payload, session: challenge.session, db)
                )
            case .success(let success):
                guard let profileID = flow.profileID, let registration = success.registration else {
                    throw ServerError(500, "server_error", "The PIN enrolment produced no registration.")
                }
                var response = FlowResponse(flowID: flow.id, stage: .done)
                response.completedStage = .pinEnrolment
                response.profileID = profileID
                if flow.kind == .registration {
                    guard let subject = flow.subject, let identityProvider = flow.identityProvider,
                        let profileKey = flow.profileKey
                    else {
                        throw ServerError(500, "server_error", "The registration flow is incomplete.")
                    }
                    // A re-registration replaces the device key: the old profile's sessions end.
                    try db.execute(sql: "DELETE FROM families WHERE profile_id = ?", arguments: [profileID])
                    try db.execute(
                        sql: """
                            INSERT INTO profiles (id, client_id, identity_provider, subject, scope, key_thumbprint, failures, created_at)
                            VALUES (?, ?, ?, ?, ?, ?, 0, ?)
                            ON CONFLICT(id) DO UPDATE SET scope = excluded.scope, key_thumbprint = excluded.key_thumbprint, failures = 0
                            """,
                        arguments: [profileID, flow.clientID, identityProvider, subject, flow.scope, profileKey, now]
                    )
                    response.tokens = try self.issueTokens(
                        profileID: profileID,
                        keyThumbprint: profileKey,
                        scope: flow.scope,
                        family: nil,
                        db
                    )
                } else {
                    try db.execute(sql: "UPDATE profiles SET failures = 0 WHERE id = ?", arguments: [profileID])
                }
                try db.execute(
                    sql: """
                        INSERT INTO registrations (profile_id, authenticator, data, created_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT(profile_id, authenticator) DO UPDATE SET data = excluded.data, created_at = excluded.created_at
                        """,
                    arguments: [profileID, flow.plugin, registration, now]
                )
                try db.execute(sql: "DELETE FROM flows WHERE id = ?", arguments: [flow.id])
                return .proceed(response)
            case .failure(let failure):
                try db.execute(sql: "DELETE FROM flows WHERE id = ?", arguments: [flow.id])
                return .refuse(ServerError(failure.error))
            case .notApplicable:
                throw ServerError.invalidRequest("The PIN authenticator did not accept the message.")
            }
        }
        return try json(try decision.get())
    }

    private func applyAuthentication(
        _ outcome: AuthenticationOutcome,
        flow: FlowRecord,
        proof: DPoP.VerifiedProof
    ) async throws -> WireResponse {
        let maximum = configuration.maxPinFailures
        let pinID = pinAuthenticator.descriptor.id
        let decision = try await store.pool.write { db -> Decision<FlowResponse> in
            guard let profileID = flow.profileID,
                let profile = try Row.fetchOne(db, sql: "SELECT * FROM profiles WHERE id = ?", arguments: [profileID])
            else {
                try db.execute(sql: "DELETE FROM flows WHERE id = ?", arguments: [flow.id])
                return .refuse(.userDeregistered)
            }
            try self.recordProof(proof, db)
            try self.claim(flow, db)
            switch outcome {
            case .challenge(let challenge):
                if challenge.reservesAttempt {
                    // The one place attempts are counted: atomically, never past the maximum.
                    try db.execute(
                        sql: "UPDATE profiles SET failures = failures + 1 WHERE id = ? AND (? = 0 OR failures < ?)",
                        arguments: [profileID, maximum, maximum]
                    )
                    guard db.changesCount == 1 else {
                        try self.deregisterProfile(profileID, db)
                        return .refuse(.userDeregistered)
                    }
                    try db.execute(sql: "UPDATE flows SET attempt_reserved = 1 WHERE id = ?", arguments: [flow.id])
                }
                return .proceed(
                    try self.continueFlow(flow, challenge: challenge.payload, session: challenge.session, db)
                )
            case .success(let success):
                try db.execute(sql: "UPDATE profiles SET failures = 0 WHERE id = ?", arguments: [profileID])
                if let registration = success.registration {
                    try db.execute(
                        sql: "UPDATE registrations SET data = ? WHERE profile_id = ? AND authenticator = ?",
                        arguments: [registration, profileID, flow.plugin]
                    )
                }
                var response = FlowResponse(flowID: flow.id, stage: .done)
                response.completedStage = .authentication
                response.profileID = profileID
                response.info = success.info
                if flow.kind == .changePin {
                    try db.execute(
                        sql:
                            "UPDATE flows SET stage = 'pinEnrolment', plugin = ?, session = NULL, attempt_reserved = 0 WHERE id = ?",
                        arguments: [pinID, flow.id]
                    )
                    response.stage = .pinEnrolment
                    response.plugin = pinID
                } else {
                    response.tokens = try self.issueTokens(
                        profileID: profileID,
                        keyThumbprint: profile["key_thumbprint"],
                        scope: profile["scope"],
                        family: nil,
                        db
                    )
                    try db.execute(sql: "DELETE FROM flows WHERE id = ?", arguments: [flow.id])
                }
                return .proceed(response)
            case .failure(let failure):
                try db.execute(sql: "DELETE FROM flows WHERE id = ?", arguments: [flow.id])
                if failure.countsAsAttempt, !flow.attemptReserved {
                    try db.execute(
                        sql: "UPDATE profiles SET failures = failures + 1 WHERE id = ? AND (? = 0 OR failures < ?)",
                        arguments: [profileID, maximum, maximum]
                    )
                }
                let failures =
                    try Int.fetchOne(db, sql: "SELECT failures FROM profiles WHERE id = ?", arguments: [profileID]) ?? 0
                if failure.countsAsAttempt, maximum > 0, failures >= maximum {
                    try self.deregisterProfile(profileID, db)
                    return .refuse(.userDeregistered)
                }
                var error = failure.error
                if failure.countsAsAttempt {
                    error.details.remainingFailureCount = maximum == 0 ? nil : maximum - failures
                }
                return .refuse(ServerError(error, failureCounts: FailureCounts(maximum: maximum, previous: failures)))
            case .notApplicable:
                throw ServerError.invalidRequest("The authenticator did not accept the message.")
            }
        }
        return try json(try decision.get())
    }

    /// Removes a profile and everything that hangs off it: registrations and tokens. Its open
    /// flows stay until used or expired, so a request in flight learns the user was deregistered.
    func deregisterProfile(_ profileID: String, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM profiles WHERE id = ?", arguments: [profileID])
        logger.notice("Profile deregistered", metadata: ["profile": "\(profileID)"])
    }
}
