import Foundation
import GatehouseKernel
import GatehouseProtocol

/// A refusal, as it goes on the wire: an HTTP status and an OAuth-style error body.
struct ServerError: Error {
    var status: Int
    var body: ErrorBody
    var headers: [String: String] = [:]

    init(_ status: Int, _ error: String, _ description: String, code: Int? = nil) {
        self.status = status
        self.body = ErrorBody(error: error, errorDescription: description, gatehouseCode: code)
    }

    static func invalidRequest(_ description: String) -> ServerError {
        ServerError(400, "invalid_request", description)
    }
    static func invalidProof(_ description: String) -> ServerError {
        var error = ServerError(401, "invalid_dpop_proof", description)
        error.headers["WWW-Authenticate"] = #"DPoP error="invalid_dpop_proof""#
        return error
    }
    static func invalidToken(_ description: String) -> ServerError {
        var error = ServerError(401, "invalid_token", description)
        error.headers["WWW-Authenticate"] = #"DPoP error="invalid_token""#
        return error
    }
    static func invalidGrant(_ description: String, code: Int? = nil) -> ServerError {
        ServerError(400, "invalid_grant", description, code: code)
    }
    static let userDeregistered = ServerError.invalidGrant(
        GenericError(.userDeregistered).message,
        code: GenericError.Code.userDeregistered.rawValue
    )

    /// The wire form of a plugin's or the kernel's error.
    init(_ error: any DomainError, failureCounts: FailureCounts? = nil, status overriding: Int? = nil) {
        let (status, name): (Int, String) =
            switch (error.domainName, error.codeNumber) {
            case (GenericDomain.name, GenericError.Code.requestInvalid.rawValue): (400, "invalid_request")
            case (GenericDomain.name, GenericError.Code.configurationInvalid.rawValue): (500, "server_error")
            case (GenericDomain.name, GenericError.Code.actionAlreadyInProgress.rawValue):
                (429, "temporarily_unavailable")
            case (RegistrationDomain.name, RegistrationError.Code.externalIdentityProviderFailure.rawValue):
                (502, "temporarily_unavailable")
            case (RegistrationDomain.name, RegistrationError.Code.invalidIdentityProvider.rawValue):
                (400, "invalid_request")
            default: (400, "invalid_grant")
            }
        self.status = overriding ?? status
        if self.status == 429 { headers["Retry-After"] = "1" }
        self.body = ErrorBody(
            error: name,
            errorDescription: error.message,
            gatehouseCode: error.codeNumber,
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
