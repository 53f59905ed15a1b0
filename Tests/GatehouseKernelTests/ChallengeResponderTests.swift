import Foundation
import GatehouseKernel
import GatehouseTesting
import Testing

private let profile = UserProfile(id: "abc123")
private let pinAuthenticator = AuthenticatorDescriptor(id: "pin", type: "pin", name: "PIN")
private let biometric = AuthenticatorDescriptor(id: "face", type: "biometric.simulated", name: "Face")
private let provider = IdentityProviderDescriptor(id: "api", type: "idp.customAPI", name: "API")

/// An app's authentication delegate that implements only what it must.
private struct MinimalAuthenticationDelegate: AuthenticationDelegate {
    func pin(_ challenge: PinChallenge) async -> PinResponse { .pin(PIN("135790")) }
}

/// An app's registration delegate that implements only what it must.
private struct MinimalRegistrationDelegate: RegistrationDelegate {
    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse { .pin(PIN("135790")) }
}

@Suite("Challenge responders")
struct ChallengeResponderTests {
    @Test("an authentication delegate's defaults: biometric scans, custom falls back to PIN")
    func authenticationDefaults() async {
        let responder = ChallengeResponders.authentication(MinimalAuthenticationDelegate())
        #expect(
            await responder.biometric(BiometricChallenge(profile: profile, authenticator: biometric)) == .defaultPrompt
        )
        #expect(
            await responder.customAuthenticator(
                CustomAuthenticatorChallenge(profile: profile, authenticator: biometric)
            )
                == .fallbackToPin
        )
        guard
            case .pin = await responder.pin(
                PinChallenge(
                    profile: profile,
                    authenticator: pinAuthenticator,
                    failureCounts: .init(maximum: 3, previous: 0)
                )
            )
        else {
            Issue.record("the delegate's PIN was not passed on")
            return
        }
        // Authentication never creates a PIN: a plugin that asks is refused.
        guard case .cancel = await responder.createPin(CreatePinChallenge(profile: profile, pinLength: 6)) else {
            Issue.record("authentication answered a create-PIN challenge")
            return
        }
    }

    @Test("a registration delegate answers creation and registration challenges, and nothing else")
    func registrationDefaults() async {
        let responder = ChallengeResponders.registration(MinimalRegistrationDelegate())
        guard case .pin = await responder.createPin(CreatePinChallenge(profile: profile, pinLength: 6)) else {
            Issue.record("the delegate's new PIN was not passed on")
            return
        }
        #expect(
            await responder.customRegistration(CustomRegistrationChallenge(identityProvider: provider, step: .finish))
                == .data(nil)
        )
        let browser = BrowserRegistrationChallenge(
            identityProvider: provider,
            url: URL(string: "https://idp.test/login")!,
            redirectURI: URL(string: "app://done")!
        )
        #expect(await responder.browserRegistration(browser) == .cancel)
        #expect(await responder.biometric(BiometricChallenge(profile: profile, authenticator: biometric)) == .cancel)
        guard
            case .cancel = await responder.pin(
                PinChallenge(
                    profile: profile,
                    authenticator: pinAuthenticator,
                    failureCounts: .init(maximum: 3, previous: 0)
                )
            )
        else {
            Issue.record("registration answered a PIN challenge")
            return
        }
    }

    @Test("a scripted responder answers in order, records, and flags what it did not expect")
    func scripted() async {
        let script = ScriptedResponder([.createPin("112233"), .biometric(.fallbackToPin)])
        let responder = ChallengeResponders.changePin(script)
        guard case .pin = await responder.createPin(CreatePinChallenge(profile: profile, pinLength: 6)) else {
            Issue.record("the scripted PIN was not answered")
            return
        }
        #expect(await script.isFinished == false)
        // Out of order: the script's next answer is for a biometric challenge.
        guard
            case .cancel = await responder.pin(
                PinChallenge(
                    profile: profile,
                    authenticator: pinAuthenticator,
                    failureCounts: .init(maximum: 3, previous: 0)
                )
            )
        else {
            Issue.record("an unexpected challenge was answered")
            return
        }
        #expect(
            await responder.biometric(BiometricChallenge(profile: profile, authenticator: biometric)) == .fallbackToPin
        )
        #expect(await script.receivedKinds == ["createPin", "pin", "biometric"])
        #expect(await script.unexpected.map(\.kind) == ["pin"])
        #expect(await script.remaining == 0)
        #expect(await script.isFinished == false)
    }
}
