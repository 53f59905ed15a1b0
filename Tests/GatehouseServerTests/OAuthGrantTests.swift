import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@testable import GatehouseServer

/// `POST /v1/introspect` as a resource server sends it.
private func introspect(
    _ fixture: Fixture,
    _ token: String,
    credentials: String? = "gateway:\(Fixture.gatewaySecret)"
) async throws -> (status: Int, answer: IntrospectionResponse?) {
    try await introspect(via: fixture.transport, token, credentials: credentials)
}

/// Asks `transport`'s server about `token`, as the resource server "gateway" (or with `credentials`).
func introspect(
    via transport: any TokenServerTransport,
    _ token: String,
    credentials: String? = "gateway:\(Fixture.gatewaySecret)"
) async throws -> (status: Int, answer: IntrospectionResponse?) {
    var headers = ["content-type": "application/x-www-form-urlencoded"]
    if let credentials { headers["authorization"] = "Basic " + Data(credentials.utf8).base64EncodedString() }
    let response = try await transport.send(
        WireRequest(
            method: "POST",
            path: Endpoint.introspect,
            headers: headers,
            body: Data("token=\(token)&token_type_hint=access_token".utf8)
        )
    )
    return (response.status, try? WireCoding.decode(IntrospectionResponse.self, from: response.body))
}

@Suite("Implicit and device tokens, and introspection")
struct OAuthGrantTests {
    @Test("introspection tells a resource server who a token is for and which key holds it", arguments: Mode.allCases)
    func introspection(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let tokens = try #require(await client.sessionTokens)

            let (status, answer) = try await introspect(fixture, tokens.accessToken)
            #expect(status == 200)
            let active = try #require(answer)
            #expect(active.active && active.kind == .user && active.sub == "jane@example.com")
            #expect(active.identityProvider == "codes" && active.scope == "read" && active.tokenType == "DPoP")
            #expect(active.appID == "test-app" && active.iss == fixture.transport.baseURL)
            #expect((active.exp ?? 0) > Int(Date().timeIntervalSince1970))
            // The binding: a resource server compares it with its DPoP proof's key.
            let proof = try await client.dpopProof(method: "GET", url: "https://api.example/x")
            let header = try #require(Data(base64URLEncoded: proof.split(separator: ".")[0]))
            let jwk = try #require(try header.jsonField("jwk"))
            let thumbprint = try WireCoding.decode(PublicJWK.self, from: jwk).thumbprint
            #expect(active.cnf?.jkt == thumbprint)

            // Only resource servers may ask; the refresh token is nothing to them.
            #expect(try await introspect(fixture, tokens.accessToken, credentials: nil).status == 401)
            #expect(
                try await introspect(fixture, tokens.accessToken, credentials: "gateway:wrong-secret-000000").status
                    == 401
            )
            #expect(
                try await introspect(fixture, tokens.accessToken, credentials: "portal:\(Fixture.portalSecret)").status
                    == 401
            )
            // "Basic" must be followed by a space, not by a byte that only looks like one once lowercased.
            let credentials = Data("gateway:\(Fixture.gatewaySecret)".utf8).base64EncodedString()
            let body = "token=\(tokens.accessToken)"
            if let http = fixture.transport.inner as? HTTPTransport, let port = URL(string: http.baseURL)?.port {
                // The SDK will not send a NUL in a header; a client below it can.
                let connection = try LoopbackConnection(port: port)
                defer { connection.closeBothSides() }
                try connection.send(
                    "POST \(Endpoint.introspect) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        + "Content-Type: application/x-www-form-urlencoded\r\nAuthorization: Basic\u{0}\(credentials)\r\n"
                        + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
                )
                let head = try await connection.receive()
                #expect(head.hasPrefix("HTTP/1.1 401") || head.hasPrefix("HTTP/1.1 400"), "\(head.prefix(40))")
            } else {
                let nul = try await fixture.send(
                    "POST",
                    Endpoint.introspect,
                    body: Data(body.utf8),
                    headers: [
                        "Content-Type": "application/x-www-form-urlencoded",
                        "Authorization": "Basic\u{0}" + credentials,
                    ]
                )
                #expect(nul.status == 401 || nul.status == 400)
            }
            #expect(try await introspect(fixture, tokens.refreshToken).answer == .inactive)
            #expect(try await introspect(fixture, "no-such-token").answer == .inactive)

            // After logout the access token is still unexpired but its family is revoked.
            await client.logout()
            #expect(try await introspect(fixture, tokens.accessToken).answer == .inactive)
            _ = profile
        }
    }

    @Test(
        "a token in use is answered from memory, and each change that ends it is seen at once",
        arguments: Mode.allCases
    )
    func keptAnswers(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let first = try #require(await client.sessionTokens)
            // Changed behind the server's back, the row is not what answers: the kept answer is.
            // On PostgreSQL an instance keeps answers only while its own heartbeat comes back
            // within a second, and forgets them when it does not; a loaded machine can miss one
            // between the read and the change, so the sequence is tried again (an instance that
            // kept nothing answers "changed" every time).
            let hash = Data(SHA256.hash(data: Data(first.accessToken.utf8)))
            let tokens = fixture.server.store.activeTokens
            var kept: String?
            for _ in 0..<10 where kept != "read" {
                // The row as it was, and nothing of an earlier try kept (it may have read the change).
                try await fixture.write { db in
                    try db.execute(sql: "UPDATE tokens SET scope = 'read' WHERE hash = ?", arguments: [hash])
                }
                tokens.evict(.token(hash: hash))
                for _ in 0..<150 where !tokens.isKeeping { try await Task.sleep(for: .milliseconds(100)) }
                #expect(try await introspect(fixture, first.accessToken).answer?.scope == "read")
                try await fixture.write { db in
                    try db.execute(sql: "UPDATE tokens SET scope = 'changed' WHERE hash = ?", arguments: [hash])
                }
                kept = try await introspect(fixture, first.accessToken).answer?.scope
            }
            #expect(kept == "read")

            // Rotation ends the access token it replaces.
            try await client.refreshSession()
            let second = try #require(await client.sessionTokens)
            #expect(try await introspect(fixture, first.accessToken).answer == .inactive)
            #expect(try await introspect(fixture, second.accessToken).answer?.active == true)
            // Logging out revokes the session.
            await client.logout()
            #expect(try await introspect(fixture, second.accessToken).answer == .inactive)

            // A new session, kept, then the user deregistered.
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            let third = try #require(await client.sessionTokens)
            #expect(try await introspect(fixture, third.accessToken).answer?.active == true)
            try await client.deregisterUser(profile)
            #expect(try await introspect(fixture, third.accessToken).answer == .inactive)
        }
    }

    @Test(
        "implicit authentication: no UI, scopes within the registration's, refused at user resources",
        arguments: Mode.allCases
    )
    func implicit(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            await client.logout()
            try await client.authenticateUserImplicitly(profile)
            #expect(await client.implicitlyAuthenticatedUserProfile == profile)
            let headers = try await client.resourceHeaders(
                .implicit,
                method: "GET",
                url: "https://api.example/greeting"
            )
            let token = try #require(headers["Authorization"]?.dropFirst("DPoP ".count)).description
            let answer = try #require(try await introspect(fixture, token).answer)
            #expect(
                answer.active && answer.kind == .implicit && answer.scope == "read" && answer.sub == "jane@example.com"
            )

            // write is the registration's to ask for, but not an implicit scope.
            await #expect(throws: (any Error).self) {
                try await client.authenticateUserImplicitly(profile, scopes: ["write"])
            }
            // The implicit token is not a user session.
            let atUserResource = try await fixture.send(
                "GET",
                Endpoint.profileResource,
                headers: try await client.resourceHeaders(
                    .implicit,
                    method: "GET",
                    url: fixture.transport.baseURL + Endpoint.profileResource
                )
            )
            #expect(atUserResource.status == 401)
            do {
                _ = try await client.resourceHeaders(.user, method: "GET", url: "https://api.example/x")
                Issue.record("a user token without a session")
            } catch let error as ResourceError {
                #expect(error.code == .userNotAuthenticated)
            }
            // Deregistration ends it.
            try await client.deregisterUser(profile)
            #expect(try await introspect(fixture, token).answer == .inactive)
        }
    }

    @Test(
        "device authentication: the installation's token, no user; off where the app has no device scopes",
        arguments: Mode.allCases
    )
    func device(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            do {
                _ = try await client.resourceHeaders(.device, method: "GET", url: "https://api.example/x")
                Issue.record("a device token before device authentication")
            } catch let error as ResourceError {
                #expect(error.code == .deviceNotAuthenticated)
            }
            try await client.authenticateDevice()
            let headers = try await client.resourceHeaders(.device, method: "GET", url: "https://api.example/catalogue")
            let token = try #require(headers["Authorization"]?.dropFirst("DPoP ".count)).description
            let answer = try #require(try await introspect(fixture, token).answer)
            #expect(answer.active && answer.kind == .device && answer.sub == nil && answer.scope == "catalogue")
            await #expect(throws: (any Error).self) { try await client.authenticateDevice(scopes: ["read"]) }

            let plain = RawInstallation(key: .p256(P256.Signing.PrivateKey()), fixture: fixture)
            #expect(try await plain.register(appID: "plain-app").status == 201)
            let off = try await plain.token("grant_type=client_credentials")
            #expect(off.status == 400)
            #expect(try errorBody(off).error == "unauthorized_client")
            // A key no installation registered gets nothing.
            let stranger = RawInstallation(key: .p256(P256.Signing.PrivateKey()), fixture: fixture)
            let unknown = try await stranger.token("grant_type=client_credentials")
            #expect(unknown.status == 401)
            #expect(try errorBody(unknown).error == "invalid_client")
            #expect(try await fixture.count("client_tokens") == 1)
        }
    }
}

extension Data {
    /// The JSON object's field `name`, re-encoded.
    fileprivate func jsonField(_ name: String) throws -> Data? {
        guard let object = try JSONSerialization.jsonObject(with: self) as? [String: Any], let field = object[name]
        else {
            return nil
        }
        return try JSONSerialization.data(withJSONObject: field)
    }
}
