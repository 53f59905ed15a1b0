import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import HTTPTypes
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import GatehouseServer

@Suite("Mobile authentication: delivery, enrolment, portal API", .serialized)
struct MobileAuthDeliveryTests {
    @Test("a lost push is recovered by polling, newest first", arguments: Mode.allCases)
    func polling(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            #expect(try await !client.isUserEnrolledForPushMobileAuth(profile))
            let portal = Portal(fixture: fixture)
            let older = try await portal.started("login", message: "First")
            let newer = try await portal.started("payment", message: "Second", signingData: "pay 1 EUR")
            let listed = try await client.pendingPushMobileAuthRequests()
            #expect(listed.map(\.transactionID) == [newer.transactionID, older.transactionID])
            #expect(listed.map(\.message) == ["Second", "First"])
            #expect(listed.allSatisfy { $0.profile == profile })
            guard
                case .approved = await client.handlePushMobileAuthRequest(
                    listed[1],
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("the polled request was not handled")
                return
            }
            #expect(try await client.pendingPushMobileAuthRequests().map(\.transactionID) == [newer.transactionID])
        }
    }

    @Test(
        "the events channel sends what is pending, then each new request; a dropped one misses nothing",
        arguments: Mode.allCases
    )
    func eventsChannel(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            let portal = Portal(fixture: fixture)
            let first = try await portal.started("login", message: "One")
            let received = Mutex<[String]>([])
            let listener = Task {
                for try await request in client.mobileAuthRequests(for: profile, reconnectDelay: .milliseconds(100)) {
                    received.withLock { $0.append(request.transactionID) }
                }
            }
            defer { listener.cancel() }
            #expect(await eventually { received.withLock { $0 } == [first.transactionID] })
            let second = try await portal.started("payment", message: "Two", signingData: "two")
            #expect(await eventually { received.withLock { $0 } == [first.transactionID, second.transactionID] })

            // The connection drops; a request started meanwhile arrives after the reconnect, once.
            fixture.transport.dropStreams()
            let third = try await portal.started("matched", message: "Three")
            #expect(
                await eventually {
                    received.withLock { $0 } == [first.transactionID, second.transactionID, third.transactionID]
                }
            )
            try await Task.sleep(for: .milliseconds(300))
            #expect(received.withLock { $0.count } == 3)
        }
    }

    @Test(
        "enrolment: push before mobile auth is refused; single mode refuses a second device; tokens are unique",
        arguments: Mode.allCases
    )
    func singleEnrolment(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client("first")
            let profile = try await register(client)
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            await #expect(throws: MobileAuthEnrollmentError.self) {
                try await client.enrollForPushMobileAuth(deviceToken: "apns-token-0001")
            }
            // Below the SDK: the server refuses too (9021).
            let tokens = try #require(await client.sessionTokens)
            let proof = try await client.dpopProof(
                method: "POST",
                url: fixture.transport.baseURL + Endpoint.pushEnrolment
            )
            let refused = try await fixture.send(
                "POST",
                Endpoint.pushEnrolment,
                body: try WireCoding.encode(PushEnrolmentRequest(pushToken: "apns-token-0001", platform: .apns)),
                headers: ["DPoP": proof, "Authorization": "DPoP \(tokens.accessToken)"]
            )
            #expect(refused.status == 409)
            #expect(try WireCoding.decode(ErrorBody.self, from: refused.body).gatehouseCode == 9021)

            try await client.enrollForMobileAuth()
            try await client.enrollForPushMobileAuth(deviceToken: "apns-token-0001")
            let other = try fixture.client("second")
            let second = try await register(other)
            try await other.authenticateUser(second, delegate: ScriptedResponder([.pin("258147")]))
            do {
                try await other.enrollForMobileAuth()
                Issue.record("a second device enrolled in single mode")
            } catch let error as MobileAuthEnrollmentError {
                #expect(error.code == .userAlreadyEnrolled)
            }
            // Without a session, enrolling says so before anything is sent.
            await other.logout()
            do {
                try await other.enrollForMobileAuth()
                Issue.record("enrolled without a session")
            } catch let error as MobileAuthEnrollmentError {
                #expect(error.code == .userNotAuthenticated)
            }
        }
    }

    @Test("a server without mobile authentication says so (9017)", arguments: Mode.allCases)
    func notOffered(mode: Mode) async throws {
        try await withFixture(mode, mobileAuth: false) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            do {
                try await client.enrollForMobileAuth()
                Issue.record("enrolled with a server that offers no mobile authentication")
            } catch let error as MobileAuthEnrollmentError {
                #expect(error.code == .enrollmentNotAvailable)
            }
            let portal = try await Portal(fixture: fixture).start(
                PortalMobileAuthRequest(userID: "jane@example.com", type: "login")
            )
            #expect(portal.status == 404)
        }
    }

    @Test("override: the new device replaces the old, which learns it was disenrolled", arguments: Mode.allCases)
    func overrideEnrolment(mode: Mode) async throws {
        try await withFixture(mode, enrolment: "override") { fixture in
            let (old, _) = try await enrolledDevice(fixture, name: "old", token: "apns-token-0001")
            let portal = Portal(fixture: fixture)
            let before = try await portal.started("login")
            let stale = try pending(old, from: lastPush(fixture, token: "apns-token-0001"))
            let (new, _) = try await enrolledDevice(fixture, name: "new", token: "apns-token-0002")
            // The pending request only the old device could answer ended with the enrolment.
            #expect(try await portal.result(before.transactionID).reason == "device_disenrolled")
            // The trail says why the old device stopped getting pushes.
            let disenrolments = try await fixture.read { db in
                try SQLRow.fetchAll(
                    db,
                    sql: "SELECT actor, detail FROM audit_events WHERE event = 'device_disenrolled'"
                ).map { row -> String in "\(row["actor"] as String) \(row["detail"] as String)" }
            }
            #expect(disenrolments.count == 1 && disenrolments.first?.hasPrefix("user ") == true, "\(disenrolments)")
            #expect(disenrolments.first?.contains("superseded_by_enrolment") == true)
            guard
                case .failed(let error as MobileAuthRequestError) = await old.handlePushMobileAuthRequest(
                    stale,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("the disenrolled device answered")
                return
            }
            #expect(error.code == .userDisenrolled)

            let after = try await portal.started("login")
            #expect(after.devices == 1)
            #expect(lastPush(fixture, token: "apns-token-0002")?.transactionID == after.transactionID)
            guard
                case .approved = await new.handlePushMobileAuthRequest(
                    try pending(new, from: lastPush(fixture, token: "apns-token-0002")),
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("the new device could not answer")
                return
            }
        }
    }

    @Test("multiple devices: each is asked; a push token already taken is refused (9016)", arguments: Mode.allCases)
    func multipleEnrolment(mode: Mode) async throws {
        try await withFixture(mode, enrolment: "multiple") { fixture in
            _ = try await enrolledDevice(fixture, name: "phone", token: "apns-token-0001")
            let tablet = try fixture.client("tablet")
            let profile = try await register(tablet)
            try await tablet.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            try await tablet.enrollForMobileAuth()
            do {
                try await tablet.enrollForPushMobileAuth(deviceToken: "apns-token-0001")
                Issue.record("a taken push token was accepted")
            } catch let error as MobileAuthEnrollmentError {
                #expect(error.code == .deviceAlreadyEnrolled)
            }
            try await tablet.enrollForPushMobileAuth(deviceToken: "apns-token-0002")
            let started = try await Portal(fixture: fixture).started("login")
            #expect(started.devices == 2)
            #expect(lastPush(fixture, token: "apns-token-0001")?.transactionID == started.transactionID)
            #expect(lastPush(fixture, token: "apns-token-0002")?.transactionID == started.transactionID)
        }
    }

    @Test("the portal API refuses bad requests with a clear error and changes nothing", arguments: Mode.allCases)
    func portalRefusals(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            _ = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)
            let kept = try await portal.started("login")
            let before = try await fixture.snapshotMobileAuth()
            func refusal(
                _ request: PortalMobileAuthRequest,
                as portal: Portal = Portal(fixture: fixture)
            ) async throws -> (Int, ErrorBody) {
                let response = try await portal.start(request)
                return (response.status, try WireCoding.decode(ErrorBody.self, from: response.body))
            }
            var (status, body) = try await refusal(
                PortalMobileAuthRequest(userID: "jane@example.com", type: "login"),
                as: Portal(fixture: fixture, secret: "wrong-secret-0123456789")
            )
            #expect(status == 401)
            #expect(body.error == "invalid_client")
            let anonymous = try await fixture.send(
                "POST",
                Endpoint.portalMobileAuth,
                body: try WireCoding.encode(PortalMobileAuthRequest(userID: "jane@example.com", type: "login"))
            )
            #expect(anonymous.status == 401)
            (status, body) = try await refusal(PortalMobileAuthRequest(userID: "jane@example.com", type: "wire"))
            #expect(status == 404)
            #expect(body.gatehouseCode == 3005)
            (status, body) = try await refusal(
                PortalMobileAuthRequest(
                    userID: "jane@example.com",
                    type: "login",
                    message: String(repeating: "é", count: 156)
                )
            )
            #expect(status == 400)
            #expect(body.gatehouseCode == 1005)
            #expect(body.errorDescription.contains("155"))
            (status, body) = try await refusal(
                PortalMobileAuthRequest(userID: "jane@example.com", type: "login", callbackURI: "http://10.1.2.3/steal")
            )
            #expect(status == 400)
            #expect(body.errorDescription.contains("callback_uri"))
            (status, body) = try await refusal(
                PortalMobileAuthRequest(userID: "jane@example.com", type: "payment", message: "Pay?")
            )
            #expect(status == 400)
            #expect(body.errorDescription.contains("signing_data"))
            (status, body) = try await refusal(PortalMobileAuthRequest(userID: "nobody@example.com", type: "login"))
            #expect(status == 404)
            let malformed = try await fixture.send(
                "POST",
                Endpoint.portalMobileAuth,
                body: Data(#"{"user_id": 7, "type": "login"}"#.utf8),
                headers: ["Authorization": portal.authorization]
            )
            #expect(malformed.status == 400)
            #expect(String(decoding: malformed.body, as: UTF8.self).contains("user_id"))
            // A NUL would make what is stored differ from what was checked.
            let nul = try await fixture.send(
                "POST",
                Endpoint.portalMobileAuth,
                body: Data(#"{"user_id": "jane@example.com\u0000x", "type": "login"}"#.utf8),
                headers: ["Authorization": portal.authorization]
            )
            #expect(nul.status == 400)
            #expect(String(decoding: nul.body, as: UTF8.self).contains("user_id: contains a NUL"))
            let notJSON = try await fixture.send(
                "POST",
                Endpoint.portalMobileAuth,
                body: try WireCoding.encode(PortalMobileAuthRequest(userID: "jane@example.com", type: "login")),
                headers: ["Authorization": portal.authorization, "Content-Type": "application/jsonx"]
            )
            #expect(notJSON.status == 415)
            #expect(try await fixture.snapshotMobileAuth() == before)

            // 155 characters are fine; another API client cannot read this client's transaction.
            _ = try await portal.started("login", message: String(repeating: "é", count: 155))
            let foreign = try await fixture.send(
                "GET",
                Endpoint.portalTransaction(kept.transactionID),
                headers: [
                    "Authorization": Portal(fixture: fixture, id: "other-portal", secret: "other-secret-0123456789")
                        .authorization
                ]
            )
            #expect(foreign.status == 404)
        }
    }

    @Test("the portal's callback: a signed POST when the transaction ends, tried again after a failure")
    func callbacks() async throws {
        let received = Mutex<[(HTTPFields, Data)]>([])
        let router = Router()
        router.post("/portal/callback") { request, _ -> Response in
            var request = request
            let body = try await request.collectBody(upTo: 4096)
            let count = received.withLock { list in
                list.append((request.headers, Data(body.readableBytesView)))
                return list.count
            }
            // The first try fails, as a portal that is briefly down.
            return Response(status: count == 1 ? .serviceUnavailable : .noContent)
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let portalServer = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }
        )
        let group = ServiceGroup(configuration: .init(services: [portalServer], logger: .init(label: "portal")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            try await withFixture(.http) { fixture in
                let (client, _) = try await enrolledDevice(fixture)
                let uri = "http://127.0.0.1:\(port)/portal/callback"
                let started = try await Portal(fixture: fixture).started("login", callbackURI: uri)
                #expect(received.withLock { $0.isEmpty })
                _ = await client.handlePushMobileAuthRequest(
                    try pending(client, from: lastPush(fixture)),
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
                #expect(await eventually { received.withLock { $0.count } == 2 })
                let (headers, body) = try #require(received.withLock { $0.last })
                let callback = try WireCoding.decode(PortalCallback.self, from: body)
                #expect(
                    callback
                        == PortalCallback(transactionID: started.transactionID, status: .approved, callbackURI: uri)
                )
                // The signature: HMAC-SHA256 with the API client's secret over "<t>.<body>".
                let signature = try #require(headers[HTTPField.Name("Gatehouse-Signature")!])
                let parts = Dictionary(
                    uniqueKeysWithValues: signature.split(separator: ",").map {
                        let pair = $0.split(separator: "=", maxSplits: 1)
                        return (String(pair[0]), String(pair[1]))
                    }
                )
                let time = try #require(parts["t"])
                let mac = HMAC<SHA256>.authenticationCode(
                    for: Data("\(time).".utf8) + body,
                    using: SymmetricKey(data: Data(Fixture.portalSecret.utf8))
                )
                #expect(parts["v1"] == mac.map { String(format: "%02x", $0) }.joined())
                // The outbox records the delivery just after the portal answered.
                #expect(
                    await eventually {
                        let row = try await transactionRow(fixture, started.transactionID)
                        return row?["callback_state"] == "sent" && row?["callback_attempts"] == 2
                    }
                )
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    @Test("a profile may keep a few event channels open, not more")
    func channelLimit() async throws {
        try await withFixture(.embedded) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            var open: [WireResponse] = []
            for _ in 0..<5 {
                let proof = try await client.dpopProof(
                    method: "GET",
                    url: fixture.transport.baseURL + Endpoint.mobileAuthEvents
                )
                open.append(
                    try await fixture.send(
                        "GET",
                        Endpoint.mobileAuthEvents + "?profile=" + profile.id,
                        headers: ["DPoP": proof]
                    )
                )
            }
            #expect(open.map(\.status) == [200, 200, 200, 200, 429])
            #expect(open.last?.headers["Retry-After"] == "5")
        }
    }
}

/// Polls `condition` until it holds or `seconds` pass.
/// Whether `condition` holds within `seconds`: it is checked every 25 ms, so a condition that
/// comes true returns at once; the bound is for a machine loaded by other runs (3 s was overrun).
func eventually(seconds: Double = 10, _ condition: @Sendable () async throws -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if (try? await condition()) == true { return true }
        try? await Task.sleep(for: .milliseconds(25))
    }
    return (try? await condition()) == true
}
