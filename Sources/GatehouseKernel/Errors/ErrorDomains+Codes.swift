// The codes of the seed SDK's error domains (ErrorDomains.swift): number, name and default
// message. Numbers follow the seed SDK where it has one; docs/ERRORS.md lists the mapping.

extension GatehouseError.Code where Domain == GenericDomain {
    /// 9000: the device has no working network connection. Retry when it is back.
    public static var networkConnectivityFailure: Self {
        Self(9000, name: "networkConnectivityFailure", defaultMessage: "The device has no working network connection.")
    }
    /// 9001: the token server could not be reached; check the server URL in the configuration.
    public static var serverNotReachable: Self {
        Self(9001, name: "serverNotReachable", defaultMessage: "The token server could not be reached; check its URL.")
    }
    /// 9002: the server removed this device's registration, so all local data was removed. Register
    /// again.
    public static var deviceDeregistered: Self {
        Self(
            9002,
            name: "deviceDeregistered",
            defaultMessage:
                "This device's registration was removed from the server; all local data was removed. Register again."
        )
    }
    /// 9003: the user was deregistered (for example after too many wrong PINs); the profile's local
    /// data was removed.
    public static var userDeregistered: Self {
        Self(
            9003,
            name: "userDeregistered",
            defaultMessage:
                "The user was deregistered (for example after too many wrong PINs); the profile's local data was removed."
        )
    }
    /// 9006: the user or the app cancelled the action.
    public static var actionCancelled: Self {
        Self(9006, name: "actionCancelled", defaultMessage: "The action was cancelled.")
    }
    /// 9007: another action of the same kind is running; wait for it to finish.
    public static var actionAlreadyInProgress: Self {
        Self(
            9007,
            name: "actionAlreadyInProgress",
            defaultMessage: "Another action is in progress; wait for it to finish."
        )
    }
    /// 9024: local storage cannot be used (not available, or refused the write).
    public static var dataStorageNotAvailable: Self {
        Self(9024, name: "dataStorageNotAvailable", defaultMessage: "The local data storage is not available.")
    }
    /// 9025: local data is damaged and cannot be read back.
    public static var unrecoverableDataState: Self {
        Self(9025, name: "unrecoverableDataState", defaultMessage: "The local data is damaged and cannot be used.")
    }
    /// 10000: an unexpected error; look at ``GatehouseError/underlying``.
    public static var unknown: Self {
        Self(10000, name: "unknown", defaultMessage: "An unexpected error occurred.")
    }
    /// 10001: the configuration was refused. Every ``ManifestError`` has this code.
    public static var configurationInvalid: Self {
        Self(10001, name: "configurationInvalid", defaultMessage: "The configuration is not valid.")
    }
    /// 10015: the server refused the request as malformed (HTTP 400).
    public static var requestInvalid: Self {
        Self(10015, name: "requestInvalid", defaultMessage: "The server refused the request as malformed.")
    }
}

extension GatehouseError.Code where Domain == PinValidationDomain {
    /// 9011: the PIN is on the policy's blocklist of common PINs.
    public static var blacklisted: Self {
        Self(9011, name: "blacklisted", defaultMessage: "This PIN is too common; choose another one.")
    }
    /// 9012: the PIN is a sequence such as 123456, 13579 or 987654.
    public static var sequence: Self {
        Self(9012, name: "sequence", defaultMessage: "The PIN must not be a sequence such as 123456, 13579 or 987654.")
    }
    /// 9013: one digit occurs too often; ``ErrorDetails/maxSimilarDigits`` says how often it may.
    public static var similarDigits: Self {
        Self(9013, name: "similarDigits", defaultMessage: "The PIN repeats one digit too often.")
    }
    /// 9014: the PIN has fewer digits than the policy's length, given in
    /// ``ErrorDetails/requiredLength``.
    public static var tooShort: Self {
        Self(9014, name: "tooShort", defaultMessage: "The PIN is too short.")
    }
    /// 9019: the PIN has more digits than the policy's length, given in
    /// ``ErrorDetails/requiredLength``. The seed SDK
    /// folds this into 9014.
    public static var tooLong: Self {
        Self(9019, name: "tooLong", defaultMessage: "The PIN is too long.")
    }
    /// 9032: the PIN has characters other than digits.
    public static var notNumeric: Self {
        Self(9032, name: "notNumeric", defaultMessage: "The PIN must consist of digits only.")
    }
}

extension GatehouseError.Code where Domain == AuthenticationDomain {
    /// 9009: the PIN is wrong; ``ErrorDetails/remainingFailureCount`` says how many tries are left
    /// before the profile
    /// is deregistered.
    public static var invalidPin: Self {
        Self(9009, name: "invalidPin", defaultMessage: "The PIN is not correct.")
    }
    /// 9010: no user is authenticated; log in first.
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "No user is authenticated; log in first.")
    }
    /// 9015: the authenticator failed or is not valid for this user.
    public static var authenticatorInvalid: Self {
        Self(9015, name: "authenticatorInvalid", defaultMessage: "The authenticator is not valid for this user.")
    }
    /// 9022: the authenticator was deregistered (its id is in ``ErrorDetails/authenticatorID``);
    /// authenticate with the
    /// PIN.
    public static var authenticatorDeregistered: Self {
        Self(
            9022,
            name: "authenticatorDeregistered",
            defaultMessage: "The authenticator was deregistered; use the PIN."
        )
    }
    /// 9027: a custom authenticator refused the user; ``ErrorDetails/customInfo`` says what it
    /// said.
    public static var customAuthenticatorFailure: Self {
        Self(9027, name: "customAuthenticatorFailure", defaultMessage: "The custom authenticator refused the user.")
    }
    /// 9030: biometric authentication failed on the device.
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
    /// 10007: the authenticator is not registered for this user.
    public static var authenticatorNotRegistered: Self {
        Self(
            10007,
            name: "authenticatorNotRegistered",
            defaultMessage: "The authenticator is not registered for this user."
        )
    }
    /// 10017: custom authenticators are turned off on the server.
    public static var customAuthenticationDisabled: Self {
        Self(
            10017,
            name: "customAuthenticationDisabled",
            defaultMessage: "Custom authenticators are disabled on the server."
        )
    }
    /// 10004: the authenticator (or the PIN, which always is) is already registered for this user.
    public static var authenticatorAlreadyRegistered: Self {
        Self(
            10004,
            name: "authenticatorAlreadyRegistered",
            defaultMessage: "The authenticator is already registered for this user."
        )
    }
    /// 10006: the server or the app does not offer this authenticator.
    public static var authenticatorNotSupported: Self {
        Self(
            10006,
            name: "authenticatorNotSupported",
            defaultMessage: "The authenticator is not supported here (the server or the app does not offer it)."
        )
    }
    /// 10008: the PIN cannot be deregistered on its own; deregister the user instead.
    public static var pinDeregistrationNotPossible: Self {
        Self(
            10008,
            name: "pinDeregistrationNotPossible",
            defaultMessage: "The PIN cannot be deregistered; deregister the user instead."
        )
    }
    /// 10026: kept so that the number is never reused; nothing raises it, since every flow names
    /// its authenticator.
    public static var noApplicableAuthenticator: Self {
        Self(
            10026,
            name: "noApplicableAuthenticator",
            defaultMessage: "No configured authenticator can handle this request."
        )
    }
}

extension GatehouseError.Code where Domain == RegistrationDomain {
    /// 9008: the server refused to register the device.
    public static var deviceRegistrationFailure: Self {
        Self(
            9008,
            name: "deviceRegistrationFailure",
            defaultMessage: "The device could not be registered with the server."
        )
    }
    /// 10002: the state that came back from the identity provider does not match the one sent; a
    /// possible security
    /// issue.
    public static var invalidState: Self {
        Self(
            10002,
            name: "invalidState",
            defaultMessage: "The registration state did not match; possible security issue."
        )
    }
    /// 10020: no identity provider has this id, or it is disabled.
    public static var invalidIdentityProvider: Self {
        Self(
            10020,
            name: "invalidIdentityProvider",
            defaultMessage: "The identity provider does not exist or is disabled."
        )
    }
    /// 10021: the registration took too long and expired on the server; start again.
    public static var customRegistrationExpired: Self {
        Self(10021, name: "customRegistrationExpired", defaultMessage: "The registration expired; start again.")
    }
    /// 10022: the custom registration API refused; ``ErrorDetails/customInfo`` says what it said.
    public static var customRegistrationFailure: Self {
        Self(
            10022,
            name: "customRegistrationFailure",
            defaultMessage: "The custom registration was refused; see its custom info."
        )
    }
    /// 10025: the external identity provider (a browser login, for instance) failed.
    public static var externalIdentityProviderFailure: Self {
        Self(10025, name: "externalIdentityProviderFailure", defaultMessage: "The external identity provider failed.")
    }
    /// 10027: this manager takes no registrations; a third party registers its users (XignIn).
    public static var registrationUnavailable: Self {
        Self(
            10027,
            name: "registrationUnavailable",
            defaultMessage: "This manager does not take registrations; a third party handles them."
        )
    }
    /// 10028: the activation code is unknown, expired, already used, or locked after too many
    /// tries.
    public static var invalidActivationCode: Self {
        Self(
            10028,
            name: "invalidActivationCode",
            defaultMessage: "The activation code is not valid, expired, or locked."
        )
    }
    /// 9034: stateless registration is not enabled for this application.
    public static var stateless: Self {
        Self(9034, name: "stateless", defaultMessage: "Stateless registration is not enabled for this application.")
    }
}

extension GatehouseError.Code where Domain == DeregistrationDomain {
    /// 10003: the profile was removed from this device, but the server could not be told; its
    /// tokens expire on their
    /// own.
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
    /// 9010: changing the PIN needs an authenticated user.
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "Changing the PIN needs an authenticated user.")
    }
    /// 9033: a stateless registration has no PIN to change.
    public static var statelessUser: Self {
        Self(9033, name: "statelessUser", defaultMessage: "A stateless registration has no PIN to change.")
    }
}

extension GatehouseError.Code where Domain == MobileAuthRequestDomain {
    /// 9010: handling a mobile authentication request needs an authenticated user.
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "No user is authenticated.")
    }
    /// 9020: the server disenrolled the user for security reasons; enroll again.
    public static var userDisenrolled: Self {
        Self(
            9020,
            name: "userDisenrolled",
            defaultMessage: "The user was disenrolled for security reasons; enroll again."
        )
    }
    /// 9021: the user is not enrolled for mobile authentication.
    public static var notEnrolled: Self {
        Self(9021, name: "notEnrolled", defaultMessage: "The user is not enrolled for mobile authentication.")
    }
    /// 9029: the request was already answered, on this device or another.
    public static var alreadyHandled: Self {
        Self(9029, name: "alreadyHandled", defaultMessage: "The request was already answered.")
    }
    /// 10013: the server has no mobile authentication request with this id (it may have expired).
    public static var notFound: Self {
        Self(10013, name: "notFound", defaultMessage: "The mobile authentication request was not found on the server.")
    }
    /// 10018: the request is not one Gatehouse can handle.
    public static var notHandleable: Self {
        Self(10018, name: "notHandleable", defaultMessage: "The request cannot be handled by Gatehouse.")
    }
}

extension GatehouseError.Code where Domain == MobileAuthEnrollmentDomain {
    /// 9033: a stateless registration cannot enroll for mobile authentication.
    public static var statelessUser: Self {
        Self(
            9033,
            name: "statelessUser",
            defaultMessage: "A stateless registration cannot enroll for mobile authentication."
        )
    }
    /// 9010: enrolling needs an authenticated user.
    public static var userNotAuthenticated: Self {
        Self(9010, name: "userNotAuthenticated", defaultMessage: "Enrolling needs an authenticated user.")
    }
    /// 9016: this push token is already enrolled for another profile.
    public static var deviceAlreadyEnrolled: Self {
        Self(
            9016,
            name: "deviceAlreadyEnrolled",
            defaultMessage: "This push token is already enrolled for another profile."
        )
    }
    /// 9017: the server does not offer mobile authentication.
    public static var enrollmentNotAvailable: Self {
        Self(
            9017,
            name: "enrollmentNotAvailable",
            defaultMessage: "The server does not offer mobile authentication."
        )
    }
    /// 9018: the user is already enrolled for mobile authentication on another device.
    public static var userAlreadyEnrolled: Self {
        Self(
            9018,
            name: "userAlreadyEnrolled",
            defaultMessage: "The user is already enrolled for mobile authentication on another device."
        )
    }
    /// 9021: enroll for mobile authentication first, then for push.
    public static var notEnrolled: Self {
        Self(
            9021,
            name: "notEnrolled",
            defaultMessage: "Enrol for mobile authentication first, then for push."
        )
    }
}
