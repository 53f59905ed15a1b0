import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseServer

/// Whether `data` holds `pin` as text or as digit values.
private func holds(_ data: Data, pin: String) -> Bool {
    let bytes = Array(data)
    let text = Array(pin.utf8)
    for needle in [text, text.map { $0 - UInt8(ascii: "0") }] where bytes.count >= needle.count {
        for start in 0...(bytes.count - needle.count) where bytes[start] == needle[0] {
            if Array(bytes[start..<start + needle.count]) == needle { return true }
        }
    }
    return false
}

/// Files below `directory`, recursively.
private func files(in directory: URL) -> [URL] {
    guard let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else {
        return []
    }
    return enumerator.compactMap { $0 as? URL }.filter {
        (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true
    }
}

/// The `op` of a PIN plugin message carried in a flow request, if it is one.
func pinOperation(_ request: WireRequest) -> String? {
    guard request.path.hasPrefix(Endpoint.flowPrefix),
        let body = try? WireCoding.decode(FlowMessageRequest.self, from: request.body),
        let message = body.message,
        let object = try? JSONSerialization.jsonObject(with: message.data) as? [String: Any]
    else { return nil }
    return object["op"] as? String
}

@Suite("Token server security", .serialized)
struct SecurityTests {
    @Test("the PIN's bytes appear in no database file, no log line and no request", arguments: Mode.allCases)
    func pinNeverStoredOrLogged(mode: Mode) async throws {
        let pins = ["258147", "914736", "111222"]
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("111222"), .pin("258147")]))
            try await client.changePin(delegate: ScriptedResponder([.pin("258147"), .createPin("914736")]))
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("914736")]))

            let stored = files(in: fixture.directory)
            #expect(stored.contains { $0.lastPathComponent == "client.sqlite" })
            if fixture.dialect == .sqlite {
                #expect(stored.contains { $0.lastPathComponent == "server.sqlite" })
            } else {
                let contents = try await fixture.storedValues()
                #expect(contents.count > 1000)
                for pin in pins { #expect(!holds(contents, pin: pin), "\(pin) found in the PostgreSQL database") }
            }
            for file in stored {
                let data = try Data(contentsOf: file)
                for pin in pins { #expect(!holds(data, pin: pin), "\(pin) found in \(file.lastPathComponent)") }
            }
            let lines = fixture.serverLog.lines + fixture.clientLog.lines
            #expect(!lines.isEmpty)
            for line in lines { for pin in pins { #expect(!line.contains(pin), "\(pin) logged: \(line)") } }
            for (request, response) in fixture.transport.recorded {
                for pin in pins {
                    #expect(!holds(request.body, pin: pin), "\(pin) sent to \(request.path)")
                    #expect(!holds(response.body, pin: pin), "\(pin) received from \(request.path)")
                }
            }
        }
    }

    @Test("20 concurrent wrong PINs never push the counter past the maximum", arguments: Mode.allCases)
    func concurrentWrongPins(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 5) { fixture in
            let owner = try fixture.client()
            let profile = try await register(owner)
            // Record every value the failure counter takes.
            try await fixture.watchFailures()
            // 20 app instances on the same device data, each trying one wrong PIN at the same time.
            let clients = try (0..<20).map { _ in try fixture.client() }
            let registrationExchanges = fixture.transport.recorded.count
            let outcomes = await withTaskGroup(of: String.self) { group in
                for client in clients {
                    group.addTask {
                        do {
                            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("000111")]))
                            return "authenticated"
                        } catch let error as any DomainError {
                            return error.codeName
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                return await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(!outcomes.contains("authenticated"))
            #expect(try await fixture.highestFailureSeen() == 5)
            // Exactly five evaluations were released to clients: one per allowed attempt.
            let released = fixture.transport.recorded.dropFirst(registrationExchanges).filter { request, response in
                pinOperation(request) == "evaluate" && response.status == 200
            }
            #expect(released.count == 5)
            // Each attempt ends in the deregistration, or — for one that was asked for a PIN again
            // before the limit was reached — in the script's cancellation, or — for one that starts
            // after the device heard of the deregistration and forgot the profile — in the device's
            // own "not registered"; none gets further.
            #expect(
                outcomes.allSatisfy {
                    ["userDeregistered", "actionCancelled", "authenticatorNotRegistered"].contains($0)
                },
                "\(outcomes)"
            )
            #expect(outcomes.contains("userDeregistered"))
            #expect(try await fixture.count("profiles") == 0)
        }
    }

    @Test("a replayed PIN proof is refused, with or without a fresh DPoP proof", arguments: Mode.allCases)
    func replayedProof(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            let prove = try #require(fixture.transport.recorded.last { pinOperation($0.0) == "prove" }?.0)
            let tokensBefore = try await fixture.count("tokens")

            // The flow ended with its single-use nonce: the same bytes, or a fresh DPoP proof, find nothing.
            let replay = try await fixture.transport.send(prove)
            #expect(replay.status == 404)

            var fresh = prove
            fresh.headers["dpop"] = try await client.dpopProof(
                method: "POST",
                url: fixture.transport.baseURL + prove.path
            )
            let second = try await fixture.transport.send(fresh)
            #expect(second.status == 404)
            #expect(try await fixture.count("tokens") == tokensBefore)
        }
    }

    @Test("a reused refresh token revokes its whole family", arguments: Mode.allCases)
    func refreshReuse(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            let original = try #require(await client.sessionTokens)
            try await client.refreshSession()
            let rotated = try #require(await client.sessionTokens)
            #expect(try await client.fetchProfileResource().subject == "jane@example.com")

            // Someone replays the first refresh token, signed with the right key.
            let proof = try await client.dpopProof(method: "POST", url: fixture.transport.baseURL + Endpoint.token)
            let reuse = try await fixture.send(
                "POST",
                Endpoint.token,
                body: try WireCoding.encode(
                    TokenRequest(grantType: "refresh_token", refreshToken: original.refreshToken)
                ),
                headers: ["DPoP": proof]
            )
            #expect(reuse.status == 400)
            let error = try WireCoding.decode(ErrorBody.self, from: reuse.body)
            #expect(error.error == "invalid_grant")
            #expect(error.errorDescription.contains("already used"))

            // The whole family is gone: the current access and refresh tokens no longer work.
            let access = try await fixture.send(
                "GET",
                Endpoint.profileResource,
                headers: ["Authorization": "DPoP \(rotated.accessToken)"]
            )
            #expect(access.status == 401)
            do {
                try await client.refreshSession()
                Issue.record("a revoked refresh token still worked")
            } catch let error as AuthenticationError {
                #expect(error.code == .userNotAuthenticated)
            }
            let unrevoked = try await fixture.read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM tokens WHERE revoked = FALSE") ?? -1
            }
            #expect(unrevoked == 0)
        }
    }

    @Test("a forged refresh token (another generation, a changed MAC) is not valid and revokes nothing")
    func forgedRefreshToken() async throws {
        try await withFixture(.embedded) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            try await client.refreshSession()
            let current = try #require(await client.sessionTokens).refreshToken
            let parts = current.split(separator: ".").map(String.init)
            #expect(parts.count == 3 && parts[1] == "1")
            var tampered = Array(parts[2])
            tampered[3] = tampered[3] == "A" ? "B" : "A"
            for forged in [
                "\(parts[0]).0.\(parts[2])", "\(parts[0]).1.\(String(tampered))", "\(parts[0]).01.\(parts[2])",
                "other-family-000000000.0.\(parts[2])",
            ] {
                let url = fixture.transport.baseURL + Endpoint.token
                let refused = try await fixture.send(
                    "POST",
                    Endpoint.token,
                    body: Data("grant_type=refresh_token&refresh_token=\(forged)".utf8),
                    headers: [
                        "Content-Type": "application/x-www-form-urlencoded",
                        "DPoP": try await client.dpopProof(method: "POST", url: url),
                    ]
                )
                #expect(refused.status == 400, "\(forged)")
                #expect(
                    try WireCoding.decode(ErrorBody.self, from: refused.body).errorDescription.contains("not valid")
                )
            }
            // None of them counted as a reuse: the session goes on.
            try await client.refreshSession()
        }
    }

    @Test("a tampered, a foreign-device and an unbound access token are refused", arguments: Mode.allCases)
    func tokenBinding(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            let tokens = try #require(await client.sessionTokens)
            let url = fixture.transport.baseURL + Endpoint.profileResource

            // The genuine request works.
            let genuine = try await fixture.send(
                "GET",
                Endpoint.profileResource,
                headers: [
                    "Authorization": "DPoP \(tokens.accessToken)",
                    "DPoP": try await client.dpopProof(method: "GET", url: url),
                ]
            )
            #expect(genuine.status == 200)

            // Tampered token: one character changed.
            var tampered = Array(tokens.accessToken)
            tampered[5] = tampered[5] == "A" ? "B" : "A"
            let tamperedToken = String(tampered)
            let foreignKey = P256.Signing.PrivateKey()
            let tamperedResponse = try await fixture.send(
                "GET",
                Endpoint.profileResource,
                headers: [
                    "Authorization": "DPoP \(tamperedToken)",
                    "DPoP": try DPoP.proof(
                        method: "GET",
                        url: url,
                        accessToken: tamperedToken,
                        key: foreignKey,
                        now: Date()
                    ),
                ]
            )
            #expect(tamperedResponse.status == 401)

            // Foreign device: the real token with a proof from another key.
            let foreign = try await fixture.send(
                "GET",
                Endpoint.profileResource,
                headers: [
                    "Authorization": "DPoP \(tokens.accessToken)",
                    "DPoP": try DPoP.proof(
                        method: "GET",
                        url: url,
                        accessToken: tokens.accessToken,
                        key: foreignKey,
                        now: Date()
                    ),
                ]
            )
            #expect(foreign.status == 401)
            #expect(
                try WireCoding.decode(ErrorBody.self, from: foreign.body).errorDescription.contains("another device")
            )

            // No proof at all, and a proof for another URL.
            let bare = try await fixture.send(
                "GET",
                Endpoint.profileResource,
                headers: ["Authorization": "DPoP \(tokens.accessToken)"]
            )
            #expect(bare.status == 401)
            let elsewhere = try await fixture.send(
                "GET",
                Endpoint.profileResource,
                headers: [
                    "Authorization": "DPoP \(tokens.accessToken)",
                    "DPoP": try await client.dpopProof(method: "GET", url: fixture.transport.baseURL + "/v1/other"),
                ]
            )
            #expect(elsewhere.status == 401)
        }
    }
}
