import Foundation
import GatehouseKernel
import GatehouseLogin
import GatehouseProtocol
import Testing

/// What an attacker with a client of their own tried against the provider, each kept as a test.
@Suite("OpenID provider: attacks that must fail", .serialized)
struct OpenIDAttackTests {
    @Test("the same refresh token sent twice at once: at most one answer, and the grant is revoked whole")
    func concurrentRefreshReuse() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            for _ in 0..<6 {
                let tokens = try await browser.tokens(.web())
                let refresh = try #require(tokens.refresh)
                async let first = op.refresh(refresh, auth: defaultAuth(OP.web))
                async let second = op.refresh(refresh, auth: defaultAuth(OP.web))
                let answers = await [first, second]
                let winners = answers.filter { $0.status == 200 }
                #expect(winners.count <= 1)
                #expect(answers.contains { $0.error == "invalid_grant" })
                // Whatever the winner got belongs to a grant that a reuse revoked.
                for winner in winners {
                    #expect(await op.userinfo(try #require(winner["access_token"])).status == 401)
                    let again = await op.refresh(try #require(winner["refresh_token"]), auth: defaultAuth(OP.web))
                    #expect(again.error == "invalid_grant")
                }
            }
        }
    }

    @Test("the same code exchanged twice at once: whatever either got is revoked")
    func concurrentCodeReplay() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            for _ in 0..<6 {
                let request = AuthRequest.web()
                let code = try await browser.code(request)
                let form = [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI),
                    ("code_verifier", request.verifier),
                ]
                async let first = op.token(form, auth: defaultAuth(OP.web))
                async let second = op.token(form, auth: defaultAuth(OP.web))
                let answers = await [first, second]
                #expect(answers.filter { $0.status == 200 }.count <= 1)
                for winner in answers where winner.status == 200 {
                    #expect(await op.userinfo(try #require(winner["access_token"])).status == 401)
                }
            }
        }
    }

    @Test("another client presenting a refresh token spends nothing: its owner refreshes afterwards")
    func refreshTokenOfAnotherClient() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let tokens = try await browser.tokens(.web())
            let refresh = try #require(tokens.refresh)
            let stolen = await op.refresh(refresh, auth: .none(OP.spa))
            #expect(stolen.error == "invalid_grant")
            let owner = await op.refresh(refresh, auth: defaultAuth(OP.web))
            #expect(owner.status == 200, "\(owner.text)")
            #expect(await op.userinfo(tokens.access).status == 200)
        }
    }

    @Test("a redirect URI equal to a registered one only as Unicode (a Kelvin sign for K) is not registered")
    func canonicallyEquivalentRedirect() throws {
        let json = #"""
            {"id": "rp", "redirectURIs": ["https://shop.example/Kb;x=1"], "loopbackRedirectPaths": ["/K"]}
            """#
        let client = try JSONDecoder().decode(LoginConfiguration.Client.self, from: Data(json.utf8))
        #expect(LoginConfiguration.allows("https://shop.example/Kb;x=1", for: client))
        #expect(!LoginConfiguration.allows("https://shop.example/\u{212A}b;x=1", for: client))
        #expect(!LoginConfiguration.allows("https://shop.example/Kb\u{037E}x=1", for: client))
        #expect(LoginConfiguration.allows("http://127.0.0.1:5000/K", for: client))
        #expect(!LoginConfiguration.allows("http://127.0.0.1:5000/\u{212A}", for: client))
    }
}
