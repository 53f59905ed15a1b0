import BiometricAuthenticator
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseServer

@Suite("OTP mobile authentication", .serialized)
struct OTPMobileAuthTests {
    @Test(
        "confirmation: nothing is pushed; the device that scans the code claims it, approves or denies; the portal sees who",
        arguments: Mode.allCases
    )
    func confirmation(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture)
            let portal = portalClient(fixture)
            let started = try await portal.start(
                PortalMobileAuthRequest(
                    userID: nil,
                    type: "login-qr",
                    secureMessage: "Sign in from Firefox on Linux, Utrecht",
                    qrCode: PortalQRCodeFormat.none
                )
            )
            #expect(started.authMethod == .confirmation)
            #expect(started.timeToLive == 60_000)
            #expect(started.devices == 0)
            #expect(started.number == nil)
            #expect(started.qrCode == nil)
            let otp = try #require(started.otp)
            #expect(MobileAuthOTP(otp)?.transactionID == started.transactionID)
            #expect(client.canHandleOTPMobileAuthRequest(otp: otp))
            #expect(client.canHandleOTPMobileAuthRequest(otp: " \(otp)\n"))
            #expect(!client.canHandleOTPMobileAuthRequest(otp: started.transactionID))
            #expect(!client.canHandleOTPMobileAuthRequest(otp: "https://shop.example/pay?id=42"))

            // Until a device claims it, the transaction has no user, and no device has a request.
            let waiting = try await portal.result(started.transactionID)
            #expect(waiting.status == .pending)
            #expect(waiting.userID == nil)
            #expect(waiting.identityProvider == nil)
            #expect(fixture.pushes.delivered(to: "apns-token-0001").isEmpty)
            #expect(try await client.pendingPushMobileAuthRequests().isEmpty)

            let accept = ScriptedResponder([.confirmation(.accept)])
            let result = await client.handleOTPMobileAuthRequest(otp: otp, delegate: accept)
            guard case .approved = result else {
                Issue.record("not approved: \(result)")
                return
            }
            #expect(try lastClaim(fixture).status == 200)
            let handled = try #require(await accept.handled.first?.0)
            #expect(handled.transactionID == started.transactionID)
            #expect(handled.profile == profile)
            #expect(handled.type == "login-qr")
            #expect(handled.method == .confirmation)
            #expect(handled.message == "Sign in?")
            #expect(handled.secureMessage == "Sign in from Firefox on Linux, Utrecht")
            let approved = try await portal.result(started.transactionID)
            #expect(approved.status == .approved)
            #expect(approved.isAuthenticated)
            #expect(approved.authenticationMethod == "confirmation")
            #expect(approved.userID == "jane@example.com")
            #expect(approved.identityProvider == "codes")

            // A code the portal made for Jane, denied with a reason: the portal hears the reason.
            let second = try await portal.start(
                PortalMobileAuthRequest(userID: "jane@example.com", type: "login-qr", qrCode: PortalQRCodeFormat.none)
            )
            #expect(second.devices == 0)
            let deny = ScriptedResponder([.confirmation(.deny(.notRecognised))])
            let denial = await client.handleOTPMobileAuthRequest(
                otp: try #require(second.otp),
                profile: profile,
                delegate: deny
            )
            guard case .denied = denial else {
                Issue.record("not denied: \(denial)")
                return
            }
            let denied = try await portal.result(second.transactionID)
            #expect(denied.status == .denied)
            #expect(!denied.isAuthenticated)
            #expect(denied.reason == "not_recognised")
            #expect(denied.userID == "jane@example.com")
            #expect(await deny.handled.count == 1)
            #expect(fixture.pushes.delivered(to: "apns-token-0001").isEmpty)
        }
    }

    @Test(
        "PIN with signing: the sealed message is shown, the signature verified; wrong PINs count on the push counter",
        arguments: Mode.allCases
    )
    func pinAndSigning(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 3) { fixture in
            let (client, _) = try await enrolledDevice(fixture)
            let portal = portalClient(fixture)
            let (started, otp) = try await startOTP(
                fixture,
                "payment-qr",
                message: "Pay €120.00 to ACME?",
                secureMessage: "€120.00 to ACME B.V., invoice 2024-117",
                signingData: "pay 120.00 EUR to NL91ABNA0417164300"
            )
            #expect(started.authMethod == .pin)
            let delegate = ScriptedResponder([.pin("111111"), .pin("258147")])
            let result = await client.handleOTPMobileAuthRequest(otp: otp, delegate: delegate)
            guard case .approved = result else {
                Issue.record("not approved: \(result)")
                return
            }
            let asked = pinChallenges(await delegate.received)
            #expect(asked.count == 2)
            #expect(asked.first?.error == nil)
            #expect(asked.first?.remainingFailureCount == 3)
            #expect(asked.last?.error?.codeName == "invalidPin")
            #expect(asked.last?.remainingFailureCount == 2)
            let handled = try #require(await delegate.handled.first?.0)
            #expect(handled.message == "Pay €120.00 to ACME?")
            #expect(handled.secureMessage == "€120.00 to ACME B.V., invoice 2024-117")
            #expect(handled.signingData == "pay 120.00 EUR to NL91ABNA0417164300")
            let approved = try await portal.result(started.transactionID)
            #expect(approved.status == .approved)
            #expect(approved.authenticationMethod == "pin")
            #expect(approved.signatureVerified == true)
            #expect(approved.signature != nil)
            #expect(approved.userPublicKey != nil)
            #expect(approved.userID == "jane@example.com")
            #expect(try await failures(fixture) == 0)

            // A wrong PIN, then the user gives up: the failure stays on the profile's counter...
            let (cancelled, cancelledOTP) = try await startOTP(fixture, "payment-qr", signingData: "pay 5 EUR")
            let giveUp = await client.handleOTPMobileAuthRequest(
                otp: cancelledOTP,
                delegate: ScriptedResponder([.pin("111111"), .cancel])
            )
            guard case .failed(let error as GenericError) = giveUp else {
                Issue.record("not cancelled: \(giveUp)")
                return
            }
            #expect(error.code == .actionCancelled)
            #expect(try await failures(fixture) == 1)
            #expect(try await portal.result(cancelled.transactionID).status == .denied)

            // ...the one a push request's PIN counts on: its next wrong PIN leaves one attempt.
            _ = try await Portal(fixture: fixture).started("payment", message: "Pay €9?", signingData: "pay 9 EUR")
            let push = ScriptedResponder([.pin("222222"), .pin("258147")])
            let pushed = await client.handlePushMobileAuthRequest(
                try pending(client, from: lastPush(fixture)),
                delegate: push
            )
            guard case .approved = pushed else {
                Issue.record("the push was not approved: \(pushed)")
                return
            }
            let pushAsked = pinChallenges(await push.received)
            #expect(pushAsked.first?.remainingFailureCount == 2)
            #expect(pushAsked.last?.remainingFailureCount == 1)
            #expect(try await failures(fixture) == 0)

            // Wrong PINs for a scanned code deregister the user exactly as for a push.
            let (last, lastOTP) = try await startOTP(fixture, "payment-qr", signingData: "pay 1 EUR")
            let wrong = await client.handleOTPMobileAuthRequest(
                otp: lastOTP,
                delegate: ScriptedResponder([.pin("111111"), .pin("222222"), .pin("333333")])
            )
            guard case .failed(let deregistered as GenericError) = wrong else {
                Issue.record("not refused: \(wrong)")
                return
            }
            #expect(deregistered.code == .userDeregistered)
            #expect(try await fixture.count("profiles") == 0)
            #expect(try await client.userProfiles().isEmpty)
            let ended = try await portal.result(last.transactionID)
            #expect(ended.status == .denied)
            #expect(ended.reason == "user_deregistered")
        }
    }

    @Test(
        "biometric and custom types: the authenticator approves, the PIN is the fallback, custom info reaches the app",
        arguments: Mode.allCases
    )
    func authenticatorTypes(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 5) { fixture in
            let (client, _) = try await enrolledDevice(fixture, token: nil)
            let portal = portalClient(fixture)

            // Without a registered biometric authenticator, the PIN approves a biometric type.
            let (withoutFace, first) = try await startOTP(fixture, "face-qr")
            #expect(withoutFace.authMethod == .biometric)
            let pinOnly = ScriptedResponder([.pin("258147")])
            guard case .approved = await client.handleOTPMobileAuthRequest(otp: first, delegate: pinOnly) else {
                Issue.record("the PIN did not approve")
                return
            }
            #expect(await pinOnly.receivedKinds == ["pin"])
            #expect(try await portal.result(withoutFace.transactionID).authenticationMethod == "pin")

            _ = try await client.registerAuthenticator("face", delegate: ScriptedResponder([.pin("258147")]))
            let (face, second) = try await startOTP(fixture, "face-qr")
            let scan = ScriptedResponder([.biometric(.prompt("Approve the sign-in"))])
            guard case .approved = await client.handleOTPMobileAuthRequest(otp: second, delegate: scan) else {
                Issue.record("the scan did not approve")
                return
            }
            #expect(await scan.receivedKinds == ["biometric"])
            #expect(await fixture.sensor.prompts.last == "Approve the sign-in")
            let scanned = try await portal.result(face.transactionID)
            #expect(scanned.status == .approved)
            #expect(scanned.authenticationMethod == "face")
            #expect(scanned.userID == "jane@example.com")

            // The user prefers the PIN.
            let (fallback, third) = try await startOTP(fixture, "face-qr")
            let choosePin = ScriptedResponder([.biometric(.fallbackToPin), .pin("258147")])
            guard case .approved = await client.handleOTPMobileAuthRequest(otp: third, delegate: choosePin) else {
                Issue.record("the fallback did not approve")
                return
            }
            #expect(await choosePin.receivedKinds == ["biometric", "pin"])
            let fellBack = try await portal.result(fallback.transactionID)
            #expect(fellBack.status == .approved)
            #expect(fellBack.authenticationMethod == "pin")

            // A custom authenticator: its info reaches the app on success.
            try await add("scripted", to: client)
            let (custom, fourth) = try await startOTP(fixture, "custom-qr")
            #expect(custom.authMethod == .custom)
            fixture.script.answer(2000)
            let data = ScriptedResponder([.customAuthenticator(.data("signed-by-token"))])
            let result = await client.handleOTPMobileAuthRequest(otp: fourth, delegate: data)
            guard case .approved(let info) = result else {
                Issue.record("custom did not approve: \(result)")
                return
            }
            #expect(info?.status == 2000)
            #expect(info?.data == "status 2000")
            #expect(await data.handled.first?.1?.status == 2000)
            #expect(try await portal.result(custom.transactionID).authenticationMethod == "scripted")
        }
    }

    @Test(
        "replay: a code claimed again is alreadyHandled; the claim and the answer sent again take nothing",
        arguments: Mode.allCases
    )
    func replay(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            let (started, otp) = try await startOTP(fixture, "login-qr")
            guard
                case .approved = await client.handleOTPMobileAuthRequest(
                    otp: otp,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("not approved")
                return
            }
            let firstClaim = try #require(claims(fixture).last?.0)
            let firstAnswer = try #require(answers(fixture).last?.0)

            // The same code again, through the SDK: the server refuses it; the user is asked nothing.
            let again = ScriptedResponder([.confirmation(.accept)])
            let second = await client.handleOTPMobileAuthRequest(otp: otp, delegate: again)
            #expect(requestError(second)?.code == .alreadyHandled, "\(second)")
            #expect(claims(fixture).count == 2)
            #expect(try lastClaim(fixture).status == 409)
            #expect(try lastClaim(fixture).code == 9029)
            #expect(await again.received.isEmpty)

            // The recorded claim as it was (its proof spent), and with a fresh proof.
            #expect(try await fixture.transport.send(firstClaim).status != 200)
            let fresh = try await claim(fixture, client, profile, otp: otp)
            #expect(fresh.status == 409)
            #expect(try errorBody(fresh).gatehouseCode == 9029)

            // The recorded answer as it was, and with a fresh proof: one approval stands.
            #expect(try await fixture.transport.send(firstAnswer).status == 409)
            var reanswered = firstAnswer
            reanswered.setHeader(
                "DPoP",
                try await client.dpopProof(
                    method: "POST",
                    url: fixture.transport.baseURL + Endpoint.mobileAuthTransactionPrefix + started.transactionID
                        + "/answer"
                )
            )
            let replayed = try await fixture.transport.send(reanswered)
            #expect(replayed.status == 409)
            #expect(try errorBody(replayed).gatehouseCode == 9029)
            #expect(answers(fixture).filter { $0.1.status == 200 }.count == 1)
            let result = try await portalClient(fixture).result(started.transactionID)
            #expect(result.status == .approved)
            #expect(result.userID == "jane@example.com")
        }
    }

    @Test(
        "another user's device cannot claim Jane's code (notFound) and changes nothing; a code for anyone goes to the first",
        arguments: Mode.allCases
    )
    func anotherUsersDevice(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (jane, _) = try await enrolledDevice(fixture, name: "jane", token: nil)
            let (bob, _) = try await enrolledDevice(fixture, name: "bob", email: "bob@example.com", token: nil)
            let portal = portalClient(fixture)
            let (started, otp) = try await startOTP(
                fixture,
                "payment-qr",
                user: "jane@example.com",
                secureMessage: "€7.00 to the bakery",
                signingData: "pay 7 EUR"
            )
            let before = try await fixture.snapshotMobileAuth()
            let stranger = ScriptedResponder([.pin("258147")])
            let refused = await bob.handleOTPMobileAuthRequest(otp: otp, delegate: stranger)
            #expect(requestError(refused)?.code == .notFound, "\(refused)")
            #expect(try lastClaim(fixture).status == 404)
            #expect(try lastClaim(fixture).code == 10013)
            #expect(await stranger.received.isEmpty)
            #expect(await stranger.handled.isEmpty)
            #expect(try await fixture.snapshotMobileAuth() == before)
            let untouched = try await portal.result(started.transactionID)
            #expect(untouched.status == .pending)
            #expect(untouched.userID == "jane@example.com")

            // Jane's device still claims the same code, and approves it.
            let owner = ScriptedResponder([.pin("258147")])
            guard case .approved = await jane.handleOTPMobileAuthRequest(otp: otp, delegate: owner) else {
                Issue.record("Jane's device could not approve after Bob's refused claim")
                return
            }
            #expect(await owner.handled.first?.0.secureMessage == "€7.00 to the bakery")
            let approved = try await portal.result(started.transactionID)
            #expect(approved.status == .approved)
            #expect(approved.userID == "jane@example.com")
            #expect(approved.signatureVerified == true)

            // A code for whoever scans it: Bob scans first and answers; Jane is too late.
            let (open, openOTP) = try await startOTP(fixture, "login-qr")
            guard
                case .approved = await bob.handleOTPMobileAuthRequest(
                    otp: openOTP,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("Bob could not approve a code for anyone")
                return
            }
            let late = await jane.handleOTPMobileAuthRequest(
                otp: openOTP,
                delegate: ScriptedResponder([.confirmation(.accept)])
            )
            #expect(requestError(late)?.code == .alreadyHandled, "\(late)")
            let bobs = try await portal.result(open.transactionID)
            #expect(bobs.status == .approved)
            #expect(bobs.userID == "bob@example.com")

            // The portal cannot name a user with no enrolled device.
            let nobody = try await Portal(fixture: fixture).start(
                PortalMobileAuthRequest(userID: "nobody@example.com", type: "login-qr")
            )
            #expect(nobody.status == 404, "\(String(decoding: nobody.body, as: UTF8.self))")
            #expect(try errorBody(nobody).errorDescription.contains("no device enrolled"))
            #expect(try await fixture.count("mobile_transactions") == 2)
        }
    }

    @Test(
        "a profile not enrolled is refused (notEnrolled 9021) and changes nothing; enrolled, it claims the same code",
        arguments: Mode.allCases
    )
    func notEnrolled(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            let (started, otp) = try await startOTP(fixture, "login-qr")
            let before = try await fixture.snapshotMobileAuth()
            let delegate = ScriptedResponder([.confirmation(.accept)])
            // Named, the profile's claim reaches the server, which refuses it.
            let refused = await client.handleOTPMobileAuthRequest(otp: otp, profile: profile, delegate: delegate)
            #expect(requestError(refused)?.code == .notEnrolled, "\(refused)")
            #expect(claims(fixture).count == 1)
            #expect(try lastClaim(fixture).code == 9021)
            #expect(try lastClaim(fixture).status == 403)
            #expect(await delegate.received.isEmpty)
            #expect(try await fixture.snapshotMobileAuth() == before)
            // Not named, the SDK finds no enrolled profile and asks the server nothing.
            let unnamed = await client.handleOTPMobileAuthRequest(otp: otp, delegate: delegate)
            #expect(requestError(unnamed)?.code == .notEnrolled, "\(unnamed)")
            #expect(claims(fixture).count == 1)

            try await client.enrollForMobileAuth()
            guard case .approved = await client.handleOTPMobileAuthRequest(otp: otp, delegate: delegate) else {
                Issue.record("the enrolled profile could not claim the code")
                return
            }
            let approved = try await portalClient(fixture).result(started.transactionID)
            #expect(approved.status == .approved)
            #expect(approved.userID == "jane@example.com")
        }
    }

    @Test(
        "a wrong code for a real transaction, an unknown or push transaction: notFound; malformed: notHandleable",
        arguments: Mode.allCases
    )
    func wrongAndMalformedCodes(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture)
            let pushed = try await Portal(fixture: fixture).started("login")
            let (started, otp) = try await startOTP(fixture, "login-qr")
            let code = try #require(MobileAuthOTP(otp)).code
            let before = try await fixture.snapshotMobileAuth()
            let delegate = ScriptedResponder([])

            let forgeries = [
                // This transaction, with a code of the right form that is not its code.
                MobileAuthOTP(
                    transactionID: started.transactionID,
                    code: Data.random(count: 16).base64URLEncodedString
                ),
                // Its code with a transaction that does not exist.
                MobileAuthOTP(transactionID: Data.random(count: 24).base64URLEncodedString, code: code),
                // A push transaction: it has no code to claim.
                MobileAuthOTP(transactionID: pushed.transactionID, code: code),
            ]
            for forged in forgeries {
                #expect(client.canHandleOTPMobileAuthRequest(otp: forged.text))
                let result = await client.handleOTPMobileAuthRequest(otp: forged.text, delegate: delegate)
                #expect(requestError(result)?.code == .notFound, "\(result)")
                #expect(try lastClaim(fixture).status == 404)
                #expect(try lastClaim(fixture).code == 10013)
            }
            #expect(claims(fixture).count == forgeries.count)

            // Not codes at all: the SDK says so without asking the server; the server says the same.
            let fields = { (transaction: String, otp: String) in
                Data(#"{"transaction_id":"\#(transaction)","otp":"\#(otp)"}"#.utf8).base64URLEncodedString
            }
            let malformed = [
                "", "hello", started.transactionID, String(otp.dropLast(4)), Data(otp.utf8).base64EncodedString(),
                fields(started.transactionID, "short"), fields("a/b", code),
                fields(started.transactionID, String(repeating: "A", count: 65)),
            ]
            for text in malformed {
                #expect(!client.canHandleOTPMobileAuthRequest(otp: text), "\(text)")
                let result = await client.handleOTPMobileAuthRequest(otp: text, delegate: delegate)
                #expect(requestError(result)?.code == .notHandleable, "\(text): \(result)")
                let response = try await claim(fixture, client, profile, otp: text)
                #expect(response.status == 400, "\(text)")
                #expect(try errorBody(response).gatehouseCode == 10018, "\(text)")
            }
            #expect(claims(fixture).count == forgeries.count + malformed.count)
            #expect(await delegate.received.isEmpty)
            #expect(try await fixture.snapshotMobileAuth() == before)

            // The real code still works.
            guard
                case .approved = await client.handleOTPMobileAuthRequest(
                    otp: otp,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("the real code no longer works")
                return
            }
            #expect(try await portalClient(fixture).result(pushed.transactionID).status == .pending)
        }
    }

    @Test(
        "a code scanned after its type's time to live is notFound, and the portal sees the transaction expired",
        arguments: Mode.allCases
    )
    func expiry(mode: Mode) async throws {
        let clock = ManualClock(Date())
        try await withFixture(mode, clock: clock) { fixture in
            let (client, _) = try await enrolledDevice(fixture, token: nil)
            let portal = portalClient(fixture)
            let (late, lateOTP) = try await startOTP(fixture, "login-qr")
            let (inTime, inTimeOTP) = try await startOTP(fixture, "login-qr")
            #expect(late.timeToLive == 60_000)

            clock.advance(by: 59)
            guard
                case .approved = await client.handleOTPMobileAuthRequest(
                    otp: inTimeOTP,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("a code scanned in time was refused")
                return
            }

            clock.advance(by: 2)
            let delegate = ScriptedResponder([.confirmation(.accept)])
            let expired = await client.handleOTPMobileAuthRequest(otp: lateOTP, delegate: delegate)
            #expect(requestError(expired)?.code == .notFound, "\(expired)")
            #expect(try lastClaim(fixture).status == 404)
            #expect(try lastClaim(fixture).code == 10013)
            #expect(await delegate.received.isEmpty)
            let result = try await portal.result(late.transactionID)
            #expect(result.status == .expired)
            #expect(!result.isAuthenticated)
            #expect(result.userID == nil)
            #expect(try await portal.result(inTime.transactionID).status == .approved)
        }
    }

    @Test(
        "a code for anyone scanned by eight users' devices at once: one claim succeeds, seven are alreadyHandled",
        arguments: Mode.allCases
    )
    func concurrentClaims(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            var devices: [(client: UserClient, email: String)] = []
            for index in 0..<8 {
                let email = "user\(index)@example.com"
                let (client, _) = try await enrolledDevice(fixture, name: "device-\(index)", email: email, token: nil)
                devices.append((client, email))
            }
            let (started, otp) = try await startOTP(fixture, "login-qr")
            let results = await withTaskGroup(of: (Int, MobileAuthHandlingResult).self) { group in
                for (index, device) in devices.enumerated() {
                    group.addTask {
                        let delegate = ScriptedResponder([.confirmation(.accept)])
                        return (index, await device.client.handleOTPMobileAuthRequest(otp: otp, delegate: delegate))
                    }
                }
                var all: [(Int, MobileAuthHandlingResult)] = []
                for await result in group { all.append(result) }
                return all
            }
            let winners = results.filter { isApproved($0.1) }
            #expect(winners.count == 1)
            for (index, result) in results where !isApproved(result) {
                #expect(requestError(result)?.code == .alreadyHandled, "device \(index): \(result)")
            }
            let statuses = claims(fixture).map(\.1.status)
            #expect(statuses.count == 8)
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 == 409 }.count == 7)
            let winner = try #require(winners.first?.0)
            let result = try await portalClient(fixture).result(started.transactionID)
            #expect(result.status == .approved)
            #expect(result.userID == devices[winner].email)
        }
    }

    @Test(
        "eight copies of the app answer one claimed code at once, each having opened it: exactly one is taken",
        arguments: Mode.allCases
    )
    func concurrentAnswers(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            let (started, otp) = try await startOTP(fixture, "login-qr")
            // The device claims the code (what the SDK sends first)...
            let claimed = try await claim(fixture, client, profile, otp: otp)
            #expect(claimed.status == 200, "\(String(decoding: claimed.body, as: UTF8.self))")
            let event = try WireCoding.decode(MobileAuthEvent.self, from: claimed.body)
            #expect(event.request.transactionID == started.transactionID)
            #expect(event.request.profileID == profile.id)
            #expect(event.sealed != nil)

            // ...then eight copies of the app on it (one data directory) take the request the
            // claim answered (the pending list shows pushes only), open it, and answer together
            // once all eight hold it.
            var copies: [(UserClient, PendingMobileAuthRequest)] = []
            for _ in 0..<8 {
                let copy = try fixture.client("device")
                #expect(try await copy.pendingPushMobileAuthRequests().isEmpty)
                copies.append((copy, try pending(copy, from: event.request)))
            }
            let gate = Gate(parties: copies.count)
            let results = await withTaskGroup(of: MobileAuthHandlingResult.self) { group in
                for (copy, request) in copies {
                    group.addTask { await copy.handlePushMobileAuthRequest(request, delegate: GatedAcceptance(gate)) }
                }
                var all: [MobileAuthHandlingResult] = []
                for await result in group { all.append(result) }
                return all
            }
            #expect(gate.arrived == 8)
            #expect(results.filter(isApproved).count == 1)
            for result in results where !isApproved(result) {
                #expect(requestError(result)?.code == .alreadyHandled, "\(result)")
            }
            #expect(answers(fixture).filter { $0.1.status == 200 }.count == 1)
            #expect(answers(fixture).filter { $0.1.status == 409 }.count == 7)
            let row = try #require(try await transactionRow(fixture, started.transactionID))
            #expect(row["status"] as String == "approved")
            let result = try await portalClient(fixture).result(started.transactionID)
            #expect(result.status == .approved)
            #expect(result.userID == "jane@example.com")
        }
    }

    @Test(
        "the secure message, the signing data and the code are in no database byte, before or after the claim",
        arguments: Mode.allCases
    )
    func sealedAtRest(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, _) = try await enrolledDevice(fixture, token: nil)
            let visible = "Approve payment PUBLIC-7c1d"
            let secret = "Transfer 4711.93 EUR to NL20INGB0001234567 ref Q7X-SECRET"
            let signing = "sign-this-otp-9f8e7d6c5b4a"
            let (started, otp) = try await startOTP(
                fixture,
                "payment-qr",
                message: visible,
                secureMessage: secret,
                signingData: signing
            )
            let code = try #require(MobileAuthOTP(otp)).code
            let secrets = ["NL20INGB", "Q7X-SECRET", signing, code, otp]

            let before = try await storedBytes(fixture)
            // The push-level message is kept in the clear: the scan does see what is stored.
            #expect(before.range(of: Data(visible.utf8)) != nil)
            for text in secrets { #expect(before.range(of: Data(text.utf8)) == nil, "\(text) before the claim") }
            let sealed = try #require(try await transactionRow(fixture, started.transactionID))
            #expect((sealed["otp_content"] as Data?)?.isEmpty == false)

            let delegate = ScriptedResponder([.pin("258147")])
            guard case .approved = await client.handleOTPMobileAuthRequest(otp: otp, delegate: delegate) else {
                Issue.record("not approved")
                return
            }
            let handled = try #require(await delegate.handled.first?.0)
            #expect(handled.secureMessage == secret)
            #expect(handled.signingData == signing)

            let after = try await storedBytes(fixture)
            #expect(after.range(of: Data(visible.utf8)) != nil)
            for text in secrets { #expect(after.range(of: Data(text.utf8)) == nil, "\(text) after the claim") }
            let claimed = try #require(try await transactionRow(fixture, started.transactionID))
            #expect(claimed["otp_content"] as Data? == nil)
            #expect(!fixture.serverLog.lines.joined(separator: "\n").contains(code))
            #expect(!fixture.serverLog.lines.joined(separator: "\n").contains("NL20INGB"))
            #expect(try await portalClient(fixture).result(started.transactionID).signatureVerified == true)
        }
    }

    @Test(
        "portal checks: push types need user_id and take no qr_code; qr_code png decodes to the code, svg is an SVG",
        arguments: Mode.allCases
    )
    func portalValidation(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, _) = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)

            // Push types: a user is required, and they have no code to draw.
            let refusals = [
                (PortalMobileAuthRequest(userID: nil, type: "login"), "user_id"),
                (PortalMobileAuthRequest(userID: "jane@example.com", type: "login", qrCode: .svg), "qr_code"),
                (PortalMobileAuthRequest(userID: "jane@example.com", type: "payment", qrCode: .png), "qr_code"),
                (
                    PortalMobileAuthRequest(userID: "jane@example.com", type: "login", qrCode: PortalQRCodeFormat.none),
                    "qr_code"
                ),
            ]
            for (request, field) in refusals {
                let response = try await portal.start(request)
                #expect(response.status == 400, "\(String(decoding: response.body, as: UTF8.self))")
                #expect(try errorBody(response).errorDescription.contains(field))
            }
            let unknownFormat = try await fixture.send(
                "POST",
                Endpoint.portalMobileAuth,
                body: Data(#"{"type":"login-qr","qr_code":"gif"}"#.utf8),
                headers: ["Authorization": portal.authorization]
            )
            #expect(unknownFormat.status == 400)
            #expect(try await fixture.count("mobile_transactions") == 0)
            #expect(fixture.pushes.delivered(to: "apns-token-0001").isEmpty)

            // SVG by default, and when asked.
            for format in [nil, PortalQRCodeFormat.svg] {
                let (started, _) = try await startOTP(fixture, "login-qr", qrCode: format)
                let image = try #require(started.qrCode)
                let prefix = "data:image/svg+xml;base64,"
                #expect(image.hasPrefix(prefix))
                let svg = String(
                    decoding: try #require(Data(base64Encoded: String(image.dropFirst(prefix.count)))),
                    as: UTF8.self
                )
                #expect(svg.contains("<svg"))
                #expect(svg.contains("</svg>"))
            }

            // PNG: a decoder reads exactly the code, and that code approves.
            let (started, otp) = try await startOTP(fixture, "login-qr", qrCode: .png)
            let image = try #require(started.qrCode)
            let prefix = "data:image/png;base64,"
            #expect(image.hasPrefix(prefix))
            let png = try #require(Data(base64Encoded: String(image.dropFirst(prefix.count))))
            #expect(png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
            let decoded = try await decodeQRCode(png, in: fixture.directory)
            #expect(decoded == otp)
            guard
                case .approved = await client.handleOTPMobileAuthRequest(
                    otp: decoded,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("the decoded code did not approve")
                return
            }
            #expect(try await portalClient(fixture).result(started.transactionID).status == .approved)
        }
    }

    @Test(
        "a claimed code's request is the scanning app's alone: the events channel and the pending list carry only pushes",
        arguments: Mode.allCases
    )
    func claimedCodeNotListed(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            let portal = Portal(fixture: fixture)
            let received = Mutex<[String]>([])
            let listener = Task {
                for try await request in client.mobileAuthRequests(for: profile, reconnectDelay: .milliseconds(100)) {
                    received.withLock { $0.append(request.transactionID) }
                }
            }
            defer { listener.cancel() }
            // The channel is open: a push arrives on it.
            let first = try await portal.started("login", message: "One")
            #expect(await eventually { received.withLock { $0 } == [first.transactionID] })

            // The app scans a code; while it asks its user, the transaction is claimed and pending.
            let (scanned, otp) = try await startOTP(fixture, "login-qr")
            let held = Latch()
            let release = Latch()
            let delegate = HeldAcceptance(asked: held, release: release)
            let scan = Task { await client.handleOTPMobileAuthRequest(otp: otp, delegate: delegate) }
            defer { release.open() }
            #expect(await eventually(seconds: 10) { held.isOpen })
            #expect(try lastClaim(fixture).status == 200)
            #expect(try await portal.result(scanned.transactionID).status == .pending)
            try await Task.sleep(for: .milliseconds(500))
            #expect(received.withLock { $0 } == [first.transactionID])
            #expect(try await client.pendingPushMobileAuthRequests().map(\.transactionID) == [first.transactionID])
            // A channel opened now is told what is pending: the push only.
            let late = Mutex<[String]>([])
            let lateListener = Task {
                for try await request in client.mobileAuthRequests(for: profile, reconnectDelay: .milliseconds(100)) {
                    late.withLock { $0.append(request.transactionID) }
                }
            }
            defer { lateListener.cancel() }
            #expect(await eventually { late.withLock { $0 } == [first.transactionID] })

            // A push started after the claim arrives on both channels and in the list.
            let second = try await portal.started("payment", message: "Two", signingData: "two")
            let both = [first.transactionID, second.transactionID]
            #expect(await eventually { received.withLock { $0 } == both && late.withLock { $0 } == both })
            #expect(
                try await client.pendingPushMobileAuthRequests().map(\.transactionID)
                    == [second.transactionID, first.transactionID]
            )
            try await Task.sleep(for: .milliseconds(300))
            #expect(received.withLock { $0 } == both && late.withLock { $0 } == both)

            // The scanning app still answers it.
            release.open()
            #expect(isApproved(await scan.value))
            #expect(try await portal.result(scanned.transactionID).status == .approved)
            #expect(received.withLock { $0 } == both)
        }
    }
}

// MARK: - Helpers

/// The portal of these tests through the SDK's portal client.
private func portalClient(_ fixture: Fixture) -> PortalClient {
    PortalClient(transport: fixture.transport, clientID: "portal", secret: Fixture.portalSecret)
}

/// Starts an OTP transaction (no QR picture unless `qrCode` asks); its code.
private func startOTP(
    _ fixture: Fixture,
    _ type: String,
    user: String? = nil,
    message: String? = nil,
    secureMessage: String? = nil,
    signingData: String? = nil,
    qrCode: PortalQRCodeFormat? = PortalQRCodeFormat.none
) async throws -> (PortalMobileAuthResponse, String) {
    let started = try await portalClient(fixture).start(
        PortalMobileAuthRequest(
            userID: user,
            type: type,
            message: message,
            secureMessage: secureMessage,
            signingData: signingData,
            qrCode: qrCode
        )
    )
    #expect(started.devices == 0)
    return (started, try #require(started.otp))
}

/// The device's claim of `otp` as the SDK sends it, signed with the profile's key.
private func claim(
    _ fixture: Fixture,
    _ client: UserClient,
    _ profile: UserProfile,
    otp: String
) async throws -> WireResponse {
    try await fixture.send(
        "POST",
        Endpoint.mobileAuthOTP + "?profile=" + profile.id,
        body: try WireCoding.encode(MobileAuthOTPClaim(otp: otp)),
        headers: [
            "DPoP": try await client.dpopProof(method: "POST", url: fixture.transport.baseURL + Endpoint.mobileAuthOTP)
        ]
    )
}

/// Every claim sent, with the server's answer.
private func claims(_ fixture: Fixture) -> [(WireRequest, WireResponse)] {
    fixture.transport.recorded.filter { $0.0.method == "POST" && $0.0.path.hasPrefix(Endpoint.mobileAuthOTP + "?") }
}

/// Every answer sent, with the server's answer.
private func answers(_ fixture: Fixture) -> [(WireRequest, WireResponse)] {
    fixture.transport.recorded.filter {
        $0.0.path.hasPrefix(Endpoint.mobileAuthTransactionPrefix) && $0.0.path.contains("/answer")
    }
}

/// The status and Gatehouse error code of the server's answer to the last claim.
private func lastClaim(_ fixture: Fixture) throws -> (status: Int, code: Int?) {
    let response = try #require(claims(fixture).last?.1)
    let code = response.status == 200 ? nil : try errorBody(response).gatehouseCode
    return (response.status, code)
}

private func requestError(_ result: MobileAuthHandlingResult) -> MobileAuthRequestError? {
    guard case .failed(let error as MobileAuthRequestError) = result else { return nil }
    return error
}

private func isApproved(_ result: MobileAuthHandlingResult) -> Bool {
    if case .approved = result { true } else { false }
}

private func pinChallenges(_ received: [RecordedChallenge]) -> [PinChallenge] {
    received.compactMap { challenge in
        if case .pin(let pin) = challenge { pin } else { nil }
    }
}

/// Every byte the server's database holds: the SQLite files (with the write-ahead log), or every
/// value of the PostgreSQL schema.
private func storedBytes(_ fixture: Fixture) async throws -> Data {
    switch TestDatabase.current {
    case .postgres:
        return try await fixture.storedValues()
    case .sqlite:
        let directory = fixture.directory.appendingPathComponent("server")
        var bytes = Data()
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            bytes += try Data(contentsOf: directory.appendingPathComponent(file))
        }
        #expect(!bytes.isEmpty)
        return bytes
    }
}

/// What `zbarimg` reads from `png`. Without it the test fails: scripts/install-dependencies
/// installs it (zbar-tools).
private func decodeQRCode(_ png: Data, in directory: URL) async throws -> String {
    let paths =
        ["/usr/bin"] + (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
    guard
        let zbarimg = paths.map({ URL(fileURLWithPath: $0).appendingPathComponent("zbarimg") })
            .first(where: { FileManager.default.isExecutableFile(atPath: $0.path) })
    else {
        Issue.record("zbarimg is missing: run scripts/install-dependencies (it installs zbar-tools)")
        throw CocoaError(.executableNotLoadable)
    }
    let file = directory.appendingPathComponent("qr-\(UUID().uuidString).png")
    try png.write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    let output = directory.appendingPathComponent("qr-\(UUID().uuidString).txt")
    defer { try? FileManager.default.removeItem(at: output) }
    // The output goes to a file through the shell: no pipe to drain while waiting (bounded) for it.
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", "'\(zbarimg.path)' --raw -q '\(file.path)' > '\(output.path)' 2>/dev/null"]
    try process.run()
    for _ in 0..<200 where process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
    if process.isRunning { process.terminate() }
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "zbarimg found no QR code")
    let text = String(decoding: try Data(contentsOf: output), as: UTF8.self)
    return text.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Holds each arrival until `parties` have arrived (at most 10 s), so they go on together.
private final class Gate: Sendable {
    private let count = Mutex(0)
    let parties: Int

    init(parties: Int) { self.parties = parties }

    var arrived: Int { count.withLock { $0 } }

    func arriveAndWait() async {
        count.withLock { $0 += 1 }
        for _ in 0..<1000 where arrived < parties { try? await Task.sleep(for: .milliseconds(10)) }
    }
}

/// Accepts a confirmation once every copy of the app holds the request.
private struct GatedAcceptance: MobileAuthRequestDelegate {
    let gate: Gate

    init(_ gate: Gate) { self.gate = gate }

    func confirmation(_ challenge: MobileAuthConfirmationChallenge) async -> MobileAuthConfirmationResponse {
        await gate.arriveAndWait()
        return .accept
    }
}

/// A flag one task opens and others look at.
private final class Latch: Sendable {
    private let state = Mutex(false)

    var isOpen: Bool { state.withLock { $0 } }

    func open() { state.withLock { $0 = true } }
}

/// Opens `asked` when the confirmation is asked, then accepts once `release` opens (at most 30 s).
private struct HeldAcceptance: MobileAuthRequestDelegate {
    let asked: Latch
    let release: Latch

    func confirmation(_ challenge: MobileAuthConfirmationChallenge) async -> MobileAuthConfirmationResponse {
        asked.open()
        for _ in 0..<3000 where !release.isOpen { try? await Task.sleep(for: .milliseconds(10)) }
        return .accept
    }
}
