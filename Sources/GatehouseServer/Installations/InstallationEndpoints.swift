import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

// An installation's first calls: the server's configuration, then its key registered.

extension TokenServer {
    func serverConfiguration() -> ServerConfigurationResponse {
        ServerConfigurationResponse(
            identityProviders: identityProviders.map {
                .init(
                    id: $0.descriptor.id,
                    type: $0.descriptor.type.rawValue,
                    name: $0.descriptor.name,
                    isDefault: $0.descriptor.id == defaultIdentityProvider.descriptor.id,
                    config: publishedConfiguration[$0.descriptor.id]
                )
            },
            authenticators: authenticators.map {
                .init(
                    id: $0.descriptor.id,
                    type: $0.descriptor.type.rawValue,
                    name: $0.descriptor.name,
                    kind: $0.kind,
                    config: publishedConfiguration[$0.descriptor.id]
                )
            },
            maxPinFailures: configuration.maxPinFailures
        )
    }

    func registerClient(_ request: WireRequest) async throws -> WireResponse {
        try limit(request, by: registrationLimiter)
        let body = try decodeBody(ClientRegistrationRequest.self, request)
        let proof = try proof(request)
        guard body.publicKey.verifyingKey() != nil else {
            throw ServerError.invalidRequest("public_key is not a P-256, P-384 or Ed25519 public key.")
        }
        guard proof.keyThumbprint == body.publicKey.thumbprint else {
            throw ServerError.invalidProof("The DPoP proof must be signed by the key being registered.")
        }
        // A configuration problem, not a removed device: the app must not wipe its data (the seed's 10001).
        guard configuration.clients.contains(where: { $0.id == body.appID }) else {
            throw ServerError(
                400,
                "invalid_client_metadata",
                "The server knows no application \"\(body.appID.prefix(64))\"; check the app id in the app's configuration.",
                code: GenericError.Code.configurationInvalid
            )
        }
        let clientID = try await store.registerClient(
            appID: body.appID,
            proof: proof,
            limit: installationLimit,
            address: request.clientAddress
        )
        return try json(ClientRegistrationResponse(clientID: clientID), status: 201)
    }
}
