// The seed SDK's error domains; their codes are in ErrorDomains+Codes.swift. Numbers follow the
// seed SDK where it has one; where it reused a number for two meanings (10020, 10024) or had none,
// Gatehouse uses a free number so that every code has exactly one meaning. docs/ERRORS.md lists
// the mapping.

/// Errors any operation can raise: connectivity, server state, cancellation, configuration.
public enum GenericDomain: ErrorDomain {
    /// The domain's name, `"Generic"`, as diagnostics and the HTTP error body give it.
    public static let name = "Generic"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [GenericError.Code] {
        [
            .networkConnectivityFailure, .serverNotReachable, .deviceDeregistered, .userDeregistered, .actionCancelled,
            .actionAlreadyInProgress, .dataStorageNotAvailable, .unrecoverableDataState, .unknown,
            .configurationInvalid,
            .requestInvalid,
        ]
    }
}
/// Errors of the PIN policy, raised while creating or changing a PIN.
public enum PinValidationDomain: ErrorDomain {
    /// The domain's name, `"PinValidation"`, as diagnostics and the HTTP error body give it.
    public static let name = "PinValidation"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [PinValidationError.Code] {
        [.blacklisted, .sequence, .similarDigits, .tooShort, .tooLong, .notNumeric]
    }
}
/// Errors of authentication with PIN, biometric or custom authenticators.
public enum AuthenticationDomain: ErrorDomain {
    /// The domain's name, `"Authentication"`, as diagnostics and the HTTP error body give it.
    public static let name = "Authentication"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [AuthenticationError.Code] {
        [
            .invalidPin, .userNotAuthenticated, .authenticatorInvalid, .authenticatorDeregistered,
            .customAuthenticatorFailure, .biometricAuthenticatorFailure, .authenticatorNotRegistered,
            .customAuthenticationDisabled, .noApplicableAuthenticator, .authenticatorAlreadyRegistered,
            .authenticatorNotSupported, .pinDeregistrationNotPossible, .authenticatorUnavailable,
        ]
    }
}
/// Errors of user registration through an identity provider.
public enum RegistrationDomain: ErrorDomain {
    /// The domain's name, `"Registration"`, as diagnostics and the HTTP error body give it.
    public static let name = "Registration"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [RegistrationError.Code] {
        [
            .deviceRegistrationFailure, .invalidState, .invalidIdentityProvider, .customRegistrationExpired,
            .customRegistrationFailure, .externalIdentityProviderFailure, .registrationUnavailable,
            .invalidActivationCode, .stateless,
        ]
    }
}
/// Errors of user deregistration.
public enum DeregistrationDomain: ErrorDomain {
    /// The domain's name, `"Deregistration"`, as diagnostics and the HTTP error body give it.
    public static let name = "Deregistration"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [DeregistrationError.Code] { [.localDeregistration] }
}
/// Errors of changing the PIN.
public enum ChangePinDomain: ErrorDomain {
    /// The domain's name, `"ChangePin"`, as diagnostics and the HTTP error body give it.
    public static let name = "ChangePin"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [ChangePinError.Code] { [.userNotAuthenticated, .statelessUser] }
}
/// Errors of handling a mobile authentication (push) request.
public enum MobileAuthRequestDomain: ErrorDomain {
    /// The domain's name, `"MobileAuthRequest"`, as diagnostics and the HTTP error body give it.
    public static let name = "MobileAuthRequest"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [MobileAuthRequestError.Code] {
        [.userNotAuthenticated, .userDisenrolled, .notEnrolled, .alreadyHandled, .notFound, .notHandleable]
    }
}

/// Errors of enrolling a device for mobile authentication and for push.
public enum MobileAuthEnrollmentDomain: ErrorDomain {
    /// The domain's name, `"MobileAuthEnrollment"`, as diagnostics and the HTTP error body give it.
    public static let name = "MobileAuthEnrollment"
    /// The codes defined below, to turn a number the server sent back into its code.
    public static var knownCodes: [MobileAuthEnrollmentError.Code] {
        [
            .userNotAuthenticated, .deviceAlreadyEnrolled, .enrollmentNotAvailable, .userAlreadyEnrolled, .notEnrolled,
            .statelessUser,
        ]
    }
}

/// An error any operation can raise: no network, server unreachable, deregistered, cancelled, busy,
/// bad configuration.
public typealias GenericError = GatehouseError<GenericDomain>
/// An error of the PIN policy, raised when a new PIN is refused; see ``ErrorDetails`` for the limit
/// it broke.
public typealias PinValidationError = GatehouseError<PinValidationDomain>
/// An error of authenticating a user with the PIN or another authenticator, or of registering one.
public typealias AuthenticationError = GatehouseError<AuthenticationDomain>
/// An error of registering a user through an identity provider.
public typealias RegistrationError = GatehouseError<RegistrationDomain>
/// An error of deregistering a user.
public typealias DeregistrationError = GatehouseError<DeregistrationDomain>
/// An error of changing a user's PIN.
public typealias ChangePinError = GatehouseError<ChangePinDomain>
/// An error of fetching or answering a mobile authentication (push) request.
public typealias MobileAuthRequestError = GatehouseError<MobileAuthRequestDomain>
/// An error of enrolling a device for mobile authentication or for push.
public typealias MobileAuthEnrollmentError = GatehouseError<MobileAuthEnrollmentDomain>
