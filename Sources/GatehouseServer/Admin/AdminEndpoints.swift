import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

// The admin API (`/v1/admin/…`): an admin client's token from the token endpoint
// (client_credentials with HTTP Basic), then reads with `admin:read` and changes with
// `admin:write`. Every change goes through ``AdminService``, which audits it.

extension TokenServer {
    /// `client_credentials` with an admin client's HTTP Basic credentials: an access token for
    /// the admin API, DPoP-bound when the request carries a proof (required with `requireDPoP`).
    func issueAdminToken(_ body: TokenRequest, _ request: WireRequest) async throws -> WireResponse {
        let clients = configuration.admin.clients
        let index = try await basicCredential(
            request,
            among: adminCredentials,
            formEncoded: true,
            refusal: ServerError(401, "invalid_client", "The admin client's id or secret is not right.")
        )
        let client = clients[index]
        var granted = client.scopes
        if let requested = body.scope?.split(separator: " ").map(String.init), !requested.isEmpty {
            let scopes = requested.compactMap(AdminScope.init(rawValue:))
            guard scopes.count == requested.count, scopes.allSatisfy(client.scopes.contains) else {
                throw ServerError(
                    400,
                    "invalid_scope",
                    "This admin client may be granted \(client.scopes.map(\.rawValue).joined(separator: " ")) only."
                )
            }
            granted = AdminScope.allCases.filter(scopes.contains)
        }
        var proof: ServerStore.ProofUse?
        if request.header("DPoP") != nil {
            proof = try self.proof(request)
        } else if client.requireDPoP {
            throw ServerError.invalidProof("This admin client's tokens are DPoP-bound: send a DPoP proof.")
        }
        let scope = granted.map(\.rawValue).joined(separator: " ")
        let lifetime = configuration.admin.tokenLifetime
        let token = try await store.issueAdminToken(
            clientID: client.id,
            scope: scope,
            keyThumbprint: proof?.keyThumbprint,
            proof: proof,
            now: now,
            lifetime: lifetime
        )
        return try json(
            AccessTokenResponse(
                accessToken: token,
                tokenType: proof == nil ? "Bearer" : "DPoP",
                expiresIn: lifetime,
                scope: scope
            )
        )
    }

    /// The admin client a request's token names, refused unless it grants `scope`.
    private func adminCaller(_ request: WireRequest, needs scope: AdminScope) async throws -> AdminActor {
        func unauthorized(_ description: String) -> ServerError {
            var error = ServerError(401, "invalid_token", description)
            error.headers["WWW-Authenticate"] = #"Bearer error="invalid_token", DPoP algs="ES256""#
            return error
        }
        guard let authorization = request.header("Authorization"), authorization.utf8.count <= 600 else {
            throw unauthorized("An admin access token is required (Authorization: Bearer <token>, or DPoP).")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, ["bearer", "dpop"].contains(parts[0].lowercased()), !parts[1].isEmpty else {
            throw unauthorized("The Authorization header must be \"Bearer <token>\" or \"DPoP <token>\".")
        }
        let token = String(parts[1])
        guard let granted = try await store.adminToken(token, now: now),
            let client = configuration.admin.clients.first(where: { $0.id == granted.clientID })
        else { throw unauthorized("The admin access token is not valid or has expired.") }
        if let boundKey = granted.keyThumbprint {
            guard parts[0].lowercased() == "dpop" else {
                throw unauthorized("This admin access token is DPoP-bound: send it as \"DPoP <token>\" with a proof.")
            }
            let proof = try self.proof(request, accessToken: token)
            guard proof.keyThumbprint == boundKey else {
                throw ServerError.invalidProof("The DPoP proof is not signed by the key the token is bound to.")
            }
            try await store.recordAdminProof(proof)
        } else if parts[0].lowercased() == "dpop" {
            throw unauthorized("This admin access token is not DPoP-bound: send it as \"Bearer <token>\".")
        }
        let scopes = granted.scope.split(separator: " ").compactMap { AdminScope(rawValue: String($0)) }
        guard scopes.contains(scope), client.scopes.contains(scope) else {
            var error = ServerError(403, "insufficient_scope", "This request needs the scope \(scope.rawValue).")
            error.headers["WWW-Authenticate"] = #"Bearer error="insufficient_scope", scope="\#(scope.rawValue)""#
            throw error
        }
        return .client(client.id)
    }

    // MARK: - Reads

    func adminFindUsers(_ request: WireRequest) async throws -> WireResponse {
        _ = try await adminCaller(request, needs: .read)
        let query = try AdminQuery(
            request,
            allowing: ["identity_provider", "subject", "subject_prefix", "profile_id", "installation_id", "limit"]
        )
        let search = UserSearch(
            identityProvider: query["identity_provider"],
            subject: query["subject"],
            subjectPrefix: query["subject_prefix"],
            profileID: query["profile_id"],
            installationID: query["installation_id"],
            limit: try query.integer("limit", in: 1...200) ?? 50
        )
        let users = try await admin.answering { try await $0.findUsers(search) }
        return try adminJSON(["users": users])
    }

    func adminUser(_ request: WireRequest) async throws -> WireResponse {
        _ = try await adminCaller(request, needs: .read)
        let query = try AdminQuery(request, allowing: ["identity_provider", "subject"])
        guard let provider = query["identity_provider"], let subject = query["subject"] else {
            throw ServerError.invalidRequest("Name the user: ?identity_provider=…&subject=….")
        }
        guard let user = try await admin.user(identityProvider: provider, subject: subject) else {
            throw ServerError(404, "user_not_found", "The user has no profile on this server.")
        }
        return try adminJSON(user)
    }

    func adminAudit(_ request: WireRequest) async throws -> WireResponse {
        _ = try await adminCaller(request, needs: .read)
        let query = try AdminQuery(request, allowing: AdminQuery.auditFilters + ["limit", "before"])
        var audit = try query.auditQuery()
        audit.limit = try query.integer("limit", in: 1...1000) ?? 50
        audit.before = try query.integer("before", in: 1...Int.max).map(Int64.init)
        return try adminJSON(try await admin.auditEvents(audit))
    }

    /// The events the filters select, oldest first, one JSON object a line; `after` continues
    /// an export from an event's `seq`, and at most `limit` (default and most 10,000, as the
    /// answer is built in memory) are sent.
    func adminAuditExport(_ request: WireRequest) async throws -> WireResponse {
        _ = try await adminCaller(request, needs: .read)
        let query = try AdminQuery(request, allowing: AdminQuery.auditFilters + ["after", "limit"])
        let filters = try query.auditQuery()
        let limit = try query.integer("limit", in: 1...10_000) ?? 10_000
        var after = Int64(try query.integer("after", in: 0...Int.max) ?? 0)
        var body = Data()
        var sent = 0
        while sent < limit {
            let page = try await admin.exportAuditEvents(filters, after: after, limit: min(1000, limit - sent))
            for record in page {
                body.append(try Self.adminEncoder.encode(record))
                body.append(UInt8(ascii: "\n"))
            }
            sent += page.count
            guard let last = page.last, page.count == min(1000, limit - sent + page.count) else { break }
            after = last.seq
        }
        return WireResponse(
            status: 200,
            headers: ["Content-Type": "application/x-ndjson", "Cache-Control": "no-store"],
            body: body
        )
    }

    // MARK: - Changes

    /// `/v1/admin/profiles/{profileID}[/…]`.
    func adminProfile(_ request: WireRequest, rest: String) async throws -> WireResponse {
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard let profileID = parts.first, !profileID.isEmpty else {
            throw ServerError(404, "not_found", "There is no endpoint \(Endpoint.adminProfilesPrefix)\(rest).")
        }
        guard profileID.utf8.count <= 64 else {
            throw ServerError.invalidRequest("A profile id has at most 64 characters.")
        }
        if parts.count == 3, parts[1] == "authenticators", !(1...128).contains(parts[2].utf8.count) {
            throw ServerError.invalidRequest("Name the authenticator: 1 to 128 characters after authenticators/.")
        }
        let noContent = WireResponse(status: 204, headers: ["Cache-Control": "no-store"], body: Data())
        switch (request.method, parts.count, parts.dropFirst().first) {
        case ("DELETE", 1, _):
            let actor = try await adminCaller(request, needs: .write)
            try await admin.answering { try await $0.deregisterProfile(profileID: profileID, by: actor) }
            return noContent
        case ("POST", 2, "revoke-sessions"):
            let actor = try await adminCaller(request, needs: .write)
            let revoked = try await admin.answering { try await $0.revokeSessions(profileID: profileID, by: actor) }
            return try adminJSON(["revoked": revoked])
        case ("POST", 2, "clear-lockout"):
            let actor = try await adminCaller(request, needs: .write)
            try await admin.answering { try await $0.clearLockout(profileID: profileID, by: actor) }
            return noContent
        case ("DELETE", 2, "push-enrolment"):
            let actor = try await adminCaller(request, needs: .write)
            try await admin.answering { try await $0.disenrolDevice(profileID: profileID, by: actor) }
            return noContent
        case ("DELETE", 3, "authenticators"):
            let actor = try await adminCaller(request, needs: .write)
            try await admin.answering {
                try await $0.removeAuthenticator(parts[2], profileID: profileID, by: actor)
            }
            return noContent
        case (_, 1, _):
            throw Self.methodNotAllowed(request, allowed: "DELETE")
        case (_, 2, "revoke-sessions"), (_, 2, "clear-lockout"):
            throw Self.methodNotAllowed(request, allowed: "POST")
        case (_, 2, "push-enrolment"), (_, 3, "authenticators"):
            throw Self.methodNotAllowed(request, allowed: "DELETE")
        default:
            throw ServerError(404, "not_found", "There is no endpoint \(Endpoint.adminProfilesPrefix)\(rest).")
        }
    }

    // MARK: - Answers

    /// Dates as RFC 3339, keys sorted.
    static let adminEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    private func adminJSON(_ value: some Encodable) throws -> WireResponse {
        WireResponse(
            status: 200,
            headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: try Self.adminEncoder.encode(value)
        )
    }
}

extension AdminService {
    /// Runs `action`, its ``AdminError`` as the admin API answers it.
    func answering<T: Sendable>(_ action: (AdminService) async throws -> T) async throws -> T {
        do {
            return try await action(self)
        } catch let error as AdminError {
            let (status, code): (Int, String) =
                switch error {
                case .profileNotFound: (404, "profile_not_found")
                case .authenticatorNotRegistered: (404, "authenticator_not_registered")
                case .pinCannotBeRemoved: (409, "pin_cannot_be_removed")
                case .notEnrolled: (409, "not_enrolled")
                case .clearingLockoutsNotAllowed: (403, "clearing_lockouts_not_allowed")
                case .searchNeedsAFilter: (400, "invalid_request")
                }
            throw ServerError(status, code, error.description)
        }
    }
}

/// An admin request's query: only the named parameters, each once, each at most 256 characters.
struct AdminQuery {
    private let fields: FormFields

    static let auditFilters = ["identity_provider", "subject", "profile_id", "event", "actor", "since", "until"]

    init(_ request: WireRequest, allowing names: [String]) throws {
        guard let fields = FormFields(queryOf: request.path) else {
            throw ServerError.invalidRequest("The query is malformed (a broken escape, or a parameter given twice).")
        }
        for (name, value) in fields.values {
            guard names.contains(name) else {
                throw ServerError.invalidRequest(
                    "Unknown query parameter \(name.prefix(64)); this endpoint takes \(names.joined(separator: ", "))."
                )
            }
            // Characters as JSON Schema counts them (code points): docs/openapi.yaml says 256.
            guard !value.isEmpty, value.unicodeScalars.count <= 256 else {
                throw ServerError.invalidRequest("The query parameter \(name) must be 1–256 characters.")
            }
        }
        self.fields = fields
    }

    subscript(_ name: String) -> String? { fields[name] }

    func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = fields[name] else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw ServerError.invalidRequest("The query parameter \(name) must be a whole number in \(range).")
        }
        return value
    }

    func date(_ name: String) throws -> Date? {
        guard let text = fields[name] else { return nil }
        guard let date = RFC3339.date(text) else {
            throw ServerError.invalidRequest(
                "The query parameter \(name) must be an RFC 3339 time such as 2026-11-25T12:00:00Z."
            )
        }
        return date
    }

    func auditQuery() throws -> AuditQuery {
        if let event = fields["event"], AuditEvent(rawValue: event) == nil {
            throw ServerError.invalidRequest(
                "Unknown event \(event.prefix(64)); events are \(AuditEvent.allCases.map(\.rawValue).joined(separator: ", "))."
            )
        }
        return AuditQuery(
            identityProvider: fields["identity_provider"],
            subject: fields["subject"],
            profileID: fields["profile_id"],
            event: fields["event"],
            actor: fields["actor"],
            since: try date("since"),
            until: try date("until")
        )
    }
}
