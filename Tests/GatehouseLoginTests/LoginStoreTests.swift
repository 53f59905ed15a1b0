import Foundation
import GatehouseLogin
import GatehouseOpenID
import GatehouseProtocol
import Testing

/// A store on the server's storage (SQLite, or PostgreSQL with `GATEHOUSE_TEST_DATABASE=postgres`).
private func withStore(_ body: (LoginStore) async throws -> Void) async throws {
    try await withLoginStorage { storage in try await body(try LoginStore(storage: storage)) }
}

/// Cheap enough for tests; the standard cost is 2^15.
private let testHasher = PasswordHasher(logN: 10, blockSize: 8, parallelism: 1)

@Suite("Hosted login: passwords, PKCE, codes, lockout")
struct LoginStoreTests {
    @Test("scrypt hashes verify the right password only, name their cost, and differ per salt")
    func passwords() throws {
        let hash = try testHasher.hash("correct horse battery staple")
        #expect(hash.hasPrefix("$scrypt$ln=10,r=8,p=1$"))
        #expect(PasswordHasher.verify("correct horse battery staple", against: hash))
        #expect(!PasswordHasher.verify("correct horse battery stapl", against: hash))
        #expect(try testHasher.hash("correct horse battery staple") != hash)
        #expect(!hash.contains("correct"))
        // A crafted hash may not make the server spend more than its strongest setting.
        #expect(!PasswordHasher.verify("x", against: "$scrypt$ln=30,r=8,p=1$AAAA$AAAA"))
        #expect(!PasswordHasher.verify("x", against: "not a hash"))
    }

    @Test("the decoy for unknown users has a real hash's form and cost, and matches no password")
    func decoy() throws {
        let decoy = testHasher.decoy()
        let parts = decoy.split(separator: "$", omittingEmptySubsequences: false)
        #expect(decoy.hasPrefix("$scrypt$ln=10,r=8,p=1$") && parts.count == 5)
        #expect(Data(base64URLEncoded: parts[3])?.count == 16 && Data(base64URLEncoded: parts[4])?.count == 32)
        #expect(testHasher.decoy() != decoy)
        #expect(!PasswordHasher.verify("", against: decoy) && !PasswordHasher.verify("password", against: decoy))
    }

    @Test("PKCE S256: the verifier proves its challenge; other or malformed verifiers do not")
    func pkce() {
        let verifier = PKCE.makeVerifier()
        #expect(PKCE.isWellFormedVerifier(verifier))
        let challenge = PKCE.challenge(for: verifier)
        #expect(PKCE.isWellFormedChallenge(challenge))
        #expect(PKCE.verify(verifier, against: challenge))
        #expect(!PKCE.verify(PKCE.makeVerifier(), against: challenge))
        #expect(!PKCE.verify("short", against: PKCE.challenge(for: "short")))
        // RFC 7636 appendix B.
        #expect(
            PKCE.challenge(for: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
                == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        )
        // `plain` would send the verifier itself as the challenge: it is no S256 challenge.
        #expect(!PKCE.isWellFormedChallenge("dBjftJeZ4CVP-mJ92K8kJkPrs8Y1r8JsUZLZE-xrH5Yxx"))
    }

    @Test("a code is redeemed once, by its client, redirect and verifier, before it expires; a replay names its user")
    func codes() async throws {
        try await withStore { store in
            let verifier = PKCE.makeVerifier()
            let request = LoginStore.AuthorizationRequest(
                clientID: "gatehouse",
                redirectURI: "http://127.0.0.1:53123/callback",
                state: "s1",
                codeChallenge: PKCE.challenge(for: verifier),
                scope: "openid"
            )
            func code() async throws -> String {
                let (id, _) = try await store.beginAuthorization(request, expiresAt: 2000, now: 1000)
                let issued = try await store.issueCode(authorization: id, subject: "ann", expiresAt: 1060)
                return try #require(issued)
            }
            let good = try await code()
            let redeemed = try await store.redeem(
                good,
                clientID: "gatehouse",
                redirectURI: request.redirectURI,
                verifier: verifier,
                now: 1001
            )
            #expect(redeemed == (subject: "ann", scope: "openid"))
            await #expect(throws: LoginStore.RedemptionError.replayed(subject: "ann")) {
                try await store.redeem(
                    good,
                    clientID: "gatehouse",
                    redirectURI: request.redirectURI,
                    verifier: verifier,
                    now: 1002
                )
            }
            let cases: [(LoginStore.RedemptionError, String, String, String, Double)] = [
                (.expired, "gatehouse", request.redirectURI, verifier, 1061),
                (.wrongClient, "other", request.redirectURI, verifier, 1001),
                (.wrongRedirect, "gatehouse", "http://127.0.0.1:1/callback", verifier, 1001),
                (.wrongVerifier, "gatehouse", request.redirectURI, PKCE.makeVerifier(), 1001),
            ]
            for (expected, client, redirect, proof, now) in cases {
                let fresh = try await code()
                await #expect(throws: expected) {
                    try await store.redeem(fresh, clientID: client, redirectURI: redirect, verifier: proof, now: now)
                }
                // One try: a refused redemption spends the code too.
                await #expect(throws: LoginStore.RedemptionError.replayed(subject: "ann")) {
                    try await store.redeem(
                        fresh,
                        clientID: "gatehouse",
                        redirectURI: request.redirectURI,
                        verifier: verifier,
                        now: 1001
                    )
                }
            }
            await #expect(throws: LoginStore.RedemptionError.unknown) {
                try await store.redeem(
                    "no-such-code",
                    clientID: "gatehouse",
                    redirectURI: request.redirectURI,
                    verifier: verifier,
                    now: 1001
                )
            }
        }
    }

    @Test("the login page's CSRF token must come back; an expired page is gone")
    func csrf() async throws {
        try await withStore { store in
            let request = LoginStore.AuthorizationRequest(
                clientID: "gatehouse",
                redirectURI: "https://app.example/cb",
                state: "s",
                codeChallenge: PKCE.challenge(for: PKCE.makeVerifier()),
                scope: ""
            )
            let (id, csrf) = try await store.beginAuthorization(request, expiresAt: 1600, now: 1000)
            #expect(try await store.authorization(id, csrf: csrf, now: 1001)?.0 == request)
            #expect(try await store.authorization(id, csrf: "wrong", now: 1001) == nil)
            #expect(try await store.authorization(id, csrf: "", now: 1001) == nil)
            #expect(try await store.authorization(id, csrf: csrf, now: 1601) == nil)
        }
    }

    @Test("wrong passwords lock the account at exactly the limit, also under 40 concurrent attempts")
    func lockout() async throws {
        try await withStore { store in
            try await store.addUser(" Ann@Example.com ", passwordHash: try testHasher.hash("right"), now: 0)
            await #expect(throws: LoginStore.UserError.exists) {
                try await store.addUser("ann@example.com", passwordHash: "x", now: 0)
            }
            #expect(try await store.usernames() == ["ann@example.com"])
            // 40 attempts at once: exactly 5 get to check a password, the rest find the account locked.
            let outcomes = try await withThrowingTaskGroup(of: LoginStore.LoginAttempt.self) { group in
                for _ in 0..<40 {
                    group.addTask {
                        try await store.beginLogin("ann@example.com", maxFailures: 5, lockout: 900, now: 100)
                    }
                }
                var all: [LoginStore.LoginAttempt] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            let checks = outcomes.filter { if case .check = $0 { true } else { false } }
            #expect(checks.count == 5)
            #expect(outcomes.filter { $0 == .locked(until: 1000) }.count == 35)
            // After the lock runs out, the right password works and the count starts again.
            guard
                case .check(let hash) = try await store.beginLogin(
                    "ann@example.com",
                    maxFailures: 5,
                    lockout: 900,
                    now: 1001
                )
            else {
                Issue.record("still locked")
                return
            }
            #expect(PasswordHasher.verify("right", against: hash))
            try await store.loginSucceeded("ann@example.com")
            #expect(try await store.beginLogin("nobody", maxFailures: 5, lockout: 900, now: 1002) == .unknownUser)
        }
    }
}
