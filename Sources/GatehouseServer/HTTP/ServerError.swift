import Foundation
import GatehouseKernel
import GatehouseProtocol

/// A refusal, as it goes on the wire: an HTTP status and an OAuth-style error body.
struct ServerError: Error {
    var status: Int
    var body: ErrorBody
    var headers: [String: String] = [:]

    /// `code`: a number of the portal API's own (not a Gatehouse domain's).
    init(_ status: Int, _ error: String, _ description: String, code: Int? = nil) {
        self.status = status
        self.body = ErrorBody(error: error, errorDescription: description, gatehouseCode: code)
    }

    /// A refusal with a Gatehouse code, named with its domain so the SDK rebuilds exactly it.
    init<Domain: ErrorDomain>(_ status: Int, _ error: String, _ description: String, code: GatehouseError<Domain>.Code?)
    {
        self.status = status
        self.body = ErrorBody(
            error: error,
            errorDescription: description,
            gatehouseCode: code?.rawValue,
            gatehouseDomain: code.map { _ in Domain.name },
            gatehouseCodeName: code?.name,
            gatehouseCodePlugin: code?.plugin?.rawValue
        )
    }

    static func invalidRequest(_ description: String) -> ServerError {
        ServerError(400, "invalid_request", description)
    }
    /// A refused DPoP proof: 400 at the authorization server's endpoints (RFC 9449 §5); a request
    /// that presents an access token gets 401 with a challenge instead (§7.1, see
    /// ``atResource(_:)``).
    static func invalidProof(_ description: String) -> ServerError {
        ServerError(400, "invalid_dpop_proof", description)
    }
    /// The proof carries no nonce, or a stale one: the client retries with the `DPoP-Nonce` sent.
    static func useDPoPNonce(_ description: String) -> ServerError {
        ServerError(400, "use_dpop_nonce", description)
    }
    static func invalidToken(_ description: String) -> ServerError {
        var error = ServerError(401, "invalid_token", description)
        error.headers["WWW-Authenticate"] = dpopChallenge("invalid_token")
        return error
    }

    /// `WWW-Authenticate` for a DPoP-protected resource (RFC 9449 §7.1).
    static func dpopChallenge(_ error: String) -> String {
        #"DPoP error="\#(error)", algs="\#(DPoP.algorithms.joined(separator: " "))""#
    }

    /// This refusal as a protected resource gives it: a proof problem is 401 with a challenge.
    func atResource() -> ServerError {
        guard ["invalid_dpop_proof", "use_dpop_nonce"].contains(body.error) else { return self }
        var error = self
        error.status = 401
        error.headers["WWW-Authenticate"] = Self.dpopChallenge(body.error)
        return error
    }
    static func invalidGrant(_ description: String) -> ServerError {
        ServerError(400, "invalid_grant", description)
    }
    static func invalidGrant<Domain>(_ description: String, code: GatehouseError<Domain>.Code) -> ServerError {
        ServerError(400, "invalid_grant", description, code: code)
    }
    static let userDeregistered = ServerError.invalidGrant(
        GenericError(.userDeregistered).message,
        code: GenericError.Code.userDeregistered
    )

    /// The wire form of a plugin's or the kernel's error.
    /// `temporary`: the plugin could not decide (its backing service failed), so an identity
    /// provider's failure is 502, not a refusal.
    init(
        _ error: any DomainError,
        failureCounts: FailureCounts? = nil,
        status overriding: Int? = nil,
        temporary: Bool = false
    ) {
        // A plugin's own code says nothing about HTTP, whatever its number: a refusal.
        let (status, name): (Int, String) =
            switch (error.codePlugin == nil ? error.domainName : "", error.codeNumber) {
            case (GenericDomain.name, GenericError.Code.requestInvalid.rawValue): (400, "invalid_request")
            case (GenericDomain.name, GenericError.Code.configurationInvalid.rawValue): (500, "server_error")
            case (GenericDomain.name, GenericError.Code.actionAlreadyInProgress.rawValue):
                (429, "temporarily_unavailable")
            case (RegistrationDomain.name, RegistrationError.Code.externalIdentityProviderFailure.rawValue):
                // The provider said no (a code its login refused) is a refusal; it failed is not.
                temporary ? (502, "temporarily_unavailable") : (400, "invalid_grant")
            case (RegistrationDomain.name, RegistrationError.Code.invalidIdentityProvider.rawValue):
                (400, "invalid_request")
            case (AuthenticationDomain.name, AuthenticationError.Code.authenticatorUnavailable.rawValue):
                (503, "temporarily_unavailable")
            default: (400, "invalid_grant")
            }
        self.status = overriding ?? status
        if self.status == 429 { headers["Retry-After"] = "1" }
        if self.status == 503 { headers["Retry-After"] = "5" }
        self.body = ErrorBody(
            error: name,
            errorDescription: error.message,
            gatehouseCode: error.codeNumber,
            gatehouseDomain: error.domainName,
            gatehouseCodeName: error.codeName,
            gatehouseCodePlugin: error.codePlugin?.rawValue,
            remainingFailureCount: failureCounts?.remaining,
            maxFailureCount: failureCounts.map(\.maximum),
            customInfo: error.details.customInfo
        )
    }

    var response: WireResponse {
        var headers = headers
        headers["Content-Type"] = "application/json"
        headers["Cache-Control"] = "no-store"
        return WireResponse(status: status, headers: headers, body: (try? WireCoding.encode(body)) ?? Data())
    }
}
