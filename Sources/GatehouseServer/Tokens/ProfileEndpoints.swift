import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

// Endpoints around tokens and a profile's authenticators. Every change goes through the store.

extension TokenServer {
    /// The access token from `Authorization: DPoP <token>`.
    func bearerToken(_ request: WireRequest) throws -> String {
        guard let authorization = request.header("Authorization") else {
            throw ServerError.invalidToken("An access token is required (Authorization: DPoP <token>).")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "dpop", !parts[1].isEmpty, parts[1].utf8.count <= 512 else {
            throw ServerError.invalidToken("The Authorization header must be \"DPoP <access token>\".")
        }
        return String(parts[1])
    }

    func deregister(_ request: WireRequest) async throws -> WireResponse {
        let body = try decodeBody(DeregistrationRequest.self, request)
        if try await store.deregister(body.profileID, proof: try proof(request)) {
            audit.notice("Profile deregistered", metadata: ["event": "deregistration", "profile": "\(body.profileID)"])
        }
        return try json(["deregistered": body.profileID])
    }

    func profileResource(_ request: WireRequest) async throws -> WireResponse {
        let token = try bearerToken(request)
        let session = try await store.useAccessToken(token, proof: try proof(request, accessToken: token))
        return try json(
            ProfileResource(
                profileID: session.profileID,
                subject: session.subject,
                identityProvider: session.identityProvider,
                scope: session.scope
            )
        )
    }

    /// What the server offers, and which of it the session's profile has registered.
    func listAuthenticators(_ request: WireRequest) async throws -> WireResponse {
        let token = try bearerToken(request)
        let registered = Set(
            try await store.registeredAuthenticators(token, proof: try proof(request, accessToken: token))
        )
        // The authenticators as the configuration endpoint lists them, each with whether it is registered.
        return try json(
            AuthenticatorListResponse(
                authenticators: serverConfiguration().authenticators.map {
                    .init($0, registered: registered.contains($0.id))
                }
            )
        )
    }

    /// Forgets one authenticator of the session's profile. The PIN cannot be deregistered.
    func deregisterAuthenticator(_ request: WireRequest) async throws -> WireResponse {
        let token = try bearerToken(request)
        let proof = try proof(request, accessToken: token)
        let body = try decodeBody(AuthenticatorRequest.self, request)
        let authenticator = try hostedAuthenticator(body.authenticator)
        guard authenticator.kind != .pin else {
            throw ServerError(AuthenticationError(.pinDeregistrationNotPossible))
        }
        let profileID = try await store.deregisterAuthenticator(authenticator.descriptor.id, token: token, proof: proof)
        audit.notice(
            "Authenticator deregistered",
            metadata: [
                "event": "authenticator_deregistration", "profile": "\(profileID)",
                "authenticator": "\(authenticator.descriptor.id)",
            ]
        )
        return try json(["deregistered": authenticator.descriptor.id])
    }
}
