import Foundation
import GatehouseKernel
import GatehouseTesting
import PINAuthenticator
import Testing

private func harness(_ config: [String: ConfigValue] = [:]) throws -> AuthenticatorHarness {
    try AuthenticatorHarness(PluginHarness.authenticator(PINAuthenticatorPlugin.self, config: config))
}

/// Whether `data` contains `pin`'s characters anywhere, as text or as digit values.
private func contains(_ data: Data, pin: String) -> Bool {
    let bytes = Array(data)
    let text = Array(pin.utf8)
    let values = text.map { $0 - UInt8(ascii: "0") }
    for needle in [text, values] where bytes.count >= needle.count {
        for start in 0...(bytes.count - needle.count) where Array(bytes[start..<start + needle.count]) == needle {
            return true
        }
    }
    return false
}

@Suite("PIN authenticator")
struct PINAuthenticatorTests {
    @Test("enrolment asks again with the policy's reason until a PIN meets it")
    func enrolmentEnforcesPolicy() async throws {
        let pin = try harness(["policy": ["length": 6]])
        let script = ScriptedResponder([.createPin("123456"), .createPin("12345"), .createPin("258147")])
        #expect(try await pin.enroll(responder: script) == .completed(info: nil))
        #expect(await script.isFinished)
        let challenges = await script.received
        #expect(challenges.count == 3)
        #expect(challenges[0].error == nil)
        #expect(challenges[1].error?.codeName == "blacklisted")
        #expect(challenges[2].error?.codeName == "tooShort")
        #expect(challenges[2].error?.details.requiredLength == 6)
        if case .createPin(let first) = challenges[0] { #expect(first.pinLength == 6) }
        #expect(await pin.registration != nil)
    }

    @Test("the right PIN authenticates; each attempt is counted by the server side")
    func authenticates() async throws {
        let pin = try harness()
        _ = try await pin.enroll(responder: ScriptedResponder([.createPin("258147")]))
        let script = ScriptedResponder([.pin("258147")])
        let result = try await pin.authenticate(
            responder: script,
            failureCounts: FailureCounts(maximum: 3, previous: 1)
        )
        #expect(result == .completed(info: nil))
        #expect(await pin.countedAttempts == 1)
        guard case .pin(let challenge) = await script.received.first else {
            Issue.record("no PIN challenge")
            return
        }
        #expect(challenge.maxFailureCount == 3)
        #expect(challenge.previousFailureCount == 1)
        #expect(challenge.remainingFailureCount == 2)
    }

    @Test("a wrong PIN is refused as invalidPin and counted")
    func wrongPin() async throws {
        let pin = try harness()
        _ = try await pin.enroll(responder: ScriptedResponder([.createPin("258147")]))
        await #expect(throws: AuthenticationError.self) {
            _ = try await pin.authenticate(responder: ScriptedResponder([.pin("258148")]))
        }
        do {
            _ = try await pin.authenticate(responder: ScriptedResponder([.pin("000000")]))
            Issue.record("a wrong PIN authenticated")
        } catch let error as AuthenticationError {
            #expect(error.code == .invalidPin)
        }
        #expect(await pin.countedAttempts == 2)
        #expect(try await pin.authenticate(responder: ScriptedResponder([.pin("258147")])) == .completed(info: nil))
    }

    @Test("the PIN appears in no message, no stored value and not in the server's registration")
    func pinIsNeverSentOrStored() async throws {
        let pin = try harness()
        _ = try await pin.enroll(responder: ScriptedResponder([.createPin("258147")]))
        _ = try await pin.authenticate(responder: ScriptedResponder([.pin("258147")]))
        await #expect(throws: AuthenticationError.self) {
            _ = try await pin.authenticate(responder: ScriptedResponder([.pin("258148")]))
        }
        let messages = await pin.sentMessages
        #expect(messages.count >= 6)
        for message in messages {
            #expect(!contains(message, pin: "258147"))
            #expect(!contains(message, pin: "258148"))
        }
        for value in await pin.storage.values.values { #expect(!contains(value, pin: "258147")) }
        let registration = try #require(await pin.registration)
        #expect(!contains(registration, pin: "258147"))
    }

    @Test("cancelling a challenge ends the flow with actionCancelled")
    func cancel() async throws {
        let pin = try harness()
        do {
            _ = try await pin.enroll(responder: ScriptedResponder([.cancel]))
            Issue.record("a cancelled enrolment succeeded")
        } catch let error as GenericError {
            #expect(error.code == .actionCancelled)
        }
        _ = try await pin.enroll(responder: ScriptedResponder([.createPin("258147")]))
        do {
            _ = try await pin.authenticate(responder: ScriptedResponder([.cancel]))
            Issue.record("a cancelled authentication succeeded")
        } catch let error as GenericError {
            #expect(error.code == .actionCancelled)
        }
        #expect(await pin.countedAttempts == 0)
    }

    @Test("a device that was never enrolled cannot authenticate")
    func notEnrolled() async throws {
        let pin = try harness()
        do {
            _ = try await pin.authenticate(responder: ScriptedResponder([.pin("258147")]))
            Issue.record("authenticated without enrolment")
        } catch let error as AuthenticationError {
            #expect(error.code == .authenticatorNotRegistered)
        }
    }

    @Test("the policy comes from the manifest, with the key path in errors")
    func configuration() {
        #expect(
            PluginHarness.configurationProblem(PINAuthenticatorPlugin.self, config: ["policy": ["length": 4]])
                == "config.policy.length: expected a value from 5 to 32, found 4"
        )
        #expect(
            PluginHarness.configurationProblem(PINAuthenticatorPlugin.self, config: ["polciy": [:]])
                == "config.polciy: unknown key; expected one of: policy"
        )
        #expect(PluginHarness.configurationProblem(PINAuthenticatorPlugin.self, config: [:]) == nil)
    }
}

@Suite("PIN authenticator conformance")
struct PINAuthenticatorConformanceTests {
    @Test("passes the authenticator conformance suite")
    func conformance() async throws {
        try await AuthenticatorConformance(
            PINAuthenticatorPlugin.self,
            enrol: [.createPin("258147")],
            authenticate: [.pin("258147")],
            wrongAttempt: .answers([.pin("147258")]),
            fallback: nil
        ).run()
    }
}

@Suite("PIN message order")
struct PINEnrolmentOrderTests {
    @Test("a second evaluation in one attempt is refused: each guess needs its own counted attempt")
    func secondEvaluation() async throws {
        let pin = try AuthenticatorHarness(PluginHarness.authenticator(PINAuthenticatorPlugin.self), maximumFailures: 3)
        _ = try await pin.enroll(responder: ScriptedResponder([.createPin("258147")]))
        let before = await pin.sentMessages.count
        _ = try await pin.authenticate(responder: ScriptedResponder([.pin("258147")]))
        let evaluate = try #require(await pin.sentMessages.dropFirst(before).first)
        // An attacker sends the evaluation twice in one flow, hoping for a free second guess.
        #expect(await pin.replay([evaluate, evaluate]) == false)
        #expect(await pin.failureCount == 1)
        let registration = await pin.registration
        let verifier = pin.verifier
        await #expect(throws: GenericError.self) {
            _ = try await verifier.verify(
                VerificationRequest(
                    subject: "s",
                    profile: pin.profile,
                    message: evaluate,
                    session: Data("{}".utf8),
                    registration: registration,
                    now: Date()
                )
            )
        }
    }

    @Test("a commit that never had an evaluation is refused for that reason")
    func commitWithoutEvaluation() async throws {
        let loaded = try PluginHarness.authenticator(PINAuthenticatorPlugin.self)
        let verifier = try #require(loaded.verifier)
        let profile = UserProfile(id: "TEST01")
        let policy = try await verifier.enroll(
            VerificationRequest(subject: "s", profile: profile, message: Data(#"{"op":"policy"}"#.utf8), now: Date())
        )
        guard case .challenge(let challenge) = policy else {
            Issue.record("no policy challenge")
            return
        }
        let payload = try #require(try JSONSerialization.jsonObject(with: challenge.payload) as? [String: Any])
        let digest = try #require(payload["policyDigest"] as? String)
        let commit = #"{"op":"commit","publicKey":"AAAA","signature":"AAAA","policyDigest":"\#(digest)"}"#
        do {
            _ = try await verifier.enroll(
                VerificationRequest(
                    subject: "s",
                    profile: profile,
                    message: Data(commit.utf8),
                    session: challenge.session,
                    now: Date()
                )
            )
            Issue.record("a commit without an evaluation was accepted")
        } catch let error as GenericError {
            #expect(error.code == .requestInvalid)
            #expect(error.message.contains("before the PIN was evaluated"), "\(error.message)")
        }
    }
}
