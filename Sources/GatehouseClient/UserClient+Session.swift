import Crypto
import Foundation
import GatehouseKernel
public import GatehouseProtocol

// The session: token rotation, the example resource, and what an app needs to call its own
// resource servers with DPoP.

extension UserClient {
    /// Rotates the session's tokens with its refresh token.
    public func refreshSession() async throws {
        guard let current = session else { throw AuthenticationError(.userNotAuthenticated) }
        do {
            let tokens: TokenResponse = try await calls.call(
                "POST",
                Endpoint.token,
                body: TokenRequest(grantType: "refresh_token", refreshToken: current.tokens.refreshToken),
                key: current.key
            )
            session?.tokens = tokens
        } catch let error as any DomainError where error.codeName != GenericError.Code.serverNotReachable.name {
            session = nil
            throw AuthenticationError(
                .userNotAuthenticated,
                message: "The session ended (\(error.message)); authenticate again."
            )
        }
    }

    /// Calls the server's example protected resource with the session's DPoP-bound token.
    public func fetchProfileResource() async throws -> ProfileResource {
        try await authorized { token, key in
            try await self.calls.call("GET", Endpoint.profileResource, key: key, accessToken: token)
        }
    }

    /// The session's current tokens, for apps that call their own resource servers with DPoP.
    public var sessionTokens: TokenResponse? { session?.tokens }

    /// A DPoP proof for a request to one of the app's own resource servers.
    public func dpopProof(method: String, url: String) throws -> String {
        guard let current = session else { throw AuthenticationError(.userNotAuthenticated) }
        return try DPoP.proof(
            method: method,
            url: url,
            accessToken: current.tokens.accessToken,
            key: current.key,
            now: configuration.clock.now
        )
    }
}
