import Crypto
import Foundation
import GatehouseKernel
public import GatehouseProtocol

// The session: token rotation, the example resource, and what an app needs to call its own
// resource servers with DPoP.

extension UserClient {
    /// Rotates the session's tokens with its refresh token. A refusal ends the session (it throws
    /// `userNotAuthenticated`); a server that was not reached, an answer lost on the way, or a
    /// 502, 503 or 504 (busy, restarting, failing over) keeps it and throws the error as it came,
    /// for the app to try again.
    public func refreshSession() async throws {
        guard let current = session else { throw AuthenticationError(.userNotAuthenticated) }
        do {
            let tokens: TokenResponse = try await calls.exchange(
                "POST",
                Endpoint.token,
                body: TokenRequest(grantType: "refresh_token", refreshToken: current.tokens.refreshToken),
                key: current.key
            )
            session?.tokens = tokens
        } catch let refusal as ServerCalls.Refusal where [502, 503, 504].contains(refusal.status) {
            // Busy, restarting, failing over: the session is kept, to be refreshed again.
            throw refusal.error
        } catch let refusal as ServerCalls.Refusal {
            throw endSession(refusal.error)
        } catch let error as any DomainError where !Self.mayRetryRefresh(error) {
            throw endSession(error)
        }
    }

    /// Failures after which the session is kept: the server was not reached, or its answer was
    /// lost. A rotation that did commit behind a lost answer makes the next refresh reuse, which
    /// revokes the family and ends the session then: nothing is lost by trying, and a refresh
    /// that never reached the database keeps the user signed in.
    private static func mayRetryRefresh(_ error: any DomainError) -> Bool {
        [GenericError.Code.serverNotReachable.name, GenericError.Code.networkConnectivityFailure.name]
            .contains(error.codeName)
    }

    private func endSession(_ error: any DomainError) -> AuthenticationError {
        session = nil
        return AuthenticationError(
            .userNotAuthenticated,
            message: "The session ended (\(error.message)); authenticate again."
        )
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
