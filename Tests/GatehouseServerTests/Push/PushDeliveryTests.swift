import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehousePush
import GatehouseTesting
import Testing

@testable import GatehouseServer

/// Real push delivery: the token server's pushes through the APNs and FCM senders to stand-ins
/// that speak HTTP/2 over TLS and answer as Apple and Google document.
@Suite("Push delivery through APNs and FCM", .serialized)
struct PushDeliveryTests {
    @Test("a push transaction reaches the device through APNs over HTTP/2, signed with the team's key")
    func apnsDelivery() async throws {
        try await withPushStandIns { fixture, services in
            let (client, profile) = try await enrolledDevice(fixture, platform: .apns, token: PushStandIns.apnsToken)
            let started = try await Portal(fixture: fixture).started("login", message: "Sign in to Example?")
            #expect(await eventually { services.apnsPushes(about: started.transactionID).count == 1 })
            let push = try #require(services.apnsPushes(about: started.transactionID).first)
            #expect(push.status == 200)
            #expect(push.request.scheme == "https")
            #expect(push.request.authority == "127.0.0.1:\(services.apnsServer.port)")
            #expect(push.deviceToken == PushStandIns.apnsToken)
            #expect(push.request.headers["apns-topic"] == services.apns.topic)
            #expect(push.request.headers["apns-push-type"] == "alert")
            #expect(push.request.headers["apns-priority"] == "10")
            let row = try #require(try await transactionRow(fixture, started.transactionID))
            #expect(push.request.headers["apns-expiration"] == String(Int(row["expires_at"] as Double)))
            // The app reads the request from the payload as APNs hands it over.
            let payload = try #require(try JSONSerialization.jsonObject(with: push.request.body) as? [String: Any])
            let request = try #require(client.pendingMobileAuthRequest(fromUserInfo: payload))
            #expect(request.transactionID == started.transactionID)
            #expect(request.profile == profile)
            #expect(services.apns.violations.isEmpty, "\(services.apns.violations)")
            #expect(fixture.server.pushDispatcher.runningCount == 0)
        }
    }

    @Test("a push transaction reaches the device through FCM HTTP v1 with the service account's access token")
    func fcmDelivery() async throws {
        try await withPushStandIns { fixture, services in
            let (client, _) = try await enrolledDevice(fixture, platform: .fcm, token: PushStandIns.fcmToken)
            let started = try await Portal(fixture: fixture).started("login", message: "Sign in to Example?")
            #expect(await eventually { services.fcmMessages(about: started.transactionID).count == 1 })
            let message = try #require(services.fcmMessages(about: started.transactionID).first)
            #expect(message.status == 200)
            #expect(message.request.scheme == "https")
            #expect(message.request.authority == "127.0.0.1:\(services.fcmServer.port)")
            #expect(message.registrationToken == PushStandIns.fcmToken)
            #expect(message.accessToken == services.fcm.issued.first)
            let payload = try #require(try JSONSerialization.jsonObject(with: message.request.body) as? [String: Any])
            let request = try #require(client.pendingMobileAuthRequest(fromUserInfo: payload))
            #expect(request.transactionID == started.transactionID)
            // A second push reuses the access token.
            let second = try await Portal(fixture: fixture).started(
                "payment",
                message: "Pay 1 EUR?",
                signingData: "pay 1"
            )
            #expect(await eventually { services.fcmMessages(about: second.transactionID).count == 1 })
            #expect(services.fcm.issued.count == 1)
            #expect(services.fcm.violations.isEmpty, "\(services.fcm.violations)")
        }
    }

    @Test(
        "APNs 410 Unregistered disenrols the device: not retried, its transaction ends, the device and portal learn it"
    )
    func apnsUnregistered() async throws {
        try await withPushStandIns { fixture, services in
            let (client, profile) = try await enrolledDevice(fixture, platform: .apns, token: PushStandIns.apnsToken)
            services.apns.script(PushStandIns.apnsToken, APNsStandIn.refusal(410, "Unregistered"))
            let portal = Portal(fixture: fixture)
            let started = try await portal.started("login")
            #expect(await eventually { try await portal.result(started.transactionID).status != .pending })
            let result = try await portal.result(started.transactionID)
            #expect(result.reason == "device_disenrolled")
            #expect(services.apnsPushes(about: started.transactionID).count == 1)
            try await expectDisenrolled(client, profile, fixture)
            #expect(fixture.auditLines("device_disenrolled").count == 1)
            #expect(!fixture.auditLines("device_disenrolled").joined().contains(PushStandIns.apnsToken))
            let actors = try await fixture.read { db in
                try String.fetchAll(db, sql: "SELECT actor FROM audit_events WHERE event = 'device_disenrolled'")
            }
            #expect(actors == ["server"])
        }
    }

    @Test(
        "APNs 400s are not retried and change nothing: BadDeviceToken and DeviceTokenNotForTopic (also a wrong environment or topic) leave the device enrolled"
    )
    func apnsBadRequests() async throws {
        try await withPushStandIns { fixture, services in
            let (client, _) = try await enrolledDevice(fixture, platform: .apns, token: PushStandIns.apnsToken)
            let portal = Portal(fixture: fixture)
            var refused: [String] = []
            for reason in ["BadMessageId", "BadDeviceToken", "DeviceTokenNotForTopic"] {
                services.apns.script(PushStandIns.apnsToken, APNsStandIn.refusal(400, reason))
                let started = try await portal.started("login")
                refused.append(started.transactionID)
                #expect(
                    await eventually {
                        fixture.serverLog.lines.contains { $0.contains("Push refused") && $0.contains(reason) }
                    }
                )
                #expect(services.apnsPushes(about: started.transactionID).count == 1, "\(reason) was tried again")
            }
            // Still enrolled: the newest request (each replaced the one before) waits on the
            // device's pending list, and no request ended for a disenrolment.
            #expect(try await client.pendingPushMobileAuthRequests().map(\.transactionID) == [refused[2]])
            for transaction in refused {
                #expect(try await portal.result(transaction).reason != "device_disenrolled")
            }
            #expect(fixture.auditLines("device_disenrolled").isEmpty)
        }
    }

    @Test("FCM UNREGISTERED disenrols the device; INVALID_ARGUMENT is not retried")
    func fcmUnregistered() async throws {
        try await withPushStandIns { fixture, services in
            let (client, profile) = try await enrolledDevice(fixture, platform: .fcm, token: PushStandIns.fcmToken)
            let portal = Portal(fixture: fixture)
            services.fcm.script(
                PushStandIns.fcmToken,
                FCMStandIn.refusal(400, "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT")
            )
            let refused = try await portal.started("login")
            #expect(await eventually { fixture.serverLog.lines.contains { $0.contains("Push refused") } })
            #expect(services.fcmMessages(about: refused.transactionID).count == 1)
            #expect(try await client.pendingPushMobileAuthRequests().count == 1)

            services.fcm.script(PushStandIns.fcmToken, FCMStandIn.refusal(404, "NOT_FOUND", errorCode: "UNREGISTERED"))
            let dead = try await portal.started("payment", message: "Pay 1 EUR?", signingData: "pay 1")
            #expect(await eventually { try await portal.result(dead.transactionID).status != .pending })
            #expect(services.fcmMessages(about: dead.transactionID).count == 1)
            try await expectDisenrolled(client, profile, fixture)
            #expect(fixture.auditLines("device_disenrolled").count == 1)
        }
    }

    @Test("APNs 429 and FCM 503 with Retry-After are tried again in the background; the portal does not wait")
    func retried() async throws {
        try await withPushStandIns(enrolment: "multiple") { fixture, services in
            _ = try await enrolledDevice(fixture, name: "iphone", platform: .apns, token: PushStandIns.apnsToken)
            _ = try await enrolledDevice(fixture, name: "android", platform: .fcm, token: PushStandIns.fcmToken)
            services.apns.script(PushStandIns.apnsToken, APNsStandIn.refusal(429, "TooManyRequests"))
            services.fcm.script(
                PushStandIns.fcmToken,
                FCMStandIn.refusal(503, "UNAVAILABLE", errorCode: "UNAVAILABLE", headers: ["retry-after": "1"])
            )
            let started = try await Portal(fixture: fixture).started("login")
            #expect(started.devices == 2)
            // The portal had its answer after the first tries; the second ones come later.
            #expect(services.apnsPushes(about: started.transactionID).first?.status == 429)
            #expect(services.fcmMessages(about: started.transactionID).first?.status == 503)
            #expect(
                await eventually(seconds: 10) {
                    services.apnsPushes(about: started.transactionID).map(\.status) == [429, 200]
                }
            )
            #expect(
                await eventually(seconds: 10) {
                    services.fcmMessages(about: started.transactionID).map(\.status) == [503, 200]
                }
            )
            #expect(fixture.serverLog.lines.filter { $0.contains("Push failed; trying again") }.count == 2)
            #expect(await eventually { fixture.server.pushDispatcher.runningCount == 0 })
        }
    }

    @Test("a retry waits no longer than the transaction lives, and none is made once it is answered")
    func retriesBounded() async throws {
        try await withPushStandIns { fixture, services in
            let (client, _) = try await enrolledDevice(fixture, platform: .apns, token: PushStandIns.apnsToken)
            // Retry-After beyond the transaction's 60 seconds: no second try.
            services.apns.script(
                PushStandIns.apnsToken,
                APNsStandIn.refusal(503, "ServiceUnavailable", headers: ["retry-after": "120"])
            )
            let late = try await Portal(fixture: fixture).started("login")
            #expect(await eventually { fixture.serverLog.lines.contains { $0.contains("expires before another try") } })
            #expect(services.apnsPushes(about: late.transactionID).count == 1)

            // Answered on the events channel meanwhile: the retry finds nothing to announce. (Its
            // wait is 5 s, so a loaded machine still answers first: 1 s has been overrun.)
            services.apns.script(
                PushStandIns.apnsToken,
                APNsStandIn.refusal(500, "InternalServerError", headers: ["retry-after": "5"])
            )
            let answered = try await Portal(fixture: fixture).started("login")
            let pending = try #require(
                try await client.pendingPushMobileAuthRequests().first { $0.transactionID == answered.transactionID }
            )
            guard
                case .approved = await client.handlePushMobileAuthRequest(
                    pending,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("the request was not approved")
                return
            }
            #expect(await eventually(seconds: 20) { fixture.server.pushDispatcher.runningCount == 0 })
            #expect(services.apnsPushes(about: answered.transactionID).count == 1)
        }
    }

    @Test("the APNs provider token is reused across pushes and made anew once APNs calls it expired")
    func providerTokenRenewal() async throws {
        try await withPushStandIns { fixture, services in
            _ = try await enrolledDevice(fixture, platform: .apns, token: PushStandIns.apnsToken)
            let portal = Portal(fixture: fixture)
            let first = try await portal.started("login")
            let second = try await portal.started("payment", message: "Pay 1 EUR?", signingData: "pay 1")
            #expect(await eventually { services.apns.received.count == 2 })
            let tokens = services.apns.received.map(\.providerToken)
            #expect(tokens[0] == tokens[1])

            services.apns.expireProviderTokens()
            let third = try await portal.started("matched")
            #expect(await eventually { services.apnsPushes(about: third.transactionID).count == 2 })
            let renewal = services.apnsPushes(about: third.transactionID)
            #expect(renewal.map(\.status) == [403, 200])
            #expect(renewal[0].providerToken == tokens[0])
            #expect(renewal[1].providerToken != tokens[0])
            // And the new one is kept for the next push.
            let fourth = try await portal.started("login")
            #expect(await eventually { services.apnsPushes(about: fourth.transactionID).count == 1 })
            #expect(services.apnsPushes(about: fourth.transactionID).first?.providerToken == renewal[1].providerToken)
            #expect(services.apnsPushes(about: first.transactionID).count == 1)
            #expect(services.apnsPushes(about: second.transactionID).count == 1)
            #expect(services.apns.violations.isEmpty, "\(services.apns.violations)")
        }
    }

    @Test("FCM's 401 gets a new access token once and the message through")
    func accessTokenRenewal() async throws {
        try await withPushStandIns { fixture, services in
            _ = try await enrolledDevice(fixture, platform: .fcm, token: PushStandIns.fcmToken)
            let portal = Portal(fixture: fixture)
            let first = try await portal.started("login")
            #expect(await eventually { services.fcmMessages(about: first.transactionID).count == 1 })
            services.fcm.revokeAccessTokens()
            let second = try await portal.started("payment", message: "Pay 1 EUR?", signingData: "pay 1")
            #expect(await eventually { services.fcmMessages(about: second.transactionID).count == 2 })
            #expect(services.fcmMessages(about: second.transactionID).map(\.status) == [401, 200])
            #expect(services.fcm.issued.count == 2)
            #expect(services.fcm.violations.isEmpty, "\(services.fcm.violations)")
        }
    }

    @Test("a retry still waiting stops at shutdown and sends nothing after")
    func shutdownStopsRetries() async throws {
        try await withPushStandIns { fixture, services in
            _ = try await enrolledDevice(fixture, platform: .apns, token: PushStandIns.apnsToken)
            services.apns.script(
                PushStandIns.apnsToken,
                APNsStandIn.refusal(503, "ServiceUnavailable", headers: ["retry-after": "2"])
            )
            let started = try await Portal(fixture: fixture).started("login")
            #expect(fixture.server.pushDispatcher.runningCount == 1)
            // What the server's shutdown does first; the stand-in stays up to see that nothing comes.
            await fixture.server.pushDispatcher.shutdown()
            #expect(fixture.server.pushDispatcher.runningCount == 0)
            try await Task.sleep(for: .seconds(3))
            #expect(services.apnsPushes(about: started.transactionID).count == 1)
        }
    }

    /// The device's next pending list says it was disenrolled, and the portal finds no device.
    private func expectDisenrolled(_ client: UserClient, _ profile: UserProfile, _ fixture: Fixture) async throws {
        do {
            _ = try await client.pendingPushMobileAuthRequests()
            Issue.record("the disenrolled device still lists its requests")
        } catch let error as MobileAuthRequestError {
            #expect(error.code == .userDisenrolled)
        }
        let refused = try await Portal(fixture: fixture).start(
            PortalMobileAuthRequest(userID: "jane@example.com", type: "login")
        )
        #expect(refused.status == 404, "\(String(decoding: refused.body, as: UTF8.self))")
        let enrolment = try await fixture.read { db in
            try SQLRow.fetchOne(
                db,
                sql: "SELECT disenrolled, push_token FROM mobile_enrolments WHERE profile_id = ?",
                arguments: [profile.id]
            )
        }
        #expect(enrolment?["disenrolled"] as Bool? == true)
        #expect(enrolment?["push_token"] as String? == nil)
    }
}
