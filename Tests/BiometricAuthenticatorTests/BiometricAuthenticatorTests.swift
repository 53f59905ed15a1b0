import BiometricAuthenticator
import Foundation
import GatehouseKernel
import GatehouseTesting
import Testing

@Suite("Simulated biometric authenticator")
struct BiometricAuthenticatorTests {
    @Test("passes the authenticator conformance suite")
    func conformance() async throws {
        let sensor = SimulatedBiometricSensor()
        try await AuthenticatorConformance(
            BiometricAuthenticatorPlugin.self,
            config: ["sensor": "sensor"],
            services: PluginServices().setting(SimulatedBiometricSensorKey.self, named: "sensor", to: sensor),
            enrol: [],
            authenticate: [.biometric(.defaultPrompt)],
            wrongAttempt: .prepared({ _ in await sensor.enqueue(.noMatch) }, [.biometric(.defaultPrompt)]),
            fallback: [.biometric(.fallbackToPin)]
        ).run()
    }

    @Test("enrolment needs no scan; the default and a custom prompt reach the sensor")
    func prompts() async throws {
        let sensor = SimulatedBiometricSensor()
        let subject = try await enrolled(sensor)
        #expect(await sensor.prompts.isEmpty)
        #expect(await subject.registration != nil)
        #expect(
            try await subject.authenticate(responder: ScriptedResponder([.biometric(.defaultPrompt)]))
                == .completed(info: nil)
        )
        let custom = ScriptedResponder([.biometric(.prompt("Confirm the transfer of €120"))])
        #expect(try await subject.authenticate(responder: custom) == .completed(info: nil))
        #expect(await sensor.prompts == [BiometricAuthenticator.defaultPrompt, "Confirm the transfer of €120"])
    }

    @Test("the user chooses the PIN (nothing sent) or cancels (actionCancelled); an unavailable sensor falls back")
    func fallbackAndCancel() async throws {
        let sensor = SimulatedBiometricSensor()
        let subject = try await enrolled(sensor)
        let sent = await subject.sentMessages.count
        #expect(
            try await subject.authenticate(responder: ScriptedResponder([.biometric(.fallbackToPin)]))
                == .fallbackToPin(reason: nil)
        )
        #expect(await subject.sentMessages.count == sent)
        do {
            _ = try await subject.authenticate(responder: ScriptedResponder([.biometric(.cancel)]))
            Issue.record("a cancelled authentication succeeded")
        } catch let error as GenericError {
            #expect(error.code == .actionCancelled)
        }
        #expect(await subject.sentMessages.count == sent)
        await sensor.enqueue(.unavailable)
        #expect(
            try await subject.authenticate(responder: ScriptedResponder([.biometric(.defaultPrompt)]))
                == .fallbackToPin(reason: nil)
        )
        #expect(await subject.sentMessages.count == sent + 1)  // the nonce request only
        #expect(await subject.registration != nil)
        #expect(await subject.failureCount == 0)
    }

    @Test("a failed scan is reported, refused as biometricAuthenticatorFailure and counted")
    func noMatch() async throws {
        let sensor = SimulatedBiometricSensor(script: [.noMatch])
        let subject = try await enrolled(sensor, maximumFailures: 5)
        do {
            _ = try await subject.authenticate(responder: ScriptedResponder([.biometric(.defaultPrompt)]))
            Issue.record("a failed scan authenticated")
        } catch {
            #expect(code(error) == "biometricAuthenticatorFailure")
        }
        #expect(await subject.failureCount == 1)
        let next = ScriptedResponder([.biometric(.defaultPrompt)])
        _ = try await subject.authenticate(responder: next)
        #expect(await subject.failureCount == 0)
        // The challenge after the counted failure says how many attempts are left.
        guard case .biometric(let challenge) = await next.received.first else {
            Issue.record("no biometric challenge")
            return
        }
        #expect(challenge.remainingFailureCount == 4)
    }

    @Test(
        "a sensor lockout or a key the OS invalidated deregisters the authenticator: key and registration gone",
        arguments: ["lockout", "invalidated"]
    )
    func deregisters(cause: String) async throws {
        let sensor = SimulatedBiometricSensor()
        let subject = try await enrolled(sensor)
        if cause == "lockout" { await sensor.enqueue(.lockout) } else { await sensor.changeEnrolledBiometrics() }
        do {
            _ = try await subject.authenticate(responder: ScriptedResponder([.biometric(.defaultPrompt)]))
            Issue.record("authenticated after \(cause)")
        } catch {
            #expect(code(error) == "authenticatorDeregistered")
            #expect((error as? AuthenticationError)?.details.authenticatorID == "subject")
        }
        #expect(await subject.storage.values.isEmpty)
        #expect(await subject.registration == nil)
        #expect(await subject.failureCount == 0)
    }

    @Test("a proof signed by another device's key is refused as biometricAuthenticatorFailure and counted")
    func otherDevicesKey() async throws {
        let subject = try await enrolled()
        let other = try await enrolled()
        // The subject's device now holds the other device's key: it signs the right nonce with the
        // wrong key.
        await subject.storage.removeAll()
        for (key, value) in await other.storage.values { await subject.storage.setValue(value, forKey: key) }
        do {
            _ = try await subject.authenticate(responder: ScriptedResponder([.biometric(.defaultPrompt)]))
            Issue.record("another device's key authenticated")
        } catch let error as AuthenticationError {
            #expect(error.code == .biometricAuthenticatorFailure)
        }
        #expect(await subject.countedAttempts == 1)
        #expect(await subject.registration != nil)

        // Straight to the verifier: the other device's recorded proof, against the subject's nonce.
        let recorded = try await authenticationMessages(other)
        let session = try await nonceSession(subject, begin: recorded[0])
        let outcome = try await subject.verifier.verify(
            request(subject, recorded[1], session: session, registration: await subject.registration)
        )
        let failure = try #require(refusal(outcome))
        #expect(failure.error.code == .biometricAuthenticatorFailure)
        #expect(failure.countsAsAttempt)
        #expect(!failure.removesRegistration)
    }

    @Test("a replayed proof (the same bytes) is refused in a new flow, against a new nonce")
    func replayedProof() async throws {
        let subject = try await enrolled()
        let recorded = try await authenticationMessages(subject)
        #expect(recorded.count == 2)  // begin, prove
        #expect(await subject.replay(recorded) == false)
        #expect(await subject.countedAttempts == 1)

        let session = try await nonceSession(subject, begin: recorded[0])
        let outcome = try await subject.verifier.verify(
            request(subject, recorded[1], session: session, registration: await subject.registration)
        )
        let failure = try #require(refusal(outcome))
        #expect(failure.error.code == .biometricAuthenticatorFailure)
        #expect(failure.countsAsAttempt)
    }

    @Test("a proof, a failed scan or an invalidation without a nonce first is refused as requestInvalid")
    func outOfOrder() async throws {
        let sensor = SimulatedBiometricSensor()
        let subject = try await enrolled(sensor)
        let registration = await subject.registration
        let prove = try await authenticationMessages(subject)[1]
        await sensor.enqueue(.noMatch)
        let noMatch = try await authenticationMessages(subject, expecting: "biometricAuthenticatorFailure")[1]
        await sensor.changeEnrolledBiometrics()
        let invalidate = try await authenticationMessages(subject, expecting: "authenticatorDeregistered")[1]
        for message in [prove, noMatch, invalidate] {
            await #expect {
                _ = try await subject.verifier.verify(
                    request(subject, message, session: nil, registration: registration)
                )
            } throws: { error in
                (error as? GenericError)?.code == .requestInvalid
            }
        }
    }

    @Test("without a registration the server half answers authenticatorNotRegistered and forgets it")
    func notRegistered() async throws {
        let subject = try await enrolled()
        let begin = try await authenticationMessages(subject)[0]
        let outcome = try await subject.verifier.verify(request(subject, begin, session: nil, registration: nil))
        let failure = try #require(refusal(outcome))
        #expect(failure.error.code == .authenticatorNotRegistered)
        #expect(!failure.countsAsAttempt)
        #expect(failure.removesRegistration)
    }

    @Test(
        "the configuration is checked with clear messages",
        arguments: [
            (["latencyMilliseconds": -1], "config.latencyMilliseconds: expected a value from 0 to 10000, found -1"),
            (
                ["latencyMilliseconds": 10_001],
                "config.latencyMilliseconds: expected a value from 0 to 10000, found 10001"
            ),
            (
                ["script": ["match", "wink"]],
                #"config.script[1]: expected one of: match, noMatch, lockout, unavailable; found "wink""#
            ),
            (["script": "match"], #"config.script: expected a list, found "match""#),
            (["colour": "red"], "config.colour: unknown key; expected one of: latencyMilliseconds, script, sensor"),
            (
                ["sensor": "shared", "script": ["match"]],
                "config.sensor: a shared sensor is scripted by its host; drop script and latencyMilliseconds"
            ),
        ] as [([String: ConfigValue], String)]
    )
    func configuration(config: [String: ConfigValue], expected: String) {
        #expect(
            PluginHarness.configurationProblem(BiometricAuthenticatorPlugin.self, config: config, environment: hosting)
                == expected
        )
    }

    /// A host that provides the sensor named `shared`.
    private var hosting: PluginEnvironment {
        PluginEnvironment(
            logger: RecordingLogger().logger,
            services: PluginServices().setting(
                SimulatedBiometricSensorKey.self,
                named: "shared",
                to: SimulatedBiometricSensor()
            )
        )
    }

    @Test("every documented option is accepted")
    func acceptedConfiguration() {
        for config: [String: ConfigValue] in [
            [:], ["sensor": "shared"],
            ["script": ["match", "noMatch", "lockout", "unavailable"], "latencyMilliseconds": 10_000],
        ] {
            let problem = PluginHarness.configurationProblem(
                BiometricAuthenticatorPlugin.self,
                config: config,
                environment: hosting
            )
            #expect(problem == nil)
        }
    }

    @Test("a sensor the host does not provide is refused at load, naming the sensors it does provide")
    func missingSensor() {
        // `notASensor` is provided, but under another key of the same name: not a sensor.
        let environment = PluginEnvironment(
            logger: RecordingLogger().logger,
            services: PluginServices()
                .setting(SimulatedBiometricSensorKey.self, named: "lab", to: SimulatedBiometricSensor())
                .setting(LookalikeKey.self, named: "notASensor", to: "a string")
        )
        for (name, expected) in [
            ("missing", #"the host provides no simulated biometric sensor named "missing"; it provides: lab"#),
            ("notASensor", #"the host provides no simulated biometric sensor named "notASensor"; it provides: lab"#),
        ] {
            do {
                _ = try PluginHarness.authenticator(
                    BiometricAuthenticatorPlugin.self,
                    config: ["sensor": .string(name)],
                    environment: environment
                )
                Issue.record("sensor \(name) was accepted")
            } catch {
                #expect("\(error)" == #"test: authenticators[0] (id "subject"): config.sensor: "# + expected)
            }
        }
        #expect(throws: ManifestError.self) {
            _ = try PluginHarness.authenticator(BiometricAuthenticatorPlugin.self, config: ["sensor": "missing"])
        }
    }

    @Test("a sensor of its own follows the manifest's script and latency, then answers match")
    func ownScriptedSensor() async throws {
        let own = try AuthenticatorHarness(
            PluginHarness.authenticator(
                BiometricAuthenticatorPlugin.self,
                config: ["script": ["noMatch", "unavailable"], "latencyMilliseconds": 20]
            )
        )
        _ = try await own.enroll(responder: ScriptedResponder([]))
        _ = try await authenticationMessages(own, expecting: "biometricAuthenticatorFailure")
        #expect(
            try await own.authenticate(responder: ScriptedResponder([.biometric(.defaultPrompt)]))
                == .fallbackToPin(reason: nil)
        )
        _ = try await authenticationMessages(own)
    }

    @Test("a shared sensor's latency delays the scan, which still completes")
    func latency() async throws {
        let sensor = SimulatedBiometricSensor(latency: .milliseconds(20))
        let subject = try await enrolled(sensor)
        _ = try await authenticationMessages(subject)
        #expect(await sensor.prompts == [BiometricAuthenticator.defaultPrompt])
    }

    @Test("the error of the previous attempt reaches the app with the biometric challenge")
    func previousError() async throws {
        let subject = try await enrolled()
        let script = ScriptedResponder([.biometric(.defaultPrompt)])
        _ = try await subject.authenticate(
            responder: script,
            previousError: AuthenticationError(.biometricAuthenticatorFailure)
        )
        guard case .biometric(let challenge) = try #require(await script.received.first) else {
            Issue.record("no biometric challenge")
            return
        }
        #expect(challenge.error?.codeName == "biometricAuthenticatorFailure")
        #expect(challenge.authenticator.id == "subject")
        #expect(challenge.profile == subject.profile)
        #expect(await script.isFinished)
    }

    @Test("enrolment keeps only the public key on the server, and the key and OS enrolment on the device")
    func enrolmentData() async throws {
        let sensor = SimulatedBiometricSensor()
        await sensor.changeEnrolledBiometrics()
        let subject = try await enrolled(sensor)
        let registration = try #require(await subject.registration)
        let object = try #require(try JSONSerialization.jsonObject(with: registration) as? [String: Any])
        #expect(Array(object.keys) == ["publicKey"])
        let publicKey = try #require((object["publicKey"] as? String).flatMap { Data(base64Encoded: $0) })
        #expect(publicKey.count == 65 && publicKey.first == 0x04)  // an uncompressed P-256 point
        #expect(await subject.storage.values.count == 2)
        // The key was made under OS enrolment 1: it still opens now, and not after another change.
        _ = try await authenticationMessages(subject)
        await sensor.changeEnrolledBiometrics()
        _ = try await authenticationMessages(subject, expecting: "authenticatorDeregistered")
    }

    @Test("a locked-out sensor stays locked out until reset; each lockout deregisters the authenticator")
    func lockoutPersists() async throws {
        let sensor = SimulatedBiometricSensor(script: [.lockout, .match])
        let subject = try await enrolled(sensor)
        _ = try await authenticationMessages(subject, expecting: "authenticatorDeregistered")
        #expect(await sensor.isLockedOut)
        // Enrolled again, the sensor still answers lockout (its script's match is not reached).
        _ = try await subject.enroll(responder: ScriptedResponder([]))
        _ = try await authenticationMessages(subject, expecting: "authenticatorDeregistered")
        #expect(await subject.registration == nil)
        await sensor.resetLockout()
        _ = try await subject.enroll(responder: ScriptedResponder([]))
        _ = try await authenticationMessages(subject)
        #expect(await sensor.prompts.count == 3)
    }

    @Test("the sensor answers its script, then its default, and records every prompt")
    func sensorScript() async {
        let sensor = SimulatedBiometricSensor(script: [.noMatch])
        await sensor.enqueue(.unavailable, .match)
        await sensor.setDefault(.noMatch)
        var answers: [SensorResult] = []
        for index in 0..<5 { answers.append(await sensor.scan(prompt: "scan \(index)")) }
        #expect(answers == [.noMatch, .unavailable, .match, .noMatch, .noMatch])
        #expect(await sensor.prompts == (0..<5).map { "scan \($0)" })
        #expect(await sensor.isLockedOut == false)
    }
}

/// A service of another kind that shares the sensor key's name: the plugin must never take it for
/// a sensor.
private enum LookalikeKey: PluginServiceKey {
    typealias Value = String
    static let name = SimulatedBiometricSensorKey.name
}
