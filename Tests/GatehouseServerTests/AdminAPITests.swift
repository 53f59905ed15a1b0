import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@testable import GatehouseServer

/// An admin client of the tests, through the raw wire.
struct AdminCaller {
    let fixture: Fixture
    var id = "helpdesk"
    var secret = Fixture.helpdeskSecret

    var basic: String { "Basic " + Data("\(id):\(secret)".utf8).base64EncodedString() }

    /// The token endpoint's answer to a client_credentials request with Basic credentials.
    func tokenResponse(scope: String? = nil, proofKey: P256.Signing.PrivateKey? = nil) async throws -> WireResponse {
        var headers = ["Authorization": basic, "Content-Type": "application/x-www-form-urlencoded"]
        if let proofKey {
            headers["DPoP"] = try DPoP.proof(
                method: "POST",
                url: fixture.transport.baseURL + Endpoint.token,
                key: proofKey,
                now: Date()
            )
        }
        let form =
            "grant_type=client_credentials"
            + (scope.map { "&scope=" + $0.replacingOccurrences(of: " ", with: "+") } ?? "")
        return try await fixture.send("POST", Endpoint.token, body: Data(form.utf8), headers: headers)
    }

    func token(scope: String? = nil) async throws -> String {
        let response = try await tokenResponse(scope: scope)
        #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        return try WireCoding.decode(AccessTokenResponse.self, from: response.body).accessToken
    }

    func send(_ method: String, _ path: String, token: String) async throws -> WireResponse {
        try await fixture.send(method, path, headers: ["Authorization": "Bearer \(token)"])
    }
}

/// Decodes an admin API answer (dates in RFC 3339).
func adminDecode<T: Decodable>(_ type: T.Type, _ response: WireResponse) throws -> T {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(type, from: response.body)
}

private struct Users: Decodable { var users: [UserSummary] }
private struct Revoked: Decodable { var revoked: Int }

@Suite("The admin API: admin clients, finding users, actions, the audit trail")
struct AdminAPITests {
    /// Every admin endpoint, with a profile id filled in.
    static func endpoints(profile: String) -> [(method: String, path: String, write: Bool)] {
        [
            ("GET", Endpoint.adminUsers + "?subject_prefix=jane", false),
            ("GET", Endpoint.adminUser + "?identity_provider=codes&subject=jane@example.com", false),
            ("GET", Endpoint.adminAudit, false),
            ("GET", Endpoint.adminAuditExport, false),
            ("POST", Endpoint.adminProfilesPrefix + profile + "/revoke-sessions", true),
            ("POST", Endpoint.adminProfilesPrefix + profile + "/clear-lockout", true),
            ("DELETE", Endpoint.adminProfilesPrefix + profile + "/push-enrolment", true),
            ("DELETE", Endpoint.adminProfilesPrefix + profile + "/authenticators/face", true),
            ("DELETE", Endpoint.adminProfilesPrefix + profile, true),
        ]
    }

    @Test(
        "admin endpoints refuse every non-admin credential and every scope a token was not granted",
        arguments: Mode.allCases
    )
    func refusals(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let deviceToken = try #require(await client.sessionTokens).accessToken
            let before = try await fixture.snapshot(of: [
                "profiles", "registrations", "families", "tokens", "audit_events",
            ])
            let resourceServer = "Basic " + Data("gateway:\(Fixture.gatewaySecret)".utf8).base64EncodedString()
            let portal = "Basic " + Data("portal:\(Fixture.portalSecret)".utf8).base64EncodedString()
            let admin = "Basic " + Data("helpdesk:\(Fixture.helpdeskSecret)".utf8).base64EncodedString()
            let readOnly = try await AdminCaller(fixture: fixture, id: "auditor", secret: Fixture.auditorSecret).token()
            for endpoint in Self.endpoints(profile: profile.id) {
                // No credential, a device's access token (either scheme), other clients' Basic
                // credentials, the admin client's own secret instead of a token, a made-up token.
                let credentials = [
                    nil, "DPoP \(deviceToken)", "Bearer \(deviceToken)", resourceServer, portal, admin,
                    "Bearer " + Data.random(count: 32).base64URLEncodedString,
                ]
                for credential in credentials {
                    let response = try await fixture.send(
                        endpoint.method,
                        endpoint.path,
                        headers: credential.map { ["Authorization": $0] } ?? [:]
                    )
                    #expect(response.status == 401, "\(endpoint.path) with \(credential ?? "nothing")")
                    #expect(try errorBody(response).error == "invalid_token")
                }
                // admin:read does not grant the changes.
                let response = try await fixture.send(
                    endpoint.method,
                    endpoint.path,
                    headers: ["Authorization": "Bearer \(readOnly)"]
                )
                if endpoint.write {
                    #expect(response.status == 403, "\(endpoint.path)")
                    #expect(try errorBody(response).error == "insufficient_scope")
                } else {
                    #expect(response.status == 200, "\(endpoint.path)")
                }
            }
            // A token asked with a narrower scope gets only that scope.
            let narrowed = try await AdminCaller(fixture: fixture).token(scope: "admin:read")
            let change = try await AdminCaller(fixture: fixture)
                .send("POST", Endpoint.adminProfilesPrefix + profile.id + "/revoke-sessions", token: narrowed)
            #expect(change.status == 403)
            #expect(
                try await fixture.snapshot(of: ["profiles", "registrations", "families", "tokens", "audit_events"])
                    == before
            )
            // The device still works: nothing was revoked.
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
        }
    }

    @Test(
        "the token endpoint: a wrong secret, a scope not granted, a DPoP-bound client without a proof",
        arguments: Mode.allCases
    )
    func tokens(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let wrong = try await AdminCaller(fixture: fixture, secret: "not-the-secret-0123456789").tokenResponse()
            #expect(wrong.status == 401)
            #expect(try errorBody(wrong).error == "invalid_client")
            let unknown = try await AdminCaller(fixture: fixture, id: "nobody").tokenResponse()
            #expect(unknown.status == 401)
            let beyond = try await AdminCaller(fixture: fixture, id: "auditor", secret: Fixture.auditorSecret)
                .tokenResponse(scope: "admin:write")
            #expect(beyond.status == 400)
            #expect(try errorBody(beyond).error == "invalid_scope")
            let madeUp = try await AdminCaller(fixture: fixture).tokenResponse(scope: "admin:everything")
            #expect(madeUp.status == 400)
            #expect(try await fixture.count("admin_tokens") == 0)

            // A DPoP-bound client: no proof, no token; with one, a DPoP token that only a proof of
            // the same key can use.
            let bound = AdminCaller(fixture: fixture, id: "bound-admin", secret: Fixture.boundAdminSecret)
            let unproven = try await bound.tokenResponse()
            #expect(unproven.status == 400)
            #expect(try errorBody(unproven).error == "invalid_dpop_proof")
            let key = P256.Signing.PrivateKey()
            let issued = try await bound.tokenResponse(proofKey: key)
            let answer = try WireCoding.decode(AccessTokenResponse.self, from: issued.body)
            #expect(answer.tokenType == "DPoP")
            #expect(answer.scope == "admin:write")
            let path = Endpoint.adminProfilesPrefix + "no-such-profile/revoke-sessions"
            func proof(_ key: P256.Signing.PrivateKey) throws -> String {
                try DPoP.proof(
                    method: "POST",
                    url: fixture.transport.baseURL + path,
                    accessToken: answer.accessToken,
                    key: key,
                    now: Date()
                )
            }
            let asBearer = try await bound.send("POST", path, token: answer.accessToken)
            #expect(asBearer.status == 401)
            let otherKey = try await fixture.send(
                "POST",
                path,
                headers: ["Authorization": "DPoP \(answer.accessToken)", "DPoP": try proof(P256.Signing.PrivateKey())]
            )
            #expect(otherKey.status == 401)
            let proven = try proof(key)
            let right = try await fixture.send(
                "POST",
                path,
                headers: ["Authorization": "DPoP \(answer.accessToken)", "DPoP": proven]
            )
            #expect(right.status == 404)
            #expect(try errorBody(right).error == "profile_not_found")
            // A proof is single-use.
            let replayed = try await fixture.send(
                "POST",
                path,
                headers: ["Authorization": "DPoP \(answer.accessToken)", "DPoP": proven]
            )
            #expect(replayed.status == 401)
        }
    }

    @Test(
        "a helpdesk finds a user, sees the device and its failed logins, revokes and deregisters it; the trail shows each step",
        arguments: Mode.allCases
    )
    func helpdesk(mode: Mode) async throws {
        try await withFixture(mode, maxPinFailures: 5) { fixture in
            let (client, profile) = try await enrolledDevice(fixture)
            // One wrong PIN, then the right one.
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("111222"), .pin("258147")]))
            let helpdesk = AdminCaller(fixture: fixture)
            let token = try await helpdesk.token()

            // Found by the beginning of the e-mail address, in any case.
            let found = try adminDecode(
                Users.self,
                try await helpdesk.send("GET", Endpoint.adminUsers + "?subject_prefix=JANE%40", token: token)
            )
            #expect(found.users.map(\.subject) == ["jane@example.com"])
            #expect(found.users.first?.profiles == 1)
            let none = try adminDecode(
                Users.self,
                try await helpdesk.send("GET", Endpoint.adminUsers + "?subject_prefix=jane_", token: token)
            )
            #expect(none.users.isEmpty)
            let byProfile = try adminDecode(
                Users.self,
                try await helpdesk.send("GET", Endpoint.adminUsers + "?profile_id=\(profile.id)", token: token)
            )
            #expect(byProfile.users.map(\.subject) == ["jane@example.com"])

            func device() async throws -> ProfileDetail {
                let detail = try adminDecode(
                    UserDetail.self,
                    try await helpdesk.send(
                        "GET",
                        Endpoint.adminUser + "?identity_provider=codes&subject=jane%40example.com",
                        token: token
                    )
                )
                guard let first = detail.profiles.first else { throw AdminError.profileNotFound }
                return first
            }
            let signedIn = try await device()
            #expect(signedIn.id == profile.id)
            #expect(signedIn.appID == "test-app")
            #expect(signedIn.failures == 0)
            #expect(signedIn.authenticators.map(\.id) == ["pin"])
            #expect(signedIn.sessions.filter(\.active).count == 1, "\(signedIn.sessions)")
            #expect(signedIn.lastUsedAt != nil)
            #expect(signedIn.pushEnrolment?.platform == "apns")
            #expect(signedIn.pushEnrolment?.hasPushToken == true)

            // The lost phone's session is revoked: it cannot refresh.
            let revoked = try adminDecode(
                Revoked.self,
                try await helpdesk.send(
                    "POST",
                    Endpoint.adminProfilesPrefix + profile.id + "/revoke-sessions",
                    token: token
                )
            )
            #expect(revoked.revoked == 1)
            #expect(try await device().sessions.allSatisfy { !$0.active })
            await #expect(throws: (any Error).self) { try await client.refreshSession() }

            // Whoever has it tries two PINs and gives up.
            _ = try? await client.authenticateUser(
                profile,
                delegate: ScriptedResponder([.pin("111333"), .pin("111444"), .cancel])
            )
            #expect(try await device().failures == 2)
            let failures = try adminDecode(
                AuditPage.self,
                try await helpdesk.send(
                    "GET",
                    Endpoint.adminAudit + "?profile_id=\(profile.id)&event=login_failure",
                    token: token
                )
            )
            #expect(failures.events.count == 3)
            #expect(
                failures.events.allSatisfy { $0.subject == "jane@example.com" && $0.detail["authenticator"] == "pin" }
            )

            // The count is cleared, then the phone deregistered.
            let cleared = try await helpdesk.send(
                "POST",
                Endpoint.adminProfilesPrefix + profile.id + "/clear-lockout",
                token: token
            )
            #expect(cleared.status == 204)
            #expect(try await device().failures == 0)
            let gone = try await helpdesk.send("DELETE", Endpoint.adminProfilesPrefix + profile.id, token: token)
            #expect(gone.status == 204)
            do {
                try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
                Issue.record("a deregistered profile authenticated")
            } catch let error as GenericError {
                #expect(error.code == .userDeregistered)
            }
            let again = try await helpdesk.send("DELETE", Endpoint.adminProfilesPrefix + profile.id, token: token)
            #expect(again.status == 404)

            // The whole story, newest first, the admin's own steps named after the client.
            let trail = try adminDecode(
                AuditPage.self,
                try await helpdesk.send(
                    "GET",
                    Endpoint.adminAudit + "?identity_provider=codes&subject=jane%40example.com&limit=100",
                    token: token
                )
            )
            let story = trail.events.reversed().map(\.event)
            #expect(
                story == [
                    "registration", "login", "login_failure", "login", "admin_revoke_sessions", "login_failure",
                    "login_failure", "admin_clear_lockout", "admin_deregister_profile",
                ]
            )
            let adminSteps = trail.events.filter { $0.event.hasPrefix("admin_") }
            #expect(adminSteps.allSatisfy { $0.actor == "admin_client:helpdesk" && $0.profileID == profile.id })
            #expect(adminSteps.first { $0.event == "admin_clear_lockout" }?.detail["failures_cleared"] == "2")
            // Still logged as before.
            #expect(fixture.auditLines("admin_deregister_profile").count == 1)

            // Paging: two at a time reaches the same events.
            var paged: [AuditRecord] = []
            var cursor: Int64?
            for _ in 0..<10 {
                let page = try adminDecode(
                    AuditPage.self,
                    try await helpdesk.send(
                        "GET",
                        Endpoint.adminAudit + "?subject=jane%40example.com&limit=2"
                            + (cursor.map { "&before=\($0)" } ?? ""),
                        token: token
                    )
                )
                paged += page.events
                guard let next = page.nextCursor else { break }
                cursor = next
            }
            #expect(paged == trail.events)

            // The export: JSON lines, oldest first, the same events.
            let export = try await helpdesk.send(
                "GET",
                Endpoint.adminAuditExport + "?subject=jane%40example.com",
                token: token
            )
            #expect(export.headers["Content-Type"] == "application/x-ndjson")
            let lines = String(decoding: export.body, as: UTF8.self).split(separator: "\n")
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            let exported = try lines.map { try decoder.decode(AuditRecord.self, from: Data($0.utf8)) }
            #expect(exported == trail.events.reversed())
            let resumed = try await helpdesk.send(
                "GET",
                Endpoint.adminAuditExport + "?subject=jane%40example.com&after=\(exported[5].seq)",
                token: token
            )
            #expect(String(decoding: resumed.body, as: UTF8.self).split(separator: "\n").count == exported.count - 6)

            // No PIN anywhere in the trail.
            let stored = try await fixture.snapshot(of: ["audit_events"])
            for pin in ["258147", "111222", "111333", "111444"] { #expect(!stored.contains(pin)) }
        }
    }

    @Test("actions refuse what they cannot do, and change nothing then", arguments: Mode.allCases)
    func actionRefusals(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await registeredAndLoggedIn(client)
            _ = try await client.registerAuthenticator("face", delegate: ScriptedResponder([.pin("258147")]))
            let helpdesk = AdminCaller(fixture: fixture)
            let token = try await helpdesk.token()
            let before = try await fixture.snapshot(of: ["profiles", "registrations", "families", "audit_events"])
            let pin = try await helpdesk.send(
                "DELETE",
                Endpoint.adminProfilesPrefix + profile.id + "/authenticators/pin",
                token: token
            )
            #expect(pin.status == 409)
            #expect(try errorBody(pin).error == "pin_cannot_be_removed")
            let unknown = try await helpdesk.send(
                "DELETE",
                Endpoint.adminProfilesPrefix + profile.id + "/authenticators/totp",
                token: token
            )
            #expect(unknown.status == 404)
            let notEnrolled = try await helpdesk.send(
                "DELETE",
                Endpoint.adminProfilesPrefix + profile.id + "/push-enrolment",
                token: token
            )
            #expect(notEnrolled.status == 409)
            let missing = try await helpdesk.send(
                "POST",
                Endpoint.adminProfilesPrefix + "nobody/revoke-sessions",
                token: token
            )
            #expect(missing.status == 404)
            let wrongMethod = try await helpdesk.send(
                "GET",
                Endpoint.adminProfilesPrefix + profile.id + "/revoke-sessions",
                token: token
            )
            #expect(wrongMethod.status == 405)
            let noFilter = try await helpdesk.send("GET", Endpoint.adminUsers, token: token)
            #expect(noFilter.status == 400)
            let unknownParameter = try await helpdesk.send("GET", Endpoint.adminUsers + "?email=jane", token: token)
            #expect(unknownParameter.status == 400)
            let twice = try await helpdesk.send("GET", Endpoint.adminUsers + "?subject=a&subject=b", token: token)
            #expect(twice.status == 400)
            let badEvent = try await helpdesk.send("GET", Endpoint.adminAudit + "?event=everything", token: token)
            #expect(badEvent.status == 400)
            let badTime = try await helpdesk.send("GET", Endpoint.adminAudit + "?since=yesterday", token: token)
            #expect(badTime.status == 400)
            // Nothing deletes the trail.
            let erase = try await helpdesk.send("DELETE", Endpoint.adminAudit, token: token)
            #expect(erase.status == 405)
            #expect(
                try await fixture.snapshot(of: ["profiles", "registrations", "families", "audit_events"]) == before
            )

            // The face goes; the PIN stays.
            let face = try await helpdesk.send(
                "DELETE",
                Endpoint.adminProfilesPrefix + profile.id + "/authenticators/face",
                token: token
            )
            #expect(face.status == 204)
            let registered = try await fixture.read { db in
                try String.fetchAll(
                    db,
                    sql: "SELECT authenticator FROM registrations WHERE profile_id = ?",
                    arguments: [profile.id]
                )
            }
            #expect(registered == ["pin"])
        }
    }

    @Test("the retention sweep removes events older than server.audit.retentionDays, and only those")
    func retention() async throws {
        try await withFixture(.embedded) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            let recent = try await fixture.count("audit_events")
            #expect(recent >= 1)
            let old = Date().timeIntervalSince1970 - 366 * 86400
            try await fixture.write { db in
                for _ in 0..<3 {
                    try db.execute(
                        sql: "INSERT INTO audit_events (at, event, actor, detail) VALUES (?, 'login', 'user', '{}')",
                        arguments: [old]
                    )
                }
            }
            let report = try await fixture.server.removeExpiredState()
            #expect(report.auditEvents == 3)
            #expect(try await fixture.count("audit_events") == recent)
        }
    }
}
