import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import Testing

/// An installation below the SDK: its own key of any supported curve, registered at /v1/clients.
struct RawInstallation {
    let key: DPoP.SigningKey
    let fixture: Fixture

    func proof(_ method: String, _ path: String, url: String? = nil, nonce: String? = nil) throws -> String {
        try DPoP.proof(
            method: method,
            url: url ?? fixture.transport.baseURL + path,
            nonce: nonce,
            signingKey: key,
            now: Date()
        )
    }

    func register(appID: String = "test-app") async throws -> WireResponse {
        let body = try WireCoding.encode(ClientRegistrationRequest(appID: appID, publicKey: key.jwk))
        return try await fixture.send(
            "POST",
            Endpoint.clients,
            body: body,
            headers: ["DPoP": try proof("POST", Endpoint.clients)]
        )
    }

    /// `POST /v1/token` with a form.
    func token(_ form: String, nonce: String? = nil) async throws -> WireResponse {
        try await fixture.send(
            "POST",
            Endpoint.token,
            body: Data(form.utf8),
            headers: [
                "Content-Type": "application/x-www-form-urlencoded",
                "DPoP": try proof("POST", Endpoint.token, nonce: nonce),
            ]
        )
    }
}

func errorBody(_ response: WireResponse) throws -> ErrorBody {
    try WireCoding.decode(ErrorBody.self, from: response.body)
}

@Suite("The OAuth surface: forms, DPoP in full, grants")
struct OAuthTests {
    @Test(
        "token and revoke take forms; unknown parameters are ignored, a repeated one is refused",
        arguments: Mode.allCases
    )
    func forms(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            let tokens = try #require(await client.sessionTokens)
            func post(_ path: String, _ form: String) async throws -> WireResponse {
                try await fixture.send(
                    "POST",
                    path,
                    body: Data(form.utf8),
                    headers: [
                        "Content-Type": "application/x-www-form-urlencoded; charset=UTF-8",
                        "DPoP": try await client.dpopProof(method: "POST", url: fixture.transport.baseURL + path),
                    ]
                )
            }
            let repeated = try await post(
                Endpoint.token,
                "grant_type=refresh_token&refresh_token=\(tokens.refreshToken)&grant_type=refresh_token"
            )
            #expect(repeated.status == 400)
            #expect(try errorBody(repeated).error == "invalid_request")
            let unsupported = try await post(Endpoint.token, "grant_type=password&username=a&password=b")
            #expect(unsupported.status == 400)
            #expect(try errorBody(unsupported).error == "unsupported_grant_type")
            // RFC 6749 §5.2: the body names `error` and `error_description`.
            let raw = try #require(try JSONSerialization.jsonObject(with: unsupported.body) as? [String: Any])
            #expect(raw["error_description"] is String)

            let rotated = try await post(
                Endpoint.token,
                "grant_type=refresh_token&refresh_token=\(tokens.refreshToken)&client_id=ignored-by-rfc-6749"
            )
            #expect(rotated.status == 200, "\(String(decoding: rotated.body, as: UTF8.self))")
            let fresh = try WireCoding.decode(TokenResponse.self, from: rotated.body)
            #expect(fresh.refreshToken != tokens.refreshToken && fresh.tokenType == "DPoP")

            let revoked = try await post(Endpoint.revoke, "token=\(fresh.refreshToken)&token_type_hint=refresh_token")
            #expect(revoked.status == 200)
            let afterRevocation = try await post(
                Endpoint.token,
                "grant_type=refresh_token&refresh_token=\(fresh.refreshToken)"
            )
            #expect(afterRevocation.status == 400)
            #expect(try errorBody(afterRevocation).error == "invalid_grant")
        }
    }

    @Test("htu is the whole URI: another host or scheme is refused, 400 at the token endpoint and 401 at a resource")
    func wholeURI() async throws {
        try await withFixture(.http) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            let tokens = try #require(await client.sessionTokens)
            let base = fixture.transport.baseURL
            func resource(_ url: String) async throws -> WireResponse {
                try await fixture.send(
                    "GET",
                    Endpoint.profileResource,
                    headers: [
                        "Authorization": "DPoP \(tokens.accessToken)",
                        "DPoP": try await client.dpopProof(method: "GET", url: url),
                    ]
                )
            }
            let port = try #require(URL(string: base)?.port)
            for foreign in [
                "http://evil.example:\(port)", "https://127.0.0.1:\(port)", "http://127.0.0.1:\(port + 1)",
                "http://localhost:\(port)",
            ] {
                let refused = try await resource(foreign + Endpoint.profileResource)
                #expect(refused.status == 401, "\(foreign)")
                #expect(try errorBody(refused).error == "invalid_dpop_proof")
                #expect(refused.header("WWW-Authenticate")?.hasPrefix(#"DPoP error="invalid_dpop_proof""#) == true)
            }
            // RFC 3986 normalisation: case of scheme and host, query and fragment do not matter.
            for same in [
                "HTTP://127.0.0.1:\(port)\(Endpoint.profileResource)",
                "\(base)\(Endpoint.profileResource)?page=2#top",
            ] {
                #expect(try await resource(same).status == 200, "\(same)")
            }
            let elsewhere = try await fixture.send(
                "POST",
                Endpoint.token,
                body: Data("grant_type=refresh_token&refresh_token=\(tokens.refreshToken)".utf8),
                headers: [
                    "Content-Type": "application/x-www-form-urlencoded",
                    "DPoP": try await client.dpopProof(method: "POST", url: "http://evil.example:\(port)/v1/token"),
                ]
            )
            #expect(elsewhere.status == 400)
            #expect(try errorBody(elsewhere).error == "invalid_dpop_proof")
            #expect(elsewhere.header("WWW-Authenticate") == nil)
            // Nothing was spent: the refresh token still rotates.
            try await client.refreshSession()
        }
    }

    @Test("ES384 and EdDSA keys register and get device tokens; an alg that does not fit its key is refused")
    func algorithms() async throws {
        try await withFixture(.embedded) { fixture in
            for key in [DPoP.SigningKey.p384(P384.Signing.PrivateKey()), .ed25519(Curve25519.Signing.PrivateKey())] {
                let installation = RawInstallation(key: key, fixture: fixture)
                let registered = try await installation.register()
                #expect(registered.status == 201, "\(String(decoding: registered.body, as: UTF8.self))")
                let issued = try await installation.token("grant_type=client_credentials")
                #expect(issued.status == 200, "\(String(decoding: issued.body, as: UTF8.self))")
                #expect(try WireCoding.decode(AccessTokenResponse.self, from: issued.body).scope == "catalogue")
            }
            // A proof whose header claims ES256 over an Ed25519 key.
            let edKey = Curve25519.Signing.PrivateKey()
            let honest = try DPoP.proof(
                method: "POST",
                url: fixture.transport.baseURL + Endpoint.token,
                signingKey: .ed25519(edKey),
                now: Date()
            )
            let parts = honest.split(separator: ".")
            let headerJSON = try #require(Data(base64URLEncoded: parts[0]))
            var fields = try #require(try JSONSerialization.jsonObject(with: headerJSON) as? [String: Any])
            fields["alg"] = "ES256"
            let mislabelled = try JSONSerialization.data(withJSONObject: fields).base64URLEncodedString
            let input = mislabelled + "." + parts[1]
            let forged = input + "." + (try edKey.signature(for: Data(input.utf8))).base64URLEncodedString
            let refused = try await fixture.send(
                "POST",
                Endpoint.token,
                body: Data("grant_type=client_credentials".utf8),
                headers: ["Content-Type": "application/x-www-form-urlencoded", "DPoP": forged]
            )
            #expect(refused.status == 400)
            #expect(try errorBody(refused).errorDescription.contains("alg"))
            // alg none: no signature at all.
            fields["alg"] = "none"
            let unsigned =
                try JSONSerialization.data(withJSONObject: fields).base64URLEncodedString + "." + parts[1] + "."
            let none = try await fixture.send(
                "POST",
                Endpoint.token,
                body: Data("grant_type=client_credentials".utf8),
                headers: ["Content-Type": "application/x-www-form-urlencoded", "DPoP": unsigned]
            )
            #expect(none.status == 400)
            #expect(try errorBody(none).error == "invalid_dpop_proof")
        }
    }

    @Test("a jwk with a private key, critical extensions, a coordinate spelt two ways or a NUL in jti is refused")
    func proofHeaders() async throws {
        try await withFixture(.embedded) { fixture in
            let key = P256.Signing.PrivateKey()
            let jwk = PublicJWK(key.publicKey)
            let y = try #require(jwk.y)
            func proof(
                header extra: [String: Any] = [:],
                jwk jwkExtra: [String: Any] = [:],
                jti: String? = nil
            ) throws
                -> String
            {
                var jwkFields: [String: Any] = ["kty": "EC", "crv": "P-256", "x": jwk.x, "y": y]
                jwkFields.merge(jwkExtra) { $1 }
                var header: [String: Any] = ["typ": "dpop+jwt", "alg": "ES256", "jwk": jwkFields]
                header.merge(extra) { $1 }
                let claims: [String: Any] = [
                    "jti": jti ?? Data.random(count: 16).base64URLEncodedString, "htm": "POST",
                    "htu": fixture.transport.baseURL + Endpoint.clients, "iat": Int(Date().timeIntervalSince1970),
                ]
                let input =
                    try JSONSerialization.data(withJSONObject: header).base64URLEncodedString + "."
                    + JSONSerialization.data(withJSONObject: claims).base64URLEncodedString
                return input + "." + (try key.signature(for: Data(input.utf8))).rawRepresentation.base64URLEncodedString
            }
            func register(_ proof: String) async throws -> WireResponse {
                try await fixture.send(
                    "POST",
                    Endpoint.clients,
                    body: try WireCoding.encode(ClientRegistrationRequest(appID: "test-app", publicKey: jwk)),
                    headers: ["DPoP": proof]
                )
            }
            // The last character of y with its spare bits changed: the same key, spelt another way.
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            let lastCharacter = try #require(y.last)
            let last = try #require(alphabet.firstIndex(of: lastCharacter))
            let respelt = String(y.dropLast()) + String(alphabet[last ^ 1])  // a spare bit flipped
            // The decoder itself refuses the second spelling; the key check must too.
            #expect(Data(base64URLEncoded: respelt) == nil)
            for (name, refused) in [
                ("private key", try proof(jwk: ["d": key.rawRepresentation.base64URLEncodedString])),
                ("crit", try proof(header: ["crit": ["exp"]])),
                ("NUL in jti", try proof(jti: "abcdefgh\u{0}AAAAAAAAQ1")),
                ("non-canonical y", try proof(jwk: ["y": respelt])),
            ] {
                let response = try await register(refused)
                #expect(response.status == 400, "\(name)")
                #expect(try errorBody(response).error == "invalid_dpop_proof", "\(name)")
            }
            #expect(try await register(try proof()).status == 201)
        }
    }

    @Test(
        "server nonces: a proof without the current nonce is refused with one; the SDK follows",
        arguments: Mode.allCases
    )
    func nonces(mode: Mode) async throws {
        try await withFixture(mode, requireDPoPNonce: true) { fixture in
            // The SDK registers, authenticates and refreshes, picking up nonces as it goes.
            let client = try fixture.client()
            let profile = try await register(client)
            try await client.refreshSession()
            #expect(try await client.fetchProfileResource().profileID == profile.id)
            try await client.authenticateUserImplicitly(profile)

            let installation = RawInstallation(key: .p256(P256.Signing.PrivateKey()), fixture: fixture)
            let first = try await installation.register()
            #expect(first.status == 400)
            #expect(try errorBody(first).error == "use_dpop_nonce")
            let nonce = try #require(first.header("DPoP-Nonce"))
            let body = try WireCoding.encode(
                ClientRegistrationRequest(appID: "test-app", publicKey: installation.key.jwk)
            )
            let second = try await fixture.send(
                "POST",
                Endpoint.clients,
                body: body,
                headers: ["DPoP": try installation.proof("POST", Endpoint.clients, nonce: nonce)]
            )
            #expect(second.status == 201)
            let forged = try await installation.token(
                "grant_type=client_credentials",
                nonce: "AAAAAAAAAAAAAAAAAAAAAAAA"
            )
            #expect(forged.status == 400)
            #expect(try errorBody(forged).error == "use_dpop_nonce")
            #expect(try await installation.token("grant_type=client_credentials", nonce: nonce).status == 200)

            // At a resource: 401 with the challenge naming use_dpop_nonce.
            let tokens = try #require(await client.sessionTokens)
            let resource = try await fixture.send(
                "GET",
                Endpoint.profileResource,
                headers: [
                    "Authorization": "DPoP \(tokens.accessToken)",
                    "DPoP": try await client.dpopProof(
                        method: "GET",
                        url: fixture.transport.baseURL + Endpoint.profileResource
                    ),
                ]
            )
            #expect(resource.status == 401)
            #expect(resource.header("WWW-Authenticate")?.contains(#"error="use_dpop_nonce""#) == true)
            #expect(resource.header("DPoP-Nonce") != nil)
        }
    }

    @Test("an unknown app id is a configuration error (10001), not a removed device")
    func unknownApplication() async throws {
        try await withFixture(.embedded) { fixture in
            let installation = RawInstallation(key: .p256(P256.Signing.PrivateKey()), fixture: fixture)
            let refused = try await installation.register(appID: "no-such-app")
            #expect(refused.status == 400)
            let error = try errorBody(refused)
            #expect(error.error == "invalid_client_metadata")
            #expect(error.gatehouseCode == GenericError.Code.configurationInvalid.rawValue)
            #expect(try await fixture.count("clients") == 0)
            // The SDK reports a configuration problem and keeps what it has.
            let misconfigured = try fixture.client("misconfigured", appID: "no-such-app")
            do {
                _ = try await misconfigured.registerUser(delegate: ScriptedResponder([]))
                Issue.record("an unknown application registered")
            } catch let error as GenericError {
                #expect(error.code == .configurationInvalid)
            }
        }
    }

    @Test("metadata (RFC 8414) names the endpoints, grants, scopes and DPoP algorithms")
    func metadata() async throws {
        try await withFixture(.http) { fixture in
            let response = try await fixture.send("GET", Endpoint.metadata)
            #expect(response.status == 200)
            let metadata = try WireCoding.decode(AuthorizationServerMetadata.self, from: response.body)
            let base = fixture.transport.baseURL
            #expect(metadata.issuer == base)
            #expect(metadata.tokenEndpoint == base + "/v1/token")
            #expect(metadata.introspectionEndpoint == base + "/v1/introspect")
            #expect(metadata.revocationEndpoint == base + "/v1/revoke")
            #expect(metadata.dpopSigningAlgValuesSupported == ["ES256", "ES384", "EdDSA"])
            #expect(Set(metadata.grantTypesSupported).isSuperset(of: ["refresh_token", "client_credentials"]))
            #expect(metadata.scopesSupported == ["read", "write", "catalogue"])
            #expect(metadata.codeChallengeMethodsSupported == ["S256"])
            #expect(metadata.responseTypesSupported.isEmpty)
        }
    }
}
