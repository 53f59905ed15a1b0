import BiometricAuthenticator
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@testable import GatehouseServer

/// What operators see of attacks: wrong client secrets limited and counted, failed attempts and
/// lockouts counted and audited once each.
@Suite("Security events: client authentication, failures, lockouts", .serialized)
struct SecurityEventTests {
    /// `Authorization: Basic` for `id` and `secret`.
    private func basic(_ id: String, _ secret: String) -> [String: String] {
        ["Authorization": "Basic " + Data("\(id):\(secret)".utf8).base64EncodedString()]
    }

    @Test("wrong Basic secrets at the portal API and at introspection are limited per address, counted and audited")
    func wrongBasicSecrets() async throws {
        // Over HTTP: the limit is per client address, which only a transport knows. The clock stands
        // still, so the limiter refills nothing however long a loaded machine takes for the requests.
        try await withFixture(.http, clock: ManualClock(Date())) { fixture in
            let transaction = Endpoint.portalTransaction("AAAAAAAAAAAAAAAAAAAAAAAA")
            func portal(_ secret: String, id: String = "portal") async throws -> WireResponse {
                try await fixture.send("GET", transaction, headers: basic(id, secret))
            }
            func introspect(_ secret: String) async throws -> WireResponse {
                var headers = basic("gateway", secret)
                headers["Content-Type"] = "application/x-www-form-urlencoded"
                return try await fixture.send("POST", Endpoint.introspect, body: Data("token=x".utf8), headers: headers)
            }
            // The right secrets use nothing up, however often they come.
            for _ in 0..<15 {
                #expect(try await portal(Fixture.portalSecret).status == 404)
                #expect(try await introspect(Fixture.gatewaySecret).status == 200)
            }
            #expect(fixture.securityEvents("client_authentication_failure") == 0)

            // Ten wrong secrets (the default burst) are refused as such, whichever endpoint.
            for guess in 0..<4 { #expect(try await portal("guess-\(guess)-0123456789").status == 401) }
            for guess in 0..<4 { #expect(try await introspect("guess-\(guess)-0123456789").status == 401) }
            #expect(try await portal("guess-0123456789", id: "nobody").status == 401)
            #expect(try await portal("guess-0123456789", id: "other-portal").status == 401)

            // Then the address is limited: a wrong secret and the right one alike get 429.
            for response in [
                try await portal("guess-10-0123456789"), try await portal(Fixture.portalSecret),
                try await introspect(Fixture.gatewaySecret),
            ] {
                #expect(response.status == 429)
                #expect(Int(response.header("Retry-After") ?? "").map { $0 >= 1 } == true)
            }

            // Each wrong secret was counted and audited once, naming only configured clients.
            #expect(fixture.securityEvents("client_authentication_failure") == 10)
            let audited = fixture.auditLines("client_authentication_failure")
            #expect(audited.count == 10, "\(audited)")
            #expect(audited.filter { $0.contains("client=portal") }.count == 4)
            #expect(audited.filter { $0.contains("client=gateway") }.count == 4)
            #expect(audited.filter { $0.contains("client=other-portal") }.count == 1)
            #expect(audited.filter { $0.contains("client=unknown") }.count == 1)
            #expect(audited.allSatisfy { !$0.contains("guess-") && !$0.contains("nobody") })
            #expect(fixture.securityEvents("rate_limited") == 3)
        }
    }

    @Test(
        "40 right Basic secrets at once from one address, before any is remembered, are all answered: only wrong ones use the limit"
    )
    func concurrentRightBasicSecrets() async throws {
        try await withFixture(.http, clock: ManualClock(Date())) { fixture in
            let port = try #require(URL(string: fixture.transport.baseURL)?.port)
            let credentials = Data("gateway:\(Fixture.gatewaySecret)".utf8).base64EncodedString()
            let request =
                "POST \(Endpoint.introspect) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic \(credentials)\r\n"
                + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\ntoken=x"
            // Raw connections, all open before any request is sent, so the 40 reach the server
            // together (an HTTP client would queue them on a few connections). The answers wait
            // in their sockets while they are read one by one.
            let connections = try (0..<40).map { _ in try LoopbackConnection(port: port) }
            // The database busy for a moment (on SQLite its one writer, as on a loaded server):
            // every presentation's check waits for it, all of them in flight at once.
            let busy = Task { try await fixture.write { _ in Thread.sleep(forTimeInterval: 0.5) } }
            try await Task.sleep(for: .milliseconds(50))
            for connection in connections { try connection.send(request) }
            try await busy.value
            var statuses: [String] = []
            for connection in connections { statuses.append(String(try await connection.receive().prefix(12))) }
            #expect(
                statuses.allSatisfy { $0 == "HTTP/1.1 200" },
                "\(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))"
            )
            #expect(fixture.securityEvents("rate_limited") == 0)
            // Wrong secrets are limited as before: the default burst of ten, then 429.
            var headers = basic("gateway", "guess-0123456789")
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            func wrong() async throws -> Int {
                try await fixture.send("POST", Endpoint.introspect, body: Data("token=x".utf8), headers: headers).status
            }
            for _ in 0..<10 { #expect(try await wrong() == 401) }
            #expect(try await wrong() == 429)
        }
    }

    @Test(
        "a lockout heard from the database is whole seconds, at most a minute: inf, nan and far futures change nothing"
    )
    func lockoutAnnouncementsAreBounded() {
        let now = 1_800_000_000.0
        let memory = ClientAuthenticationMemory { now }
        let credential = Data(repeating: 7, count: 32)
        for address in ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"] {
            memory.remember(credential, at: address)
        }
        for message in [
            "client-auth-lockout inf 10.0.0.1", "client-auth-lockout nan 10.0.0.1",
            "client-auth-lockout 1e12 10.0.0.1", "client-auth-lockout -5 10.0.0.1",
            "client-auth-lockout \(Int(now) - 5) 10.0.0.1", "client-auth-lockout 1800000030",
        ] {
            memory.hear(.message(message))
        }
        #expect(memory.lockedSeconds("10.0.0.1") == nil)
        #expect(memory.trusts(credential, at: "10.0.0.1"))
        // A year ahead is a minute at most; a lock forgets what the address proved.
        memory.hear(.message("client-auth-lockout \(Int(now) + 31_536_000) 10.0.0.2"))
        #expect(memory.lockedSeconds("10.0.0.2") == 60)
        #expect(!memory.trusts(credential, at: "10.0.0.2"))
        memory.hear(.message("client-auth-lockout \(Int(now) + 20) 10.0.0.3"))
        #expect(memory.lockedSeconds("10.0.0.3") == 20)
        #expect(memory.trusts(credential, at: "10.0.0.4"))
        // While announcements may be missed, nothing is taken on trust.
        memory.hear(.interrupted)
        #expect(!memory.trusts(credential, at: "10.0.0.4"))
    }

    @Test(
        "a successful PIN authentication counts no authentication_failure; a wrong PIN counts one",
        arguments: Mode.allCases
    )
    func failuresOnlyForFailures(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 5) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            for _ in 0..<3 {
                try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            }
            #expect(fixture.securityEvents("authentication_failure") == 0)
            // A wrong PIN, then the right one in the same authentication.
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("111222"), .pin("258147")]))
            #expect(fixture.securityEvents("authentication_failure") == 1)
            #expect(fixture.securityEvents("lockout") == 0)
        }
    }

    @Test(
        "a PIN lockout is one audited lockout, counted once, even when concurrent attempts reach it together",
        arguments: Mode.allCases
    )
    func concurrentPinLockout(mode: Mode) async throws {
        for round in 0..<3 {
            try await withFixture(mode, maxPinFailures: 3) { fixture in
                let owner = try fixture.client()
                let profile = try await register(owner)
                let clients = try (0..<12).map { _ in try fixture.client() }
                await withTaskGroup(of: Void.self) { group in
                    for client in clients {
                        group.addTask {
                            _ = try? await client.authenticateUser(
                                profile,
                                delegate: ScriptedResponder([.pin("000111"), .pin("000112"), .pin("000113")])
                            )
                        }
                    }
                }
                #expect(try await fixture.count("profiles") == 0, "round \(round)")
                #expect(fixture.securityEvents("lockout") == 1, "round \(round)")
                let lockouts = fixture.auditLines("lockout")
                #expect(lockouts.count == 1, "round \(round): \(lockouts)")
                #expect(lockouts.first?.contains("profile=\(profile.id)") == true)
                #expect(lockouts.first?.contains("authenticator=pin") == true)
                #expect(fixture.auditLines("deregistration").isEmpty, "round \(round)")
                // No more failures than guesses released (three); a guess still unanswered when
                // another request locked the profile out is in the lockout, not counted again.
                #expect(fixture.securityEvents("authentication_failure") <= 3, "round \(round)")
            }
        }
    }

    @Test("a lockout is audited whatever the authenticator: biometric and custom", arguments: Mode.allCases)
    func lockoutOfEveryAuthenticator(mode: Mode) async throws {
        for authenticator in ["face", "scripted"] {
            try await withFixture(mode, maxPinFailures: 3) { fixture in
                let client = try fixture.client()
                let profile = try await registeredAndLoggedIn(client)
                let answers: [ScriptedAnswer]
                if authenticator == "face" {
                    _ = try await client.registerAuthenticator("face", delegate: ScriptedResponder([.pin("258147")]))
                    for _ in 0..<3 { await fixture.sensor.enqueue(.noMatch) }
                    answers = Array(repeating: .biometric(.defaultPrompt), count: 3)
                } else {
                    try await add("scripted", to: client)
                    fixture.script.answer(4000, 4000, 4000)
                    answers = (0..<3).map { .customAuthenticator(.data("answer \($0)")) }
                }
                do {
                    try await client.authenticateUser(
                        profile,
                        authenticator: authenticator,
                        delegate: ScriptedResponder(answers)
                    )
                    Issue.record("\(authenticator): authenticated after three failures")
                } catch let error as GenericError {
                    #expect(error.code == .userDeregistered, "\(authenticator)")
                }
                #expect(try await fixture.count("profiles") == 0, "\(authenticator)")
                #expect(fixture.securityEvents("lockout") == 1, "\(authenticator)")
                #expect(fixture.securityEvents("authentication_failure") == 3, "\(authenticator)")
                let lockouts = fixture.auditLines("lockout")
                #expect(lockouts.count == 1, "\(authenticator): \(lockouts)")
                #expect(lockouts.first?.contains("authenticator=\(authenticator)") == true, "\(lockouts)")
            }
        }
    }
}
