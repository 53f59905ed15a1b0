import GatehouseKernel
import GatehouseProtocol

/// Turns a server's error body back into the domain error it stands for, so callers catch the
/// same error types in-process and over HTTP.
enum WireErrors {
    static func domainError(_ body: ErrorBody, status: Int) -> any DomainError {
        let details = ErrorDetails(remainingFailureCount: body.remainingFailureCount, customInfo: body.customInfo)
        let message = body.errorDescription
        if let code = body.gatehouseCode {
            for candidate: GenericError.Code in [
                .networkConnectivityFailure, .serverNotReachable, .deviceDeregistered, .userDeregistered,
                .actionCancelled,
                .actionAlreadyInProgress, .unknown, .configurationInvalid, .requestInvalid,
            ] where candidate.rawValue == code {
                return GenericError(candidate, message: message, details: details)
            }
            for candidate: PinValidationError.Code in [
                .blacklisted, .sequence, .similarDigits, .tooShort, .tooLong, .notNumeric,
            ]
            where candidate.rawValue == code {
                return PinValidationError(candidate, message: message, details: details)
            }
            for candidate: AuthenticationError.Code in [
                .invalidPin, .userNotAuthenticated, .authenticatorInvalid, .authenticatorDeregistered,
                .customAuthenticatorFailure, .biometricAuthenticatorFailure, .authenticatorNotRegistered,
                .customAuthenticationDisabled, .noApplicableAuthenticator,
            ] where candidate.rawValue == code {
                return AuthenticationError(candidate, message: message, details: details)
            }
            for candidate: RegistrationError.Code in [
                .deviceRegistrationFailure, .invalidState, .invalidIdentityProvider, .customRegistrationExpired,
                .customRegistrationFailure, .externalIdentityProviderFailure,
            ] where candidate.rawValue == code {
                return RegistrationError(candidate, message: message, details: details)
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
