import BrowserIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehouseOpenID
import GatehousePlugins
import GatehousePostgresTestSupport
import GatehouseProtocol
import GatehouseYAML
import Logging
import ServiceLifecycle
import Testing

@testable import GatehouseServer

/// Three token servers with the hosted login mounted, each on a storage of its own (its own
/// connections) over one PostgreSQL schema, served over HTTP behind a ``Balancer``; `body` gets
/// the balancer and each instance's login. The user ann@example.com exists.
private func withLoginCluster(
    instances count: Int = 3,
    maxFailedLogins: Int = 5,
    passwordChecksPerMinute: Int = 10000,
    _ body: (Balancer, [LoginServer]) async throws -> Void
) async throws {
    let cluster = try await PostgresTestCluster.shared()
    let schema = try await cluster.makeSchema("logincluster")
    let manifest = try ManifestLoader.jsonAndYAML.parse(
        Data(
            """
            server: {clients: [{id: test-app}]}
            authenticators: [{id: pin, type: pin}]
            identityProviders: [{id: partner, type: idp.customAPI, config: {url: "https://partner.example/r"}}]
            login:
              passwordCost: 14
              maxFailedLogins: \(maxFailedLogins)
              passwordChecksPerMinute: \(passwordChecksPerMinute)
              pagesPerMinute: 10000
              clients: [{id: gatehouse, name: Example App, loopbackRedirectPaths: [/callback]}]
            """.utf8
        ),
        format: YAMLManifestFormat(),
        source: "login-cluster.yaml",
        additionalSections: ["server", "login"]
    )
    let logger = Logger(label: "login-cluster")
    var storages: [ServerStorage] = []
    var logins: [LoginServer] = []
    var servers: [TokenServer] = []
    func shutDown() async {
        for server in servers { await server.shutdown() }
        for storage in storages { await storage.shutdown() }
        try? await cluster.dropSchema(schema)
    }
    do {
        for _ in 0..<count {
            let storage = try await ServerStorage.open(
                try ServerDatabase(cluster.url(schema: schema)),
                migrations: [LoginStore.migrations],
                logger: logger
            )
            storages.append(storage)
            let environment = PluginEnvironment(logger: logger)
            let login = try LoginServer(manifest: manifest, storage: storage, environment: environment)
            logins.append(login)
            servers.append(
                try await TokenServer(
                    manifest: manifest,
                    registry: try PluginRegistry.builtIn,
                    storage: storage,
                    environment: environment,
                    extensions: [login]
                )
            )
        }
        try await logins[0].addUser("ann@example.com", password: "correct horse")
        let servedLogins = logins
        try await servingBehindBalancer(servers, publicURL: "http://login.cluster.test", logger: logger) { balancer in
            try await body(balancer, servedLogins)
        }
    } catch {
        await shutDown()
        throw error
    }
    await shutDown()
}

/// A sign-in page opened through `transport`: its authorization id and CSRF token (from the
/// cookie it sets), and the PKCE verifier of its challenge.
private struct SignInPage {
    let id: String
    let csrf: String
    let verifier: String
    static let redirectURI = "http://127.0.0.1:53180/callback"

    init(_ transport: any TokenServerTransport) async throws {
        verifier = PKCE.makeVerifier()
        let query = [
            "response_type=code", "client_id=gatehouse", "redirect_uri=\(Self.redirectURI)",
            "code_challenge=\(PKCE.challenge(for: verifier))", "code_challenge_method=S256", "state=s1",
        ]
        let page = try await transport.send(
            WireRequest(method: "GET", path: LoginServer.authorizePath + "?" + query.joined(separator: "&"))
        )
        #expect(page.status == 200)
        // gh_csrf_<id>=<csrf>; Path=/login/; …
        let cookie = try #require(page.header("Set-Cookie")?.split(separator: ";").first)
        let parts = cookie.split(separator: "=", maxSplits: 1)
        id = String(try #require(parts.first).dropFirst("gh_csrf_".count))
        csrf = String(try #require(parts.last))
    }

    /// The sign-in form posted with `password`.
    func signIn(password: String) -> WireRequest {
        WireRequest(
            method: "POST",
            path: LoginServer.authorizePath,
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Cookie": "gh_csrf_\(id)=\(csrf)"],
            body: Data(
                FormFields.encode([
                    ("authorization", id), ("csrf", csrf), ("username", "ann@example.com"), ("password", password),
                ]).utf8
            )
        )
    }
}

/// Sends every request at once through `balancer` (each instance in turn); the statuses.
private func allAtOnce(_ requests: [WireRequest], _ balancer: Balancer) async -> [Int] {
    await withTaskGroup(of: Int.self) { group in
        for request in requests { group.addTask { (try? await balancer.send(request).status) ?? -1 } }
        return await group.reduce(into: [Int]()) { $0.append($1) }
    }
}

@Suite(
    "The hosted login on several instances sharing one PostgreSQL database",
    .serialized,
    .disabled(if: TestDatabase.current == .postgres, "they run on PostgreSQL in every run; once is enough")
)
struct LoginClusterTests {
    @Test("30 wrong passwords sent at once through 3 instances: exactly the limit is checked, the rest are locked")
    func lockoutIsExact() async throws {
        let limit = 5
        try await withLoginCluster(maxFailedLogins: limit) { balancer, _ in
            let page = try await SignInPage(balancer)
            let statuses = await allAtOnce(
                Array(repeating: page.signIn(password: "wrong password"), count: 30),
                balancer
            )
            let counts = Dictionary(grouping: statuses) { $0 }.mapValues(\.count)
            // 401: checked and wrong; 403: refused by the lock without a check.
            #expect(counts[401] == limit, "\(counts)")
            #expect(counts[403] == 30 - limit, "\(counts)")
            for served in balancer.served { #expect(served >= 10, "\(balancer.served)") }
            // The right password is refused too while the lock lasts.
            #expect(try await balancer.send(page.signIn(password: "correct horse")).status == 403)
        }
    }

    @Test(
        "24 password checks at once from one address through 3 instances, 6 a minute allowed: exactly 6 are checked, as at one"
    )
    func passwordChecksLimitedOnce() async throws {
        try await withLoginCluster(maxFailedLogins: 20, passwordChecksPerMinute: 6) { balancer, _ in
            let page = try await SignInPage(balancer)
            let statuses = await allAtOnce(
                Array(repeating: page.signIn(password: "wrong password"), count: 24),
                balancer
            )
            let counts = Dictionary(grouping: statuses) { $0 }.mapValues(\.count)
            // 401: checked and wrong; 429: refused before any hash. Each instance's own limit
            // would have let 6 through at each of the three.
            #expect(counts[401] == 6, "\(counts)")
            #expect(counts[429] == 18, "\(counts)")
            for served in balancer.served { #expect(served >= 8, "\(balancer.served)") }
        }
    }

    @Test("the right password sent at once through 3 instances for one page: one code is issued")
    func oneCodePerSignIn() async throws {
        try await withLoginCluster { balancer, _ in
            let page = try await SignInPage(balancer)
            let answers = try await withThrowingTaskGroup(of: WireResponse.self) { group in
                for instance in balancer.instances {
                    group.addTask { try await instance.send(page.signIn(password: "correct horse")) }
                }
                return try await group.reduce(into: [WireResponse]()) { $0.append($1) }
            }
            let redirects = answers.filter { $0.status == 303 }
            #expect(redirects.count == 1, "\(answers.map(\.status))")
            #expect(redirects.first?.header("Location")?.contains("code=") == true)
            #expect(answers.filter { $0.status == 400 }.count == 2, "\(answers.map(\.status))")
        }
    }

    @Test("a database that is gone answers 503 (try again), not 500")
    func unavailableIs503() async throws {
        let cluster = try await PostgresTestCluster.shared()
        let schema = try await cluster.makeSchema("loginbusy")
        defer { try? cluster.dropSchemaBlocking(schema) }
        let storage = try await ServerStorage.open(
            try ServerDatabase(cluster.url(schema: schema, pool: 2)),
            migrations: [LoginStore.migrations],
            logger: Logger(label: "login-busy")
        )
        let configuration = try ConfigurationDecoder().decode(
            LoginConfiguration.self,
            from: .object([
                "clients": .list([
                    .object([
                        "id": .string("gatehouse"), "name": .string("App"),
                        "loopbackRedirectPaths": .list([.string("/callback")]),
                    ])
                ]),
                "passwordCost": .integer(14),
            ])
        )
        let login = try LoginServer(configuration: configuration, storage: storage, environment: PluginEnvironment())
        let query =
            "response_type=code&client_id=gatehouse&redirect_uri=\(SignInPage.redirectURI)&state=s1"
            + "&code_challenge=\(PKCE.challenge(for: PKCE.makeVerifier()))&code_challenge_method=S256"
        let path = LoginServer.authorizePath + "?" + query
        #expect(await login.handle(WireRequest(method: "GET", path: path)).status == 200)
        // Its connections closed: every change now fails as the database being unavailable does.
        await storage.shutdown()
        let answer = await login.handle(WireRequest(method: "GET", path: path))
        #expect(answer.status == 503)
        #expect(String(decoding: answer.body, as: UTF8.self).contains("try again"))
    }

    @Test("a code redeemed at 3 instances at once is taken once; the others are told it is replayed")
    func codeTakenOnce() async throws {
        try await withLoginCluster { balancer, logins in
            let page = try await SignInPage(balancer)
            let signedIn = try await balancer.send(page.signIn(password: "correct horse"))
            #expect(signedIn.status == 303)
            let location = try #require(signedIn.header("Location").flatMap { URLComponents(string: $0) })
            let code = try #require(location.queryItems?.first { $0.name == "code" }?.value)
            let outcomes = await withTaskGroup(of: Result<String, any Error>.self) { group in
                for login in logins {
                    group.addTask {
                        do {
                            return .success(
                                try await login.redeem(
                                    code: code,
                                    clientID: "gatehouse",
                                    redirectURI: SignInPage.redirectURI,
                                    verifier: page.verifier
                                )
                            )
                        } catch {
                            return .failure(error)
                        }
                    }
                }
                return await group.reduce(into: [Result<String, any Error>]()) { $0.append($1) }
            }
            let taken = outcomes.compactMap { try? $0.get() }
            #expect(taken == ["ann@example.com"])
            let replays = outcomes.filter {
                if case .failure(let error) = $0 { return error is BrowserLoginReplay }
                return false
            }
            #expect(replays.count == logins.count - 1)
        }
    }
}
