import Crypto
import Foundation
import GatehouseKernel
public import GatehouseProtocol
import Logging

// The standard OAuth surface: the token endpoint's grants, revocation (RFC 7009), introspection
// for resource servers (RFC 7662) and the server's metadata (RFC 8414). Requests may be forms or
// JSON; refusals are RFC 6749 §5.2 error bodies.

extension TokenServer: TokenIntrospecting {
    func token(_ request: WireRequest) async throws -> WireResponse {
        let body = try decodeBody(TokenRequest.self, request, oauth: true)
        switch body.grantType {
        case GrantType.refreshToken:
            return try await refresh(body, request)
        case GrantType.clientCredentials where request.header("Authorization") != nil:
            // HTTP Basic: an admin client (devices authenticate with their DPoP key alone).
            return try await issueAdminToken(body, request)
        case GrantType.clientCredentials:
            let requested = try scopes(body.scope)
            let tokens = try await store.issueDeviceToken(
                proof: try proof(request),
                lifetime: configuration.accessTokenLifetime
            ) { appID, _ in
                let allowed = try self.application(appID).deviceScopes
                guard !allowed.isEmpty else {
                    throw ServerError(
                        400,
                        "unauthorized_client",
                        "Device authentication is off for \(appID) (server.clients[].deviceScopes is empty)."
                    )
                }
                return try Self.grantedScope(requested, within: allowed)
            }
            return try json(tokens)
        case GrantType.implicit:
            guard let profileID = body.profileID, (1...64).contains(profileID.utf8.count) else {
                throw ServerError.invalidRequest("Invalid field profile_id: required key is missing.")
            }
            let requested = try scopes(body.scope)
            let tokens = try await store.issueImplicitToken(
                profileID: profileID,
                proof: try proof(request),
                lifetime: configuration.accessTokenLifetime
            ) { appID, registered in
                let allowed = try self.application(appID).implicitScopes
                guard !allowed.isEmpty else {
                    throw ServerError(
                        400,
                        "unauthorized_client",
                        "Implicit authentication is off for \(appID) (server.clients[].implicitScopes is empty)."
                    )
                }
                // Never more than the registration was granted (the seed's rule), nor than implicit allows.
                let registeredScopes = Set((registered ?? "").split(separator: " ").map(String.init))
                return try Self.grantedScope(requested, within: allowed.filter(registeredScopes.contains))
            }
            return try json(tokens)
        default:
            throw ServerError(
                400,
                "unsupported_grant_type",
                "grant_type must be one of \(GrantType.all.joined(separator: ", "))."
            )
        }
    }

    private func refresh(_ body: TokenRequest, _ request: WireRequest) async throws -> WireResponse {
        guard let refreshToken = body.refreshToken, !refreshToken.isEmpty else {
            throw ServerError.invalidRequest("Invalid field refresh_token: required key is missing.")
        }
        guard refreshToken.utf8.count <= 512 else { throw ServerError.invalidGrant("The refresh token is not valid.") }
        let proof = try proof(request)
        switch try await store.refresh(refreshToken, proof: proof) {
        case .rotated(let tokens):
            return try json(tokens)
        case .refused(let refusal):
            throw ServerError(refusal)
        case .reused(let profileID):
            metrics.event("refresh_token_reuse")
            audit.warning(
                "Refresh token reused; session revoked",
                metadata: ["event": "refresh_token_reuse", "profile": "\(profileID)"]
            )
            throw ServerError.invalidGrant("The refresh token was already used; the session was revoked.")
        }
    }

    /// The manifest's application `id`.
    private func application(_ id: String) throws -> ServerConfiguration.Client {
        guard let client = configuration.clients.first(where: { $0.id == id }) else {
            throw ServerError(400, "unauthorized_client", "The application \(id) is no longer configured.")
        }
        return client
    }

    /// The `scope` parameter's scopes (RFC 6749 §3.3), or nil when absent.
    private func scopes(_ scope: String?) throws -> [String]? {
        guard let scope else { return nil }
        let scopes = scope.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard scope.utf8.count <= 1024, !scopes.isEmpty,
            scopes.allSatisfy(ServerConfiguration.Client.isScopeToken)
        else { throw ServerError(400, "invalid_scope", "scope must be space-separated scope names.") }
        return scopes
    }

    /// The scope to grant: what was asked for when all of it is allowed, or all that is allowed
    /// when nothing was asked for.
    static func grantedScope(_ requested: [String]?, within allowed: [String]) throws -> String {
        guard let requested else {
            guard !allowed.isEmpty else { throw ServerError(400, "invalid_scope", "No scope can be granted.") }
            return allowed.joined(separator: " ")
        }
        let refused = requested.filter { !allowed.contains($0) }
        guard refused.isEmpty else {
            throw ServerError(
                400,
                "invalid_scope",
                "Not allowed here: \(refused.joined(separator: " ")); allowed: \(allowed.joined(separator: " "))."
            )
        }
        return requested.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }.joined(separator: " ")
    }

    func revoke(_ request: WireRequest) async throws -> WireResponse {
        let body = try decodeBody(RevocationRequest.self, request, oauth: true)
        // An unknown token_type_hint is ignored (RFC 7009 §2.1): the token is looked up anyway.
        guard !body.token.isEmpty else { throw ServerError.invalidRequest("Invalid field token: empty.") }
        // No token this server issued is that long: nothing to revoke.
        guard body.token.utf8.count <= 512 else { return try json([String: String]()) }
        try await store.revoke(body.token, proof: try proof(request))
        return try json([String: String]())
    }

    // MARK: - Introspection (RFC 7662)

    func introspect(_ request: WireRequest) async throws -> WireResponse {
        let resourceServer = try await authenticatedResourceServer(request)
        let body = try decodeBody(IntrospectionRequest.self, request, oauth: true)
        let answer = try await introspect(body.token)
        logger.trace("Introspected", metadata: ["resourceServer": "\(resourceServer)", "active": "\(answer.active)"])
        return json(encoded: answer.wireJSON)
    }

    /// What introspection reports of `token` now, for a resource server in the same process.
    public func introspect(_ token: String) async throws -> IntrospectionResponse {
        guard !token.isEmpty, token.utf8.count <= 512 else { return .inactive }
        var answer = try await store.introspect(token, now: now)
        if answer.active { answer.iss = publicURL }
        return answer
    }

    /// The resource server whose HTTP Basic credentials the request carries.
    private func authenticatedResourceServer(_ request: WireRequest) async throws -> String {
        let servers = configuration.resourceServers
        let index = try await basicCredential(
            request,
            among: resourceServerCredentials,
            formEncoded: true,
            refusal: ServerError(
                401,
                "invalid_client",
                "Authenticate the resource server with HTTP Basic credentials (server.resourceServers)."
            )
        )
        return servers[index].id
    }

    // MARK: - Metadata (RFC 8414)

    func metadata() -> AuthorizationServerMetadata {
        let base = publicURL
        var scopes: [String] = []
        for client in configuration.clients {
            for scope in client.allowedScopes + client.deviceScopes where !scopes.contains(scope) {
                scopes.append(scope)
            }
        }
        return AuthorizationServerMetadata(
            issuer: base,
            tokenEndpoint: base + Endpoint.token,
            revocationEndpoint: base + Endpoint.revoke,
            introspectionEndpoint: base + Endpoint.introspect,
            // The hosted login's codes are redeemed by the idp.browser plugin in-process, not at
            // the token endpoint: no authorization endpoint or response type is offered.
            responseTypesSupported: [],
            grantTypesSupported: GrantType.all,
            scopesSupported: scopes,
            codeChallengeMethodsSupported: ["S256"],
            // Public clients: each installation proves its key with DPoP on every request.
            tokenEndpointAuthMethodsSupported: ["none"],
            revocationEndpointAuthMethodsSupported: ["none"],
            introspectionEndpointAuthMethodsSupported: ["client_secret_basic"],
            dpopSigningAlgValuesSupported: DPoP.algorithms
        )
    }
}
