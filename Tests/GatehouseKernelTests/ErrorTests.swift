import GatehouseKernel
import Testing

@Suite("Errors")
struct ErrorTests {
    @Test("every domain's codes are distinct and named")
    func codesAreDistinct() {
        let generic: [GenericError.Code] = [
            .networkConnectivityFailure, .serverNotReachable, .deviceDeregistered, .userDeregistered, .actionCancelled,
            .actionAlreadyInProgress, .dataStorageNotAvailable, .unrecoverableDataState, .unknown,
            .configurationInvalid,
            .requestInvalid,
        ]
        let pinValidation: [PinValidationError.Code] = [
            .blacklisted, .sequence, .similarDigits, .tooShort, .tooLong, .notNumeric,
        ]
        let authentication: [AuthenticationError.Code] = [
            .invalidPin, .userNotAuthenticated, .authenticatorInvalid, .authenticatorDeregistered,
            .customAuthenticatorFailure,
            .biometricAuthenticatorFailure, .authenticatorNotRegistered, .customAuthenticationDisabled,
            .noApplicableAuthenticator,
        ]
        let registration: [RegistrationError.Code] = [
            .deviceRegistrationFailure, .invalidState, .invalidIdentityProvider, .customRegistrationExpired,
            .customRegistrationFailure, .externalIdentityProviderFailure,
        ]
        let mobile: [MobileAuthRequestError.Code] = [
            .userNotAuthenticated, .userDisenrolled, .notEnrolled, .alreadyHandled, .notFound, .notHandleable,
        ]
        #expect(Set(generic).count == generic.count)
        #expect(Set(pinValidation).count == pinValidation.count)
        #expect(Set(authentication).count == authentication.count)
        #expect(Set(registration).count == registration.count)
        #expect(Set(mobile).count == mobile.count)
        // One number, one meaning, across all domains (the seed SDK reused 10020 and 10024).
        let everyNumber =
            generic.map(\.rawValue) + pinValidation.map(\.rawValue)
            + authentication.map(\.rawValue).filter { $0 != 9010 }
            + registration.map(\.rawValue) + mobile.map(\.rawValue).filter { $0 != 9010 }
            + [DeregistrationError.Code.localDeregistration.rawValue]
        #expect(Set(everyNumber).count == everyNumber.count)
        for name in generic.map(\.name) + pinValidation.map(\.name) + registration.map(\.name) {
            #expect(!name.isEmpty)
        }
    }

    @Test("keeps the seed SDK's numbers where it has them")
    func seedNumbers() {
        #expect(GenericError.Code.deviceDeregistered.rawValue == 9002)
        #expect(GenericError.Code.userDeregistered.rawValue == 9003)
        #expect(GenericError.Code.actionCancelled.rawValue == 9006)
        #expect(GenericError.Code.configurationInvalid.rawValue == 10001)
        #expect(PinValidationError.Code.blacklisted.rawValue == 9011)
        #expect(PinValidationError.Code.sequence.rawValue == 9012)
        #expect(PinValidationError.Code.similarDigits.rawValue == 9013)
        #expect(PinValidationError.Code.tooShort.rawValue == 9014)
        #expect(DeregistrationError.Code.localDeregistration.rawValue == 10003)
        #expect(MobileAuthRequestError.Code.notFound.rawValue == 10013)
        #expect(MobileAuthRequestError.Code.notHandleable.rawValue == 10018)
        #expect(MobileAuthRequestError.Code.userDisenrolled.rawValue == 9020)
        #expect(MobileAuthRequestError.Code.notEnrolled.rawValue == 9021)
    }

    @Test("reads as a sentence, with the code and cause in the debug description")
    func descriptions() {
        let error = PinValidationError(
            .similarDigits,
            message: "No digit may occur more than 2 times in the PIN.",
            details: ErrorDetails(maxSimilarDigits: 2),
            plugin: "pin.policy"
        )
        #expect(error.description == "No digit may occur more than 2 times in the PIN.")
        #expect(
            String(reflecting: error)
                == "PinValidation.similarDigits (9013): No digit may occur more than 2 times in the PIN. [plugin pin.policy]"
        )
        #expect(error.details.maxSimilarDigits == 2)
        #expect(GenericError(.userDeregistered).message.contains("deregistered"))
        let wrapped = GenericError(.serverNotReachable, underlying: error)
        #expect(String(reflecting: wrapped).contains("caused by: PinValidation.similarDigits"))
    }

    @Test("can be caught by code, and reported without knowing the domain")
    func catchByCode() {
        func deregister() throws { throw DeregistrationError(.localDeregistration) }
        do {
            try deregister()
        } catch let error as DeregistrationError where error.code == .localDeregistration {
            let reported: any DomainError = error
            #expect(reported.domainName == "Deregistration")
            #expect(reported.codeNumber == 10003)
            #expect(reported.codeName == "localDeregistration")
        } catch {
            Issue.record("caught the wrong error: \(error)")
        }
    }

    @Test("a plugin adds codes of its own")
    func pluginCodes() {
        let code = AuthenticationError.Code(
            19001,
            name: "voiceNotRecognised",
            defaultMessage: "The voice was not recognised."
        )
        let error = AuthenticationError(code, plugin: "voice")
        #expect(error.code == code)
        #expect(error.code != .invalidPin)
        #expect(error.message == "The voice was not recognised.")
    }

    @Test("a plugin's code carries its plugin: another plugin's same number, or Gatehouse's, is another code")
    func pluginCodeDomains() {
        let voice = AuthenticationError.Code(19001, name: "notRecognised", defaultMessage: "No.", plugin: "acme.voice")
        let face = AuthenticationError.Code(19001, name: "notRecognised", defaultMessage: "No.", plugin: "acme.face")
        let pinLike = AuthenticationError.Code(9009, name: "invalidPin", defaultMessage: "No.", plugin: "acme.voice")
        #expect(voice != face)
        #expect(Set([voice, face]).count == 2)
        #expect(pinLike != .invalidPin)
        let error = AuthenticationError(voice)
        #expect(error.plugin == "acme.voice")
        #expect((error as any DomainError).codePlugin == "acme.voice")
        #expect(voice.description == "Authentication.notRecognised (19001, plugin acme.voice)")
        #expect(AuthenticationError(.invalidPin).codePlugin == nil)
    }
}
