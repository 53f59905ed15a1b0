// The seed SDK's error domains and their codes. Numbers follow the seed SDK where it has one;
// where it reused a number for two meanings (10020, 10024) or had none, Gatehouse uses a free
// number so that every code has exactly one meaning. docs/ERRORS.md lists the mapping.

/// Errors any operation can raise: connectivity, server state, cancellation, configuration.
public enum GenericDomain: ErrorDomain {
    public static let name = "Generic"
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
    public static let name = "PinValidation"
    public static var knownCodes: [PinValidationError.Code] {
        [.blacklisted, .sequence, .similarDigits, .tooShort, .tooLong, .notNumeric]
    }
}
/// Errors of authentication with PIN, biometric or custom authenticators.
public enum AuthenticationDomain: ErrorDomain {
    public static let name = "Authentication"
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
    public static let name = "Registration"
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
    public static let name = "Deregistration"
    public static var knownCodes: [DeregistrationError.Code] { [.localDeregistration] }
}
/// Errors of changing the PIN.
public enum ChangePinDomain: ErrorDomain {
    public static let name = "ChangePin"
    public static var knownCodes: [ChangePinError.Code] { [.userNotAuthenticated, .statelessUser] }
}
/// Errors of handling a mobile authentication (push) request.
public enum MobileAuthRequestDomain: ErrorDomain {
    public static let name = "MobileAuthRequest"
    public static var knownCodes: [MobileAuthRequestError.Code] {
        [.userNotAuthenticated, .userDisenrolled, .notEnrolled, .alreadyHandled, .notFound, .notHandleable]
    }
}

/// Errors of enrolling a device for mobile authentication and for push.
public enum MobileAuthEnrollmentDomain: ErrorDomain {
    public static let name = "MobileAuthEnrollment"
    public static var knownCodes: [MobileAuthEnrollmentError.Code] {
        [
            .userNotAuthenticated, .deviceAlreadyEnrolled, .enrollmentNotAvailable, .userAlreadyEnrolled, .notEnrolled,
            .statelessUser,
        ]
    }
}

public typealias GenericError = GatehouseError<GenericDomain>
public typealias PinValidationError = GatehouseError<PinValidationDomain>
public typealias AuthenticationError = GatehouseError<AuthenticationDomain>
public typealias RegistrationError = GatehouseError<RegistrationDomain>
public typealias DeregistrationError = GatehouseError<DeregistrationDomain>
public typealias ChangePinError = GatehouseError<ChangePinDomain>
public typealias MobileAuthRequestError = GatehouseError<MobileAuthRequestDomain>
public typealias MobileAuthEnrollmentError = GatehouseError<MobileAuthEnrollmentDomain>

extension GatehouseError.Code where Domain == GenericDomain {
    public static var networkConnectivityFailure: Self {
        Self(9000, name: "networkConnectivityFailure", defaultMessage: "The device has no working network connection.")
    }
    public static var serverNotReachable: Self {
        Self(9001, name: "serverNotReachable", defaultMessage: "The token server could not be reached; check its URL.")
    }
    public static var deviceDeregistered: Self {
        Self(
            9002,
            name: "deviceDeregistered",
            defaultMessage:
                "This device's registration was removed from the server; all local data was removed. Register again."
        )
    }
    public static var userDeregistered: Self {
        Self(
            9003,
            name: "userDeregistered",
            defaultMessage:
                "The user was deregistered (for example after too many wrong PINs); the profile's local data was removed."
        )
    }
    public static var actionCancelled: Self {
        Self(9006, name: "actionCancelled", defaultMessage: "The action was cancelled.")
    }
    public static var actionAlreadyInProgress: Self {
        Self(
            9007,
            name: "actionAlreadyInProgress",
            defaultMessage: "Another action is in progress; wait for it to finish."
        )
    }
    public static var dataStorageNotAvailable: Self {
        Self(9024, name: "dataStorageNotAvailable", defaultMessage: "The local data storage is not available.")
    }
    public static var unrecoverableDataState: Self {
        Self(9025, name: "unrecoverableDataState", defaultMessage: "The local data is damaged and cannot be used.")
    }
    public static var unknown: Self {
        Self(10000, name: "unknown", defaultMessage: "An unexpected error occurred.")
    }
    public static var configurationInvalid: Self {
        Self(10001, name: "configurationInvalid", defaultMessage: "The configuration is not valid.")
    }
    public static var requestInvalid: Self {
        Self(10015, name: "requestInvalid", defaultMessage: "The server refused the request as malformed.")
    }
}

extension GatehouseError.Code where Domain == PinValidationDomain {
    public static var blacklisted: Self {
        Self(9011, name: "blacklisted", defaultMessage: "This PIN is too common; choose another one.")
    }
    public static var sequence: Self {
        Self(9012, name: "sequence", defaultMessage: "The PIN must not be a sequence such as 123456, 13579 or 987654.")
    }
    public static var similarDigits: Self {
        Self(9013, name: "similarDigits", defaultMessage: "The PIN repeats one digit too often.")
    }
    public static var tooShort: Self {
        Self(9014, name: "tooShort", defaultMessage: "The PIN is too short.")
    }
    public static var tooLong: Self {
        Self(9019, name: "tooLong", defaultMessage: "The PIN is too long.")
    }
    public static var notNumeric: Self {
        Self(9032, name: "notNumeric", defaultMessage: "The PIN must consist of digits only.")
    }
}

extension GatehouseError.Code where Domain == AuthenticationDomain {
    public static var invalidPin: Self {
        Self(9009, name: "invalidPin", defaultMessage: "The PIN is not correct.")
    }
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "No user is authenticated; log in first.")
    }
    public static var authenticatorInvalid: Self {
        Self(9015, name: "authenticatorInvalid", defaultMessage: "The authenticator is not valid for this user.")
    }
    public static var authenticatorDeregistered: Self {
        Self(
            9022,
            name: "authenticatorDeregistered",
            defaultMessage: "The authenticator was deregistered; use the PIN."
        )
    }
    public static var customAuthenticatorFailure: Self {
        Self(9027, name: "customAuthenticatorFailure", defaultMessage: "The custom authenticator refused the user.")
    }
    public static var biometricAuthenticatorFailure: Self {
        Self(9030, name: "biometricAuthenticatorFailure", defaultMessage: "Biometric authentication failed.")
    }
    /// The authenticator's server half could not check the answer (the service behind it is
    /// down or failed): nothing was counted, the user tries again later.
    public static var authenticatorUnavailable: Self {
        Self(
            9035,
            name: "authenticatorUnavailable",
            defaultMessage:
                "The authenticator could not check the answer just now; no attempt was counted. Try again later."
        )
    }
    public static var authenticatorNotRegistered: Self {
        Self(
            10007,
            name: "authenticatorNotRegistered",
            defaultMessage: "The authenticator is not registered for this user."
        )
    }
    public static var customAuthenticationDisabled: Self {
        Self(
            10017,
            name: "customAuthenticationDisabled",
            defaultMessage: "Custom authenticators are disabled on the server."
        )
    }
    public static var authenticatorAlreadyRegistered: Self {
        Self(
            10004,
            name: "authenticatorAlreadyRegistered",
            defaultMessage: "The authenticator is already registered for this user."
        )
    }
    public static var authenticatorNotSupported: Self {
        Self(
            10006,
            name: "authenticatorNotSupported",
            defaultMessage: "The authenticator is not supported here (the server or the app does not offer it)."
        )
    }
    public static var pinDeregistrationNotPossible: Self {
        Self(
            10008,
            name: "pinDeregistrationNotPossible",
            defaultMessage: "The PIN cannot be deregistered; deregister the user instead."
        )
    }
    public static var noApplicableAuthenticator: Self {
        Self(
            10026,
            name: "noApplicableAuthenticator",
            defaultMessage: "No configured authenticator can handle this request."
        )
    }
}

extension GatehouseError.Code where Domain == RegistrationDomain {
    public static var deviceRegistrationFailure: Self {
        Self(
            9008,
            name: "deviceRegistrationFailure",
            defaultMessage: "The device could not be registered with the server."
        )
    }
    public static var invalidState: Self {
        Self(
            10002,
            name: "invalidState",
            defaultMessage: "The registration state did not match; possible security issue."
        )
    }
    public static var invalidIdentityProvider: Self {
        Self(
            10020,
            name: "invalidIdentityProvider",
            defaultMessage: "The identity provider does not exist or is disabled."
        )
    }
    public static var customRegistrationExpired: Self {
        Self(10021, name: "customRegistrationExpired", defaultMessage: "The registration expired; start again.")
    }
    public static var customRegistrationFailure: Self {
        Self(
            10022,
            name: "customRegistrationFailure",
            defaultMessage: "The custom registration was refused; see its custom info."
        )
    }
    public static var externalIdentityProviderFailure: Self {
        Self(10025, name: "externalIdentityProviderFailure", defaultMessage: "The external identity provider failed.")
    }
    public static var registrationUnavailable: Self {
        Self(
            10027,
            name: "registrationUnavailable",
            defaultMessage: "This manager does not take registrations; a third party handles them."
        )
    }
    public static var invalidActivationCode: Self {
        Self(
            10028,
            name: "invalidActivationCode",
            defaultMessage: "The activation code is not valid, expired, or locked."
        )
    }
    public static var stateless: Self {
        Self(9034, name: "stateless", defaultMessage: "Stateless registration is not enabled for this application.")
    }
}

extension GatehouseError.Code where Domain == DeregistrationDomain {
    public static var localDeregistration: Self {
        Self(
            10003,
            name: "localDeregistration",
            defaultMessage:
                "The profile was removed from this device, but the server could not be told; its tokens expire on their own."
        )
    }
}

extension GatehouseError.Code where Domain == ChangePinDomain {
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "Changing the PIN needs an authenticated user.")
    }
    public static var statelessUser: Self {
        Self(9033, name: "statelessUser", defaultMessage: "A stateless registration has no PIN to change.")
    }
}

extension GatehouseError.Code where Domain == MobileAuthRequestDomain {
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "No user is authenticated.")
    }
    public static var userDisenrolled: Self {
        Self(
            9020,
            name: "userDisenrolled",
            defaultMessage: "The user was disenrolled for security reasons; enroll again."
        )
    }
    public static var notEnrolled: Self {
        Self(9021, name: "notEnrolled", defaultMessage: "The user is not enrolled for mobile authentication.")
    }
    public static var alreadyHandled: Self {
        Self(9029, name: "alreadyHandled", defaultMessage: "The request was already answered.")
    }
    public static var notFound: Self {
        Self(10013, name: "notFound", defaultMessage: "The mobile authentication request was not found on the server.")
    }
    public static var notHandleable: Self {
        Self(10018, name: "notHandleable", defaultMessage: "The request cannot be handled by Gatehouse.")
    }
}

extension GatehouseError.Code where Domain == MobileAuthEnrollmentDomain {
    public static var statelessUser: Self {
        Self(
            9033,
            name: "statelessUser",
            defaultMessage: "A stateless registration cannot enroll for mobile authentication."
        )
    }
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "Enrolling needs an authenticated user.")
    }
    public static var deviceAlreadyEnrolled: Self {
        Self(
            9016,
            name: "deviceAlreadyEnrolled",
            defaultMessage: "This push token is already enrolled for another profile."
        )
    }
    public static var enrollmentNotAvailable: Self {
        Self(
            9017,
            name: "enrollmentNotAvailable",
            defaultMessage: "The server does not offer mobile authentication."
        )
    }
    public static var userAlreadyEnrolled: Self {
        Self(
            9018,
            name: "userAlreadyEnrolled",
            defaultMessage: "The user is already enrolled for mobile authentication on another device."
        )
    }
    public static var notEnrolled: Self {
        Self(
            9021,
            name: "notEnrolled",
            defaultMessage: "Enrol for mobile authentication first, then for push."
        )
    }
}
