import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseResourceServer
import GatehouseServer
import GatehouseTesting
import Testing

@Suite("A resource server in the token server's process")
struct ResourceServerTests {
    @Test("the validator asks the embedded server directly: kinds, scopes, binding, replay and its own nonces")
    func inProcess() async throws {
        try await withFixture(.embedded) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let server = try #require((fixture.transport.inner as? EmbeddedTokenServer)?.server)
            let validator = AccessValidator(introspector: server, publicURL: "https://api.example")
            func check(
                _ headers: [String: String],
                path: String = "/orders",
                _ requirement: AccessValidator<TokenServer>.Requirement = .init(scopes: ["read"])
            ) async -> Result<VerifiedAccess, AccessRefusal> {
                do throws(AccessRefusal) {
                    return .success(
                        try await validator.validate(
                            method: "GET",
                            path: path,
                            header: { headers[$0] },
                            requirement: requirement
                        )
                    )
                } catch {
                    return .failure(error)
                }
            }
            let headers = try await client.resourceHeaders(.user, method: "GET", url: "https://api.example/orders")
            let access = try await check(headers).get()
            #expect(access.subject == "jane@example.com" && access.kind == .user && access.scopes == ["read"])
            #expect(access.appID == "test-app")
            // The same proof again; an absent token; another scope; the implicit kind where users only.
            #expect(try #require(await check(headers).failureValue).error == "invalid_dpop_proof")
            #expect(try #require(await check([:]).failureValue).error == nil)
            let write = try await client.resourceHeaders(.user, method: "GET", url: "https://api.example/orders")
            let scopeRefusal = try #require(await check(write, .init(scopes: ["write"])).failureValue)
            #expect(scopeRefusal.status == 403 && scopeRefusal.error == "insufficient_scope")
            try await client.authenticateUserImplicitly(profile)
            let implicit = try await client.resourceHeaders(.implicit, method: "GET", url: "https://api.example/orders")
            #expect(try #require(await check(implicit).failureValue).error == "insufficient_user_authentication")
            let implicitAgain = try await client.resourceHeaders(
                .implicit,
                method: "GET",
                url: "https://api.example/orders"
            )
            #expect(try await check(implicitAgain, .init(scopes: ["read"], kinds: [.implicit])).get().kind == .implicit)
            // A Bearer token is not a DPoP-bound one.
            var bearer = try await client.resourceHeaders(.user, method: "GET", url: "https://api.example/orders")
            bearer["Authorization"] = bearer["Authorization"]?.replacingOccurrences(of: "DPoP ", with: "Bearer ")
            #expect(try #require(await check(bearer).failureValue).error == "invalid_token")

            // With its own nonces, a proof without one is refused with a fresh nonce to use.
            let strict = AccessValidator(
                introspector: server,
                publicURL: "https://api.example",
                nonceSecret: Data(repeating: 7, count: 32)
            )
            let plain = try await client.resourceHeaders(.user, method: "GET", url: "https://api.example/orders")
            do throws(AccessRefusal) {
                _ = try await strict.validate(method: "GET", path: "/orders", header: { plain[$0] })
                Issue.record("a proof without a nonce passed")
            } catch {
                #expect(error.error == "use_dpop_nonce" && error.status == 401)
                let nonce = try #require(error.nonce)
                let withNonce = try await client.resourceHeaders(
                    .user,
                    method: "GET",
                    url: "https://api.example/orders",
                    nonce: nonce
                )
                let accepted = try? await strict.validate(method: "GET", path: "/orders", header: { withNonce[$0] })
                #expect(accepted?.subject == "jane@example.com")
            }
        }
    }
}

extension Result {
    fileprivate var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
