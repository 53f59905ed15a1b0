import BiometricAuthenticator
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@testable import GatehouseServer

@Suite("Mobile authentication with push", .serialized)
struct MobileAuthTests {
    @Test("the push userInfo handed back is the payload as received, not rebuilt from its ids")
    func userInfoAsReceived() async throws {
        try await withFixture(.embedded) { fixture in
            let (client, profile) = try await enrolledDevice(fixture)
            let started = try await Portal(fixture: fixture).started("login")
            let push = try #require(lastPush(fixture))
            #expect(push.transactionID == started.transactionID)
            // As an app receives it: APNs' `aps`, an app's own key, the time as the sender wrote it.
            var payload = try #require(try JSONSerialization.jsonObject(with: push.apnsPayload()) as? [String: Any])
            payload["campaign"] = "spring"
            payload[PushNotification.createdKey] = "\(Int(push.createdAt))"
            let pending = try #require(client.pendingMobileAuthRequest(fromUserInfo: payload))
            #expect(pending.profile == profile)
            let expected: [String: ConfigValue] = [
                "aps": .object([
                    "alert": .object(["title": "Approve sign-in?", "body": "Sign in to Example?"]),
                    "sound": "default", "category": "GATEHOUSE_MOBILE_AUTH", "mutable-content": 1,
                ]),
                "campaign": "spring",
                PushNotification.transactionKey: .string(push.transactionID),
                PushNotification.profileKey: .string(profile.id),
                PushNotification.messageKey: "Sign in to Example?",
                PushNotification.createdKey: .string("\(Int(push.createdAt))"),
                PushNotification.timeToLiveKey: "60",
            ]
            #expect(pending.userInfo == expected)
            let delegate = ScriptedResponder([.confirmation(.accept)])
            guard case .approved = await client.handlePushMobileAuthRequest(pending, delegate: delegate) else {
                Issue.record("not approved")
                return
            }
            #expect(try #require(await delegate.handled.first?.0).userInfo == expected)
        }
    }

    @Test(
        "confirmation: the push carries ids only, the device opens the sealed payload, accepts or denies",
        arguments: Mode.allCases
    )
    func confirmation(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture)
            #expect(try await client.isUserEnrolledForMobileAuth(profile))
            #expect(try await client.isUserEnrolledForPushMobileAuth(profile))
            let portal = Portal(fixture: fixture)
            let started = try await portal.started("login", secureMessage: "Sign in from Firefox on Linux, Utrecht")
            #expect(started.authMethod == .confirmation)
            #expect(started.timeToLive == 60_000)
            #expect(started.number == nil)
            #expect(started.devices == 1)

            // The push: the transaction, the profile, the short message and the expiry; nothing else.
            let push = try #require(lastPush(fixture))
            #expect(push.transactionID == started.transactionID)
            #expect(push.profileID == profile.id)
            #expect(push.message == "Sign in to Example?")
            let apns = try #require(try JSONSerialization.jsonObject(with: push.apnsPayload()) as? [String: Any])
            #expect(
                Set(apns.keys) == [
                    "aps", "gh_transaction_id", "gh_profile_id", "gh_message", "gh_created_at", "gh_time_to_live",
                ]
            )
            #expect(!String(decoding: try push.apnsPayload(), as: UTF8.self).contains("Firefox"))
            #expect(
                client.pendingMobileAuthRequest(fromUserInfo: ["aps": ["alert": "Your parcel is on its way"]]) == nil
            )

            let request = try pending(client, from: push)
            #expect(request.profile == profile)
            #expect(request.message == "Sign in to Example?")
            #expect(request.timeToLive == 60)
            let accept = ScriptedResponder([.confirmation(.accept)])
            let result = await client.handlePushMobileAuthRequest(request, delegate: accept)
            guard case .approved = result else {
                Issue.record("not approved: \(result)")
                return
            }
            let handled = try #require(await accept.handled.first?.0)
            #expect(handled.secureMessage == "Sign in from Firefox on Linux, Utrecht")
            #expect(handled.type == "login")
            #expect(handled.method == .confirmation)
            let approved = try await portal.result(started.transactionID)
            #expect(approved.status == .approved)
            #expect(approved.isAuthenticated)
            #expect(approved.authenticationMethod == "confirmation")
            #expect(approved.userID == "jane@example.com")

            // Answered once: handling it again says so, and the portal's verdict stands.
            let again = ScriptedResponder([.confirmation(.deny(.notAccepted))])
            guard
                case .failed(let error as MobileAuthRequestError) = await client.handlePushMobileAuthRequest(
                    request,
                    delegate: again
                )
            else {
                Issue.record("a second answer was not refused")
                return
            }
            #expect(error.code == .alreadyHandled)
            #expect(await again.receivedKinds.isEmpty)
            #expect(try await portal.result(started.transactionID).status == .approved)

            // A denial, with its reason, reaches the portal.
            let second = try await portal.started("login")
            let deny = ScriptedResponder([.confirmation(.deny(.notRecognised))])
            guard
                case .denied = await client.handlePushMobileAuthRequest(
                    try pending(client, from: lastPush(fixture)),
                    delegate: deny
                )
            else {
                Issue.record("not denied")
                return
            }
            let denied = try await portal.result(second.transactionID)
            #expect(denied.status == .denied)
            #expect(!denied.isAuthenticated)
            #expect(denied.reason == "not_recognised")
            #expect(await deny.handled.count == 1)
        }
    }

    @Test(
        "number matching: the right number approves, a wrong one denies at once, an answer without one is refused",
        arguments: Mode.allCases
    )
    func numberMatching(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, _) = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)

            let right = try await portal.started("matched")
            let number = try #require(right.number)
            #expect((10...99).contains(number))
            let typed = ScriptedResponder([.confirmation(.accept(number: number))])
            let request = try pending(client, from: lastPush(fixture))
            guard case .approved = await client.handlePushMobileAuthRequest(request, delegate: typed) else {
                Issue.record("the right number was refused")
                return
            }
            let challenge = try #require(await typed.received.first)
            guard case .confirmation(let asked) = challenge else {
                Issue.record("no confirmation")
                return
            }
            #expect(asked.request.numberMatching)
            #expect(try await portal.result(right.transactionID).status == .approved)

            // A wrong number ends the transaction: one try, so the number cannot be guessed.
            let wrong = try await portal.started("matched")
            let guess = (try #require(wrong.number)) == 10 ? 11 : 10
            let result = await client.handlePushMobileAuthRequest(
                try pending(client, from: lastPush(fixture)),
                delegate: ScriptedResponder([.confirmation(.accept(number: guess))])
            )
            guard case .failed = result else {
                Issue.record("a wrong number was accepted: \(result)")
                return
            }
            let refused = try await portal.result(wrong.transactionID)
            #expect(refused.status == .denied)
            #expect(refused.reason == "invalid_answer")

            // A modified client that skips the number gets the same.
            let skipped = try await portal.started("matched")
            let noNumber = await client.handlePushMobileAuthRequest(
                try pending(client, from: lastPush(fixture)),
                delegate: ScriptedResponder([.confirmation(.accept(number: nil))])
            )
            guard case .failed = noNumber else {
                Issue.record("an answer without the number was accepted")
                return
            }
            #expect(try await portal.result(skipped.transactionID).status == .denied)
        }
    }

    @Test(
        "PIN type: the PIN approves and the device signs the transaction; wrong PINs count on the one counter; cancel denies",
        arguments: Mode.allCases
    )
    func pinType(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 3) { fixture in
            let (client, profile) = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)
            let started = try await portal.started(
                "payment",
                message: "Pay €120.00 to ACME?",
                signingData: "pay 120.00 EUR to NL91ABNA0417164300"
            )
            #expect(started.authMethod == .pin)
            let delegate = ScriptedResponder([.pin("111111"), .pin("258147")])
            let result = await client.handlePushMobileAuthRequest(
                try pending(client, from: lastPush(fixture)),
                delegate: delegate
            )
            guard case .approved = result else {
                Issue.record("not approved: \(result)")
                return
            }
            let kinds = await delegate.receivedKinds
            #expect(kinds == ["pin", "pin"])
            #expect(await delegate.received.last?.error?.codeName == "invalidPin")
            #expect(await delegate.handled.first?.0.signingData == "pay 120.00 EUR to NL91ABNA0417164300")
            let approved = try await portal.result(started.transactionID)
            #expect(approved.status == .approved)
            #expect(approved.authenticationMethod == "pin")
            #expect(approved.signatureVerified == true)
            #expect(approved.signature != nil)
            #expect(approved.userPublicKey != nil)
            #expect(try await failures(fixture) == 0)

            // Cancelling the PIN challenge denies the request and counts nothing.
            let cancelled = try await portal.started("payment", message: "Pay €5?", signingData: "pay 5 EUR")
            let cancel = await client.handlePushMobileAuthRequest(
                try pending(client, from: lastPush(fixture)),
                delegate: ScriptedResponder([.cancel])
            )
            guard case .failed(let error as GenericError) = cancel else {
                Issue.record("not cancelled")
                return
            }
            #expect(error.code == .actionCancelled)
            #expect(try await portal.result(cancelled.transactionID).status == .denied)
            #expect(try await portal.result(cancelled.transactionID).reason == "not_accepted")
            #expect(try await failures(fixture) == 0)

            // Wrong PINs here deregister the user exactly as at login.
            let last = try await portal.started("payment", message: "Pay €9?", signingData: "pay 9 EUR")
            let wrong = ScriptedResponder([.pin("111111"), .pin("222222"), .pin("333333")])
            let outcome = await client.handlePushMobileAuthRequest(
                try pending(client, from: lastPush(fixture)),
                delegate: wrong
            )
            guard case .failed(let deregistered as GenericError) = outcome else {
                Issue.record("not refused")
                return
            }
            #expect(deregistered.code == .userDeregistered)
            #expect(try await fixture.count("profiles") == 0)
            #expect(try await client.userProfiles().isEmpty)
            let ended = try await portal.result(last.transactionID)
            #expect(ended.status == .denied)
            #expect(ended.reason == "user_deregistered")
            _ = profile
        }
    }

    @Test(
        "biometric and custom types: the authenticator approves, the PIN is the fallback, custom info reaches the app",
        arguments: Mode.allCases
    )
    func authenticatorTypes(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 5) { fixture in
            let (client, _) = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)

            // Without a registered biometric authenticator, the PIN approves a biometric type.
            let withoutFace = try await portal.started("face")
            let pinOnly = ScriptedResponder([.pin("258147")])
            guard
                case .approved = await client.handlePushMobileAuthRequest(
                    try pending(client, from: lastPush(fixture)),
                    delegate: pinOnly
                )
            else {
                Issue.record("the PIN did not approve")
                return
            }
            #expect(await pinOnly.receivedKinds == ["pin"])
            #expect(try await portal.result(withoutFace.transactionID).authenticationMethod == "pin")

            _ = try await client.registerAuthenticator("face", delegate: ScriptedResponder([.pin("258147")]))
            let face = try await portal.started("face")
            let scan = ScriptedResponder([.biometric(.prompt("Approve the sign-in"))])
            guard
                case .approved = await client.handlePushMobileAuthRequest(
                    try pending(client, from: lastPush(fixture)),
                    delegate: scan
                )
            else {
                Issue.record("the scan did not approve")
                return
            }
            #expect(await fixture.sensor.prompts.last == "Approve the sign-in")
            #expect(try await portal.result(face.transactionID).authenticationMethod == "face")

            // The user prefers the PIN.
            let fallback = try await portal.started("face")
            let choosePin = ScriptedResponder([.biometric(.fallbackToPin), .pin("258147")])
            guard
                case .approved = await client.handlePushMobileAuthRequest(
                    try pending(client, from: lastPush(fixture)),
                    delegate: choosePin
                )
            else {
                Issue.record("the fallback did not approve")
                return
            }
            #expect(await choosePin.receivedKinds == ["biometric", "pin"])
            #expect(try await portal.result(fallback.transactionID).status == .approved)

            // A custom authenticator: its info reaches the app on success.
            try await add("scripted", to: client)
            let custom = try await portal.started("custom")
            fixture.script.answer(2000)
            let data = ScriptedResponder([.customAuthenticator(.data("signed-by-token"))])
            let result = await client.handlePushMobileAuthRequest(
                try pending(client, from: lastPush(fixture)),
                delegate: data
            )
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
}
