import GatehouseKernel
import GatehouseProtocol

/// Turns a server's error body back into the domain error it stands for, so callers catch the
/// same error types in-process and over HTTP.
enum WireErrors {
    /// Which operation the error answers: its own domain's codes come first.
    enum Context: Sendable {
        case flows, mobileAuthEnrollment, mobileAuthRequest
    }

    static func domainError(_ body: ErrorBody, status: Int, context: Context = .flows) -> any DomainError {
        let details = ErrorDetails(remainingFailureCount: body.remainingFailureCount, customInfo: body.customInfo)
        let message = body.errorDescription
        // Numbers shared by several domains (9010) resolve in this order, the flows' own first.
        if let code = body.gatehouseCode {
            func match<Domain: ErrorDomain>(_: Domain.Type) -> (any DomainError)? {
                Domain.knownCodes.first { $0.rawValue == code }.map {
                    GatehouseError<Domain>($0, message: message, details: details)
                }
            }
            let own: (any DomainError)? =
                switch context {
                case .flows: nil
                case .mobileAuthEnrollment: match(MobileAuthEnrollmentDomain.self)
                case .mobileAuthRequest: match(MobileAuthRequestDomain.self)
                }
            if let own { return own }
            if let known = match(GenericDomain.self) ?? match(PinValidationDomain.self) ?? match(
                AuthenticationDomain.self
            )
                ?? match(RegistrationDomain.self) ?? match(DeregistrationDomain.self)
                ?? match(MobileAuthRequestDomain.self) ?? match(MobileAuthEnrollmentDomain.self)
                ?? match(AppToWebSingleSignOnDomain.self)
            {
                return known
            }
        }
        switch body.error {
        case "invalid_token": return AuthenticationError(.userNotAuthenticated, message: message)
        case "invalid_client": return GenericError(.deviceDeregistered, message: message)
        case "server_error", "temporarily_unavailable": return GenericError(.unknown, message: message)
        default: return GenericError(.requestInvalid, message: "\(message) (\(body.error), HTTP \(status))")
        }
    }
}
