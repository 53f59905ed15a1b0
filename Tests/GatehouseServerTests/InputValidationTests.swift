import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@Suite("Token server input validation", .serialized)
struct InputValidationTests {
    @Test(
        "every endpoint refuses malformed JSON, missing fields, wrong types and oversized bodies with a 4xx, changing nothing",
        arguments: Mode.allCases
    )
    func malformedBodies(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            // An open flow, so a flow endpoint with a real id is exercised too.
            let start = try await fixture.send(
                "POST",
                Endpoint.authentication,
                body: try WireCoding.encode(AuthenticationStartRequest(profileID: profile.id, authenticator: nil)),
                headers: [
                    "DPoP": try await client.dpopProof(
                        method: "POST",
                        url: fixture.transport.baseURL + Endpoint.authentication
                    )
                ]
            )
            #expect(start.status == 200)
            let flow = try WireCoding.decode(FlowResponse.self, from: start.body)

            let before = try await fixture.snapshot()
            let oversized =
                Data(#"{"pad": ""#.utf8) + Data(repeating: UInt8(ascii: "a"), count: 4100) + Data(#""}"#.utf8)
            let wrongTypes: [String: String] = [
                Endpoint.clients: #"{"app_id": 7, "public_key": "key"}"#,
                Endpoint.registration: #"{"client_id": ["x"], "profile_key": {"kty": 1}}"#,
                Endpoint.authentication: #"{"profile_id": 12, "authenticator": false}"#,
                Endpoint.changePin: #"{"pin": 123456}"#,
                Endpoint.flow(flow.flowID): #"{"message": 5}"#,
                Endpoint.token: #"{"grant_type": "refresh_token", "refresh_token": 9}"#,
                Endpoint.revoke: #"{"token": null}"#,
                Endpoint.deregister: #"{"profile_id": true}"#,
            ]
            for (path, wrong) in wrongTypes.sorted(by: { $0.key < $1.key }) {
                let proof = try await client.dpopProof(method: "POST", url: fixture.transport.baseURL + path)
                let bodies: [(String, Data, [String: String])] = [
                    ("malformed JSON", Data(#"{"profile_id": "#.utf8), ["DPoP": proof]),
                    ("missing fields", Data("{}".utf8), ["DPoP": proof]),
                    ("wrong types", Data(wrong.utf8), ["DPoP": proof]),
                    ("not an object", Data("[1, 2]".utf8), ["DPoP": proof]),
                    ("oversized", oversized, ["DPoP": proof]),
                    (
                        "not JSON", Data("profile_id=1".utf8),
                        ["DPoP": proof, "Content-Type": "application/x-www-form-urlencoded"]
                    ),
                ]
                for (name, body, headers) in bodies {
                    let response = try await fixture.send("POST", path, body: body, headers: headers)
                    #expect((400..<500).contains(response.status), "\(path) \(name): HTTP \(response.status)")
                    let error = try? WireCoding.decode(ErrorBody.self, from: response.body)
                    #expect(error != nil, "\(path) \(name): no OAuth error body")
                    #expect(error?.errorDescription.isEmpty == false)
                }
            }
            #expect(try await fixture.snapshot() == before)
        }
    }

    @Test("messages name the problem", arguments: Mode.allCases)
    func clearMessages(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            func refusal(
                _ method: String,
                _ path: String,
                _ body: String,
                contentType: String = "application/json"
            ) async throws
                -> (Int, ErrorBody)
            {
                let response = try await fixture.send(
                    method,
                    path,
                    body: Data(body.utf8),
                    headers: ["Content-Type": contentType]
                )
                return (response.status, try WireCoding.decode(ErrorBody.self, from: response.body))
            }
            var (status, error) = try await refusal("POST", Endpoint.clients, #"{"app_id": 7}"#)
            #expect(status == 400)
            #expect(error.error == "invalid_request")
            #expect(error.errorDescription == "Invalid field app_id: expected a string, found 7.")
            (status, error) = try await refusal("POST", Endpoint.clients, #"{"app_id": "test-app"}"#)
            #expect(error.errorDescription == "Invalid field public_key: required key is missing.")
            (status, error) = try await refusal(
                "POST",
                Endpoint.token,
                "{\"grant_type\": \"refresh_token\",\n \"refresh_token\": tru}"
            )
            #expect(
                error.errorDescription == "The body is not valid JSON: line 2, column 19: expected a value, found 't'."
            )
            (status, error) = try await refusal("POST", Endpoint.deregister, #"{"profile_id": "X", "extra": 1}"#)
            #expect(error.errorDescription == "Invalid field extra: unknown key; expected one of: profile_id.")
            (status, error) = try await refusal("POST", Endpoint.revoke, "{}", contentType: "text/plain")
            #expect(status == 415)
            (status, error) = try await refusal("GET", Endpoint.token, "")
            #expect(status == 405)
            (status, error) = try await refusal("GET", "/v1/nothing", "")
            #expect(status == 404)
            (status, error) = try await refusal("POST", Endpoint.deregister, #"{"profile_id": "ABC123"}"#)
            #expect(status == 400)
            #expect(error.error == "invalid_dpop_proof")
        }
    }
}
