import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@testable import GatehouseServer

@Suite("Mobile authentication under attack", .serialized)
struct MobileAuthSecurityTests {
    @Test(
        "a replayed answer, an answer for another transaction and a foreign device are refused; nothing changes",
        arguments: Mode.allCases
    )
    func replayAndForeignDevice(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, profile) = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)
            let first = try await portal.started("login")
            let firstRequest = try pending(client, from: lastPush(fixture))
            let second = try await portal.started("matched")
            // Denying the first records its answer on the wire.
            _ = await client.handlePushMobileAuthRequest(
                firstRequest,
                delegate: ScriptedResponder([.confirmation(.deny(.notAccepted))])
            )
            let answer = try #require(fixture.transport.recorded.last { $0.0.path.contains("/answer") }?.0)

            // The same bytes again: the request is answered already (and its proof spent).
            #expect(try await fixture.transport.send(answer).status == 409)
            var fresh = answer
            fresh.setHeader(
                "DPoP",
                try await client.dpopProof(
                    method: "POST",
                    url: fixture.transport.baseURL + Endpoint.mobileAuthTransactionPrefix + first.transactionID
                        + "/answer"
                )
            )
            let replayed = try await fixture.transport.send(fresh)
            #expect(replayed.status == 409)
            #expect(try WireCoding.decode(ErrorBody.self, from: replayed.body).gatehouseCode == 9029)

            // The first answer's sealed box sent for the second transaction: bound to the first.
            let before = try await fixture.snapshotMobileAuth()
            var moved = WireRequest(
                method: "POST",
                path: Endpoint.mobileAuthAnswer(second.transactionID, profile: profile.id),
                headers: ["Content-Type": "application/json"],
                body: answer.body
            )
            moved.setHeader(
                "DPoP",
                try await client.dpopProof(
                    method: "POST",
                    url: fixture.transport.baseURL + Endpoint.mobileAuthTransactionPrefix + second.transactionID
                        + "/answer"
                )
            )
            let crossed = try await fixture.transport.send(moved)
            #expect(crossed.status == 400, "\(String(decoding: crossed.body, as: UTF8.self))")
            #expect(try await fixture.snapshotMobileAuth() == before)
            #expect(try await portal.result(second.transactionID).status == .pending)

            // Another device (its own key) asks for this profile's payload, pending list, channel.
            let stranger = P256.Signing.PrivateKey()
            for (method, path, target) in [
                (
                    "GET", Endpoint.mobileAuthTransaction(second.transactionID, profile: profile.id),
                    Endpoint.mobileAuthTransactionPrefix + second.transactionID
                ),
                ("GET", Endpoint.mobileAuthPending + "?profile=" + profile.id, Endpoint.mobileAuthPending),
            ] {
                let proof = try DPoP.proof(
                    method: method,
                    url: fixture.transport.baseURL + target,
                    accessToken: nil,
                    key: stranger,
                    now: Date()
                )
                let response = try await fixture.send(method, path, headers: ["DPoP": proof])
                #expect(response.status == 400, "\(path)")  // RFC 9449 §5: no access token, so 400
                #expect(!String(decoding: response.body, as: UTF8.self).contains("sealed"))
            }
            #expect(try await fixture.snapshotMobileAuth() == before)
        }
    }

    @Test("eight answers at once to one transaction: exactly one is taken", arguments: Mode.allCases)
    func concurrentAnswers(mode: Mode) async throws {
        try await withFixture(mode, enrolment: "multiple") { fixture in
            var devices: [(UserClient, UserProfile)] = []
            for index in 0..<4 {
                devices.append(
                    try await enrolledDevice(fixture, name: "device-\(index)", token: "apns-token-000\(index)")
                )
            }
            let portal = Portal(fixture: fixture)
            let started = try await portal.started("login")
            #expect(started.devices == 4)
            // Each device answers twice at once (its two taps), all eight together.
            let results = await withTaskGroup(of: MobileAuthHandlingResult.self) { group in
                for (index, (client, _)) in devices.enumerated() {
                    let request = try? pending(client, from: lastPush(fixture, token: "apns-token-000\(index)"))
                    for _ in 0..<2 {
                        group.addTask {
                            guard let request else { return .failed(GenericError(.requestInvalid)) }
                            return await client.handlePushMobileAuthRequest(
                                request,
                                delegate: ScriptedResponder([.confirmation(.accept)])
                            )
                        }
                    }
                }
                var all: [MobileAuthHandlingResult] = []
                for await result in group { all.append(result) }
                return all
            }
            let approved = results.filter { if case .approved = $0 { true } else { false } }
            #expect(approved.count == 1)
            #expect(results.count == 8)
            let row = try #require(try await transactionRow(fixture, started.transactionID))
            #expect(row["status"] as String == "approved")
        }
    }

    @Test("an expired request is refused, and the portal sees it expired", arguments: Mode.allCases)
    func expiry(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, _) = try await enrolledDevice(fixture)
            let portal = Portal(fixture: fixture)
            let started = try await portal.started("login")
            let request = try pending(client, from: lastPush(fixture))
            // Age the transaction in the database rather than wait a minute.
            try await fixture.write { db in
                try db.execute(
                    sql: "UPDATE mobile_transactions SET expires_at = ? WHERE id = ?",
                    arguments: [Date().timeIntervalSince1970 - 1, started.transactionID]
                )
            }
            guard
                case .failed(let error as MobileAuthRequestError) = await client.handlePushMobileAuthRequest(
                    request,
                    delegate: ScriptedResponder([.confirmation(.accept)])
                )
            else {
                Issue.record("an expired request was handled")
                return
            }
            #expect(error.code == .notFound)
            #expect(try await portal.result(started.transactionID).status == .expired)
            #expect(try await client.pendingPushMobileAuthRequests().isEmpty)
        }
    }

    @Test("the secure message's bytes appear in no push, no log line and no database file", arguments: Mode.allCases)
    func secureMessageSealed(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, _) = try await enrolledDevice(fixture)
            let secret = "Transfer 4711.93 EUR to NL20INGB0001234567 ref Q7X-SECRET"
            let signing = "sign-this-9f8e7d6c5b4a"
            _ = try await Portal(fixture: fixture).started(
                "payment",
                message: "Approve a payment",
                secureMessage: secret,
                signingData: signing
            )
            let delegate = ScriptedResponder([.pin("258147")])
            guard
                case .approved = await client.handlePushMobileAuthRequest(
                    try pending(client, from: lastPush(fixture)),
                    delegate: delegate
                )
            else {
                Issue.record("not approved")
                return
            }
            #expect(await delegate.handled.first?.0.secureMessage == secret)

            for push in fixture.pushes.delivered(to: "apns-token-0001") {
                #expect(!String(decoding: try push.apnsPayload(), as: UTF8.self).contains("NL20INGB"))
                #expect(!String(decoding: try push.fcmMessage(token: "t"), as: UTF8.self).contains("NL20INGB"))
            }
            #expect(!fixture.serverLog.lines.joined(separator: "\n").contains("NL20INGB"))
            #expect(!fixture.clientLog.lines.joined(separator: "\n").contains("NL20INGB"))
            let directory = fixture.directory.appendingPathComponent("server")
            for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
                let bytes = try Data(contentsOf: directory.appendingPathComponent(file))
                #expect(bytes.range(of: Data("NL20INGB".utf8)) == nil, "\(file)")
                #expect(bytes.range(of: Data(signing.utf8)) == nil, "\(file)")
            }
            // Over HTTP, no response but the sealed payload carried it, and that one sealed.
            for (_, response) in fixture.transport.recorded {
                #expect(response.body.range(of: Data("NL20INGB".utf8)) == nil)
            }
        }
    }

    /// The X25519 points of small order (RFC 7748 §6.1; libsodium's list), and each with the
    /// top bit set, which X25519 ignores.
    static let lowOrderPoints: [Data] = {
        func hex(_ text: String) -> Data {
            Data(
                stride(from: 0, to: text.count, by: 2).compactMap { offset in
                    let start = text.index(text.startIndex, offsetBy: offset)
                    return UInt8(text[start..<text.index(start, offsetBy: 2)], radix: 16)
                }
            )
        }
        let ff = String(repeating: "ff", count: 30)
        let points = [
            Data(count: 32), Data([1]) + Data(count: 31),
            hex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
            hex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
            hex("ec" + ff + "7f"), hex("ed" + ff + "7f"), hex("ee" + ff + "7f"),
        ]
        return points
            + points.map { point in
                var high = point
                high[31] |= 0x80
                return high
            }
    }()

    @Test(
        "low-order X25519 device keys are refused at enrolment, and nothing is sealed to one",
        arguments: Mode.allCases
    )
    func lowOrderDeviceKeys(mode: Mode) async throws {
        #expect(Self.lowOrderPoints.count == 14 && Self.lowOrderPoints.allSatisfy { $0.count == 32 })
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            _ = try await registeredAndLoggedIn(client)
            let url = fixture.transport.baseURL + Endpoint.mobileAuthEnrolment
            for point in Self.lowOrderPoints {
                let response = try await fixture.send(
                    "POST",
                    Endpoint.mobileAuthEnrolment,
                    body: try WireCoding.encode(MobileAuthEnrolmentRequest(publicKey: point)),
                    headers: try await client.resourceHeaders(.user, method: "POST", url: url)
                )
                #expect(response.status == 400, "\(point.base64URLEncodedString)")
                #expect(
                    try errorBody(response).errorDescription.contains("low-order"),
                    "\(String(decoding: response.body, as: UTF8.self))"
                )
            }
            #expect(try await fixture.count("mobile_enrolments") == 0)
            // A proper key still enrols.
            try await client.enrollForMobileAuth()
            #expect(try await fixture.count("mobile_enrolments") == 1)
        }
        // Sealing refuses them too (RFC 9180 §7.1.4), whatever the library does with the
        // all-zero secret; and an answer whose encapsulated key is one does not open.
        for point in Self.lowOrderPoints {
            let key = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: point)
            #expect(key.isLowOrder)
            #expect(Curve25519.KeyAgreement.PublicKey(wire: Base64URLData(point)) == nil)
            #expect(throws: SealingError.lowOrderKey) {
                try SealedBox.seal(Data("secret".utf8), for: key, purpose: .payload, transactionID: "t")
            }
            let forged = SealedBox(encapsulatedKey: point, ciphertext: Data(count: 32))
            #expect(throws: SealingError.lowOrderKey) {
                try forged.open(with: Curve25519.KeyAgreement.PrivateKey(), purpose: .answer, transactionID: "t")
            }
        }
        #expect(!Curve25519.KeyAgreement.PrivateKey().publicKey.isLowOrder)
    }

    @Test(
        "the enrolment status endpoint spends its DPoP proof: the same proof twice is refused",
        arguments: Mode.allCases
    )
    func statusProofSingleUse(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let (client, _) = try await enrolledDevice(fixture)
            let url = fixture.transport.baseURL + Endpoint.mobileAuthStatus
            let headers = try await client.resourceHeaders(.user, method: "GET", url: url)
            let first = try await fixture.send("GET", Endpoint.mobileAuthStatus, headers: headers)
            #expect(first.status == 200)
            let status = try WireCoding.decode(MobileAuthEnrolmentStatus.self, from: first.body)
            #expect(status.enrolled && status.pushEnrolled)
            let replayed = try await fixture.send("GET", Endpoint.mobileAuthStatus, headers: headers)
            #expect(replayed.status == 401)
            #expect(try errorBody(replayed).errorDescription.contains("already used"))
            // A fresh proof is fine, and the push enrolment (which reads the status in its own
            // change) still answers it.
            let fresh = try await fixture.send(
                "GET",
                Endpoint.mobileAuthStatus,
                headers: try await client.resourceHeaders(.user, method: "GET", url: url)
            )
            #expect(fresh.status == 200)
            try await client.enrollForPushMobileAuth(deviceToken: "apns-token-0002", platform: .apns)
        }
    }
}

extension Fixture {
    /// The mobile-auth tables, to compare before and after a refused request.
    func snapshotMobileAuth() async throws -> String {
        try await snapshot(of: ["mobile_enrolments", "mobile_transactions", "mobile_deliveries", "flows", "profiles"])
    }
}
