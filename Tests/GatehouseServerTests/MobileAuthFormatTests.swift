import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import GatehouseYAML
import Testing

@testable import GatehouseClient
@testable import GatehouseServer

@Suite("Mobile authentication: push formats, sealing, edge cases")
struct MobileAuthFormatTests {
    let push = PushNotification(
        transactionID: "dHJhbnNhY3Rpb24taWQtMDEyMzQ1Njc",
        profileID: "HZJ9QW",
        message: "Sign in to Example?",
        createdAt: 1_800_000_000,
        timeToLive: 120
    )

    @Test("APNs: an alert in `aps`, the custom keys beside it, headers that expire and collapse the push")
    func apns() throws {
        let transport = APNsPushTransport(host: "https://api.sandbox.push.apple.com", topic: "com.example.app") { _ in }
        let request = try transport.request(for: push, token: "a1b2c3d4e5f6")
        #expect(request.url == "https://api.sandbox.push.apple.com/3/device/a1b2c3d4e5f6")
        #expect(request.headers["apns-push-type"] == "alert")
        #expect(request.headers["apns-priority"] == "10")
        #expect(request.headers["apns-topic"] == "com.example.app")
        #expect(request.headers["apns-expiration"] == "1800000120")
        #expect((request.headers["apns-collapse-id"]?.utf8.count ?? 65) <= 64)
        let payload = try #require(try JSONSerialization.jsonObject(with: request.body) as? [String: Any])
        let aps = try #require(payload["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["body"] as? String == "Sign in to Example?")
        #expect(aps["mutable-content"] as? Int == 1)
        #expect(payload["gh_transaction_id"] as? String == push.transactionID)
        #expect(payload["gh_profile_id"] as? String == "HZJ9QW")
        // Apple's limit for an alert push.
        #expect(request.body.count <= 4096)
        #expect(PushNotification(userInfo: payload) == push)
    }

    @Test("FCM HTTP v1: message.token, a notification, data of strings only, an Android TTL")
    func fcm() throws {
        let transport = FCMPushTransport(projectID: "example-project") { _ in }
        let request = try transport.request(for: push, token: "fcm-registration-token")
        #expect(request.url == "https://fcm.googleapis.com/v1/projects/example-project/messages:send")
        let body = try #require(try JSONSerialization.jsonObject(with: request.body) as? [String: Any])
        let message = try #require(body["message"] as? [String: Any])
        #expect(message["token"] as? String == "fcm-registration-token")
        let data = try #require(message["data"] as? [String: Any])
        #expect(data.values.allSatisfy { $0 is String })
        #expect(data["gh_time_to_live"] as? String == "120")
        let android = try #require(message["android"] as? [String: Any])
        #expect(android["ttl"] as? String == "120s")
        // Sent again later, the message lives only as long as its transaction still does.
        func ttl(at now: Double) throws -> String? {
            let later = try JSONSerialization.jsonObject(with: push.fcmMessage(token: "t", now: now)) as? [String: Any]
            return ((later?["message"] as? [String: Any])?["android"] as? [String: Any])?["ttl"] as? String
        }
        #expect(try ttl(at: push.createdAt + 90.5) == "30s")
        #expect(try ttl(at: push.createdAt + 500) == "1s")
        #expect(try ttl(at: push.createdAt - 60) == "120s")
        #expect((message["notification"] as? [String: Any])?["body"] as? String == "Sign in to Example?")
        // The app hands over the data message, or the whole body: both parse.
        #expect(PushNotification(userInfo: ["data": data]) == push)
        #expect(PushNotification(userInfo: body) == push)
        // Not Gatehouse's, or tampered: nil.
        #expect(PushNotification(userInfo: ["data": ["type": "chat"]]) == nil)
        var long = data
        long["gh_message"] = String(repeating: "x", count: 156)
        #expect(PushNotification(userInfo: ["data": long]) == nil)
    }

    @Test("a sealed box opens only with its key, its purpose and its transaction")
    func sealing() throws {
        let device = Curve25519.KeyAgreement.PrivateKey()
        let box = try SealedBox.seal(Data("secret".utf8), for: device.publicKey, purpose: .payload, transactionID: "t1")
        #expect(try box.open(with: device, purpose: .payload, transactionID: "t1") == Data("secret".utf8))
        #expect(throws: (any Error).self) { try box.open(with: device, purpose: .answer, transactionID: "t1") }
        #expect(throws: (any Error).self) { try box.open(with: device, purpose: .payload, transactionID: "t2") }
        #expect(throws: (any Error).self) {
            try box.open(with: Curve25519.KeyAgreement.PrivateKey(), purpose: .payload, transactionID: "t1")
        }
        var tampered = box
        let first = tampered.ciphertext.data.startIndex
        tampered.ciphertext.data[first] ^= 1
        #expect(throws: (any Error).self) { try tampered.open(with: device, purpose: .payload, transactionID: "t1") }
    }

    @Test("server-sent events split anywhere are read whole")
    func eventParser() {
        var parser = ServerSentEventParser()
        let text =
            "retry: 1000\n\n: keep-alive\n\nid: 7\nevent: mobile-auth\ndata: {\"a\":1}\n\nid: 8\r\ndata: x\r\n\r\n"
        var events: [ServerSentEventParser.Event] = []
        for byte in Data(text.utf8) { events += parser.feed(Data([byte])) }
        #expect(
            events == [
                .init(id: "7", name: "mobile-auth", data: #"{"a":1}"#), .init(id: "8", name: "message", data: "x"),
            ]
        )
    }

    @Test(
        "a newer request supersedes the pending one; a payload sealed for an old key is not handleable",
        arguments: Mode.allCases
    )
    func supersedeAndReEnrol(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, _) = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)
            let old = try await portal.started("login", message: "First")
            let oldRequest = try pending(client, from: lastPush(fixture))
            let new = try await portal.started("login", message: "Second")
            #expect(try await portal.result(old.transactionID).reason == "superseded")
            guard
                case .failed(let handled as MobileAuthRequestError) = await client.handlePushMobileAuthRequest(
                    oldRequest,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("a superseded request was handled")
                return
            }
            #expect(handled.code == .alreadyHandled)

            // The device enrols again (a new key) while the request waits: its payload was
            // sealed for the old key, so the device cannot read it and says so.
            let waiting = try pending(client, from: lastPush(fixture))
            try await client.authenticateUser(waiting.profile, delegate: ScriptedResponder([.pin("258147")]))
            try await client.enrollForMobileAuth()
            let delegate = ScriptedResponder([])
            guard
                case .failed(let unreadable as MobileAuthRequestError) = await client.handlePushMobileAuthRequest(
                    waiting,
                    delegate: delegate
                )
            else {
                Issue.record("an unreadable payload was handled")
                return
            }
            #expect(unreadable.code == .notHandleable)
            #expect(await delegate.failures.count == 1)
            #expect(try await portal.result(new.transactionID).status == .pending)
        }
    }

    @Test("push token refresh needs a push enrolment, then replaces the token", arguments: Mode.allCases)
    func pushTokenRefresh(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture, token: nil)
            do {
                try await client.refreshPushToken("apns-token-0009")
                Issue.record("a refresh without a push enrolment was accepted")
            } catch let error as MobileAuthEnrollmentError {
                #expect(error.code == .notEnrolled)
            }
            try await client.enrollForPushMobileAuth(deviceToken: "apns-token-0001")
            try await client.refreshPushToken("apns-token-0002")
            #expect(try await client.isUserEnrolledForPushMobileAuth(profile))
            let started = try await Portal(fixture: fixture).started("login")
            #expect(lastPush(fixture, token: "apns-token-0002")?.transactionID == started.transactionID)
            #expect(lastPush(fixture, token: "apns-token-0001") == nil)
        }
    }

    @Test("callback URIs are compared by parts: scheme, host, port, path, no user")
    func callbackTargets() throws {
        let yaml = """
            {id: portal, secret: portal-secret-0123456789,
             callbackPrefixes: ["https://portal.example/callbacks", "http://127.0.0.1:"]}
            """
        let client = try ConfigurationDecoder().decode(
            MobileAuthConfiguration.APIClient.self,
            from: try YAMLManifestFormat().parse(Data(yaml.utf8))
        )
        for allowed in [
            "https://portal.example/callbacks", "https://portal.example/callbacks/42",
            "https://portal.example/callbacks/x?t=1", "http://127.0.0.1:9000/hook", "http://127.0.0.1/hook",
            "http://127.0.0.1:65535/hook",
        ] {
            #expect(client.allowsCallback(to: allowed), "\(allowed)")
        }
        for refused in [
            "https://portal.example.evil.net/callbacks", "https://portal.example@10.0.0.1/callbacks",
            "https://portal.example/callbacks-evil", "http://portal.example/callbacks",
            "https://portal.example:8443/callbacks", "http://127.0.0.1.evil.com:9000/", "http://user@127.0.0.1:9000/",
            "file:///etc/passwd", "gopher://127.0.0.1:70/", "https://portal.example/callbacks#frag", "not a url",
            // A port the HTTP client cannot represent, non-canonical spellings, dot segments and
            // their encodings: each would have been stored as written and sent as something else.
            "http://127.0.0.1:65536/cb", "http://127.0.0.1:0/cb", "https://PORTAL.example/callbacks/x",
            "https://portal.example/callbacks/../admin", "https://portal.example/callbacks/%2e%2e/admin",
            "https://portal.example/callbacks/..%2fadmin", "https://portal.example/callbacks/%2E%2E/admin",
            "https://%70ortal.example/callbacks", "https://ｐortal.example/callbacks",
            "https://portal.example/callbacks\r\n",
            "https://portal.example/callbacks/a b",
        ] {
            #expect(!client.allowsCallback(to: refused), "\(refused)")
        }
    }

    @Test("a callback prefix with a dot segment, an encoding of one, or a bad port is a manifest error")
    func callbackPrefixRefusals() throws {
        for prefix in [
            "https://portal.example/cb/../admin", "https://portal.example/cb/%2e%2e/admin",
            "https://portal.example/cb/..%2fadmin", "http://127.0.0.1:65536", "https://portal.example/cb?x=1",
            "https://Portal.example/cb",
        ] {
            let yaml = "{id: portal, secret: portal-secret-0123456789, callbackPrefixes: [\"\(prefix)\"]}"
            #expect(throws: (any Error).self, "\(prefix)") {
                try ConfigurationDecoder().decode(
                    MobileAuthConfiguration.APIClient.self,
                    from: try YAMLManifestFormat().parse(Data(yaml.utf8))
                )
            }
        }
    }

    @Test("a newer request of another API client supersedes nothing; a replayed read proof is refused")
    func otherClientAndReadReplay() async throws {
        try await withFixture(.http) { fixture in
            let (client, profile) = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)
            let mine = try await portal.started("login")
            let other = Portal(fixture: fixture, id: "other-portal", secret: "other-secret-0123456789")
            _ = try await other.started("login")
            #expect(try await portal.result(mine.transactionID).status == .pending)

            _ = try await client.pendingPushMobileAuthRequests()
            let read = try #require(
                fixture.transport.recorded.last { $0.0.path.hasPrefix(Endpoint.mobileAuthPending) }?.0
            )
            let replayed = try await fixture.transport.send(read)
            #expect(replayed.status == 400)
            #expect(String(decoding: replayed.body, as: UTF8.self).contains("already used"))
            _ = profile
        }
    }
}
