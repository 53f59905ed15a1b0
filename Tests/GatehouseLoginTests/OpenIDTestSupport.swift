import Crypto
import Foundation
import GatehouseKernel
import GatehouseLogin
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import Testing

// What the OpenID provider tests share: a login with web clients of every kind on a clock that
// moves only when told, a browser with a cookie jar, the token endpoint and userinfo as a
// client calls them, ID tokens checked against the published key set, and a loopback receiver
// of back-channel logout tokens.

/// The clients, users and addresses of the OpenID tests.
enum OP {
    static let publicURL = "https://id.example"
    static let issuer = "https://id.example/login"

    /// Confidential, RS256, back-channel logout, no consent.
    static let web = "web"
    static let webSecret = "web-secret-0123456789"
    static let webRedirect = "https://web.example/cb"
    static let webAfter = "https://web.example/after"
    /// Confidential, ES256, consent, back-channel logout.
    static let portal = "portal"
    static let portalSecret = "portal-secret-0123456789"
    static let portalRedirect = "https://portal.example/cb"
    static let portalAfter = "https://portal.example/bye"
    /// Public (PKCE alone), no back-channel logout.
    static let spa = "spa"
    static let spaRedirect = "https://spa.example/cb"
    /// Public, pairwise subjects, on two hosts; the first with back-channel logout.
    static let pairOne = "pair-one"
    static let pairOneRedirect = "https://one.example/cb"
    static let pairTwo = "pair-two"
    static let pairTwoRedirect = "https://two.example/cb"

    static let ann = "ann@example.com"
    static let bob = "bob@example.com"
    static let password = "correct horse"

    /// Every registered redirect URI.
    static let redirectURIs = [webRedirect, portalRedirect, spaRedirect, pairOneRedirect, pairTwoRedirect]
    /// Every registered post-logout redirect URI.
    static let postLogoutURIs = [webAfter, portalAfter]
}

/// A login configured with the OpenID tests' clients, its storage, clock and logs.
struct OpenIDFixture: Sendable {
    let login: LoginServer
    let storage: ServerStorage
    let clock: ManualClock
    let logs: RecordingLogger
    /// Where the back-channel logout receiver listens (or would).
    let backchannelPort: Int

    var now: Int { Int(clock.now.timeIntervalSince1970) }

    func send(_ request: WireRequest) async -> WireResponse { await login.handle(request) }

    /// The key set as a relying party fetches it.
    func jwks() async throws -> JSONWebKeySet {
        let response = await send(WireRequest(method: "GET", path: LoginServer.jwksPath))
        #expect(response.status == 200)
        return try JSONWebKeySet(json: response.body)
    }

    /// Checks `token`'s signature against the published key set, as a relying party does;
    /// returns its header, claims and raw payload.
    func verify(_ token: String) async throws -> VerifiedToken {
        let jws = try JSONWebSignature(compact: token)
        try jws.verify(with: try await jwks())
        return VerifiedToken(
            header: jws.header,
            claims: try jws.claims(as: IDTokenClaims.self),
            payload: try #require(try JSONSerialization.jsonObject(with: jws.payload) as? [String: Any])
        )
    }

    /// A token request with `form`, authenticated as `auth` says.
    func token(_ form: [(String, String)], auth: ClientAuth, clientAddress: String? = nil) async -> JSONAnswer {
        var fields = form
        var headers = ["Content-Type": "application/x-www-form-urlencoded"]
        switch auth {
        case .basic(let id, let secret):
            let pair =
                FormFields.encode([("a", id)]).dropFirst(2) + ":" + FormFields.encode([("a", secret)]).dropFirst(2)
            headers["Authorization"] = "Basic " + Data(pair.utf8).base64EncodedString()
        case .post(let id, let secret):
            fields += [("client_id", id), ("client_secret", secret)]
        case .none(let id):
            fields.append(("client_id", id))
        case .raw:
            break
        }
        let response = await send(
            WireRequest(
                method: "POST",
                path: LoginServer.tokenPath,
                headers: headers,
                body: Data(FormFields.encode(fields).utf8),
                clientAddress: clientAddress
            )
        )
        return JSONAnswer(response)
    }

    /// Exchanges `code` of `request` for tokens; expects success.
    func exchange(_ code: String, _ request: AuthRequest, auth: ClientAuth) async throws -> Tokens {
        let answer = await token(
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI),
                ("code_verifier", request.verifier),
            ],
            auth: auth
        )
        #expect(answer.status == 200, "\(answer.text)")
        return try Tokens(answer)
    }

    /// Spends `refreshToken`; the answer as it comes.
    func refresh(_ refreshToken: String, auth: ClientAuth, scope: String? = nil) async -> JSONAnswer {
        var form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let scope { form.append(("scope", scope)) }
        return await token(form, auth: auth)
    }

    /// Userinfo with `accessToken` as a Bearer token.
    func userinfo(_ accessToken: String, method: String = "GET") async -> JSONAnswer {
        JSONAnswer(
            await send(
                WireRequest(
                    method: method,
                    path: LoginServer.userinfoPath,
                    headers: ["Authorization": "Bearer \(accessToken)"]
                )
            )
        )
    }

    /// Counts of what the store holds, to show that a request changed nothing.
    func fingerprint() async throws -> [String: Int] {
        try await storage.read { db in
            var counts: [String: Int] = [:]
            for (name, sql) in [
                ("sessions", "SELECT COUNT(*) FROM login_sessions"),
                ("live sessions", "SELECT COUNT(*) FROM login_sessions WHERE ended_at IS NULL"),
                ("session clients", "SELECT COUNT(*) FROM login_session_clients"),
                ("tokens", "SELECT COUNT(*) FROM login_tokens"),
                ("revoked tokens", "SELECT COUNT(*) FROM login_tokens WHERE revoked_at IS NOT NULL"),
                ("spent tokens", "SELECT COUNT(*) FROM login_tokens WHERE used_at IS NOT NULL"),
                ("codes", "SELECT COUNT(*) FROM login_codes"),
                ("spent codes", "SELECT COUNT(*) FROM login_codes WHERE used_at IS NOT NULL"),
                ("consents", "SELECT COUNT(*) FROM login_consents"),
                ("logout deliveries", "SELECT COUNT(*) FROM login_logout_deliveries"),
                ("signing keys", "SELECT COUNT(*) FROM login_signing_keys"),
            ] {
                counts[name] = try Int.fetchOne(db, sql: sql) ?? -1
            }
            return counts
        }
    }
}

/// How a client authenticates at the token endpoint.
enum ClientAuth {
    case basic(String, String)
    case post(String, String)
    case none(String)
    /// Whatever the form holds, no header.
    case raw
}

/// An ID or logout token whose signature verified.
struct VerifiedToken {
    var header: JSONWebSignature.Header
    var claims: IDTokenClaims
    var payload: [String: Any]
}

/// A JSON answer of the token or userinfo endpoint.
struct JSONAnswer {
    var status: Int
    var headers: [String: String]
    var json: [String: Any]
    var text: String

    init(_ response: WireResponse) {
        status = response.status
        headers = response.headers
        text = String(decoding: response.body, as: UTF8.self)
        json = (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:]
    }

    var error: String? { json["error"] as? String }
    subscript(_ name: String) -> String? { json[name] as? String }
}

/// A token response's tokens.
struct Tokens {
    var access: String
    var refresh: String?
    var idToken: String?
    var scope: String
    var expiresIn: Int

    init(_ answer: JSONAnswer) throws {
        access = try #require(answer["access_token"])
        refresh = answer["refresh_token"]
        idToken = answer["id_token"]
        scope = answer["scope"] ?? ""
        expiresIn = answer.json["expires_in"] as? Int ?? -1
        #expect(answer["token_type"] == "Bearer")
        #expect(answer.headers["Cache-Control"] == "no-store")
    }
}

/// An authorization request a relying party sends the browser with.
struct AuthRequest {
    var clientID: String
    var redirectURI: String
    var scope = "openid"
    var state = "st-" + Data.random(count: 6).base64URLEncodedString
    var nonce: String? = "n-" + Data.random(count: 6).base64URLEncodedString
    var verifier = PKCE.makeVerifier()
    var extra: [(String, String)] = []

    static func web(scope: String = "openid") -> AuthRequest {
        AuthRequest(clientID: OP.web, redirectURI: OP.webRedirect, scope: scope)
    }
    static func portal(scope: String = "openid") -> AuthRequest {
        AuthRequest(clientID: OP.portal, redirectURI: OP.portalRedirect, scope: scope)
    }
    static func spa(scope: String = "openid") -> AuthRequest {
        AuthRequest(clientID: OP.spa, redirectURI: OP.spaRedirect, scope: scope)
    }

    /// This request with `name=value` added.
    func with(_ name: String, _ value: String) -> AuthRequest {
        var copy = self
        copy.extra.append((name, value))
        return copy
    }

    var query: String {
        var fields = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI), ("scope", scope),
            ("state", state), ("code_challenge", PKCE.challenge(for: verifier)), ("code_challenge_method", "S256"),
        ]
        if let nonce { fields.append(("nonce", nonce)) }
        return FormFields.encode(fields + extra)
    }
}

/// A browser: keeps the cookies the login sets, and the hidden fields of the last page.
struct Agent {
    let fixture: OpenIDFixture
    var cookies: [String: String] = [:]
    var fields: [String: String] = [:]
    var lastHTML = ""

    init(_ fixture: OpenIDFixture) { self.fixture = fixture }

    var cookieHeader: String {
        cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
    }
    var session: String? { cookies["gh_sso"] }

    mutating func send(
        _ method: String,
        _ path: String,
        form: [(String, String)]? = nil,
        headers extra: [String: String] = [:]
    ) async -> WireResponse {
        var headers = extra
        if !cookies.isEmpty { headers["Cookie"] = cookieHeader }
        var body = Data()
        if let form {
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            body = Data(FormFields.encode(form).utf8)
        }
        let response = await fixture.send(WireRequest(method: method, path: path, headers: headers, body: body))
        lastHTML = String(decoding: response.body, as: UTF8.self)
        fields = [:]
        let pattern = #"name="([a-z_]+)" value="([^"]*)""#
        var searched = lastHTML[...]
        while let range = searched.range(of: pattern, options: .regularExpression) {
            let parts = searched[range].split(separator: "\"", omittingEmptySubsequences: false)
            if parts.count >= 4 { fields[String(parts[1])] = String(parts[3]) }
            searched = searched[range.upperBound...]
        }
        if let setCookie = response.headers["Set-Cookie"] {
            let pair = setCookie.prefix { $0 != ";" }.split(
                separator: "=",
                maxSplits: 1,
                omittingEmptySubsequences: false
            )
            if let name = pair.first {
                let value = pair.count == 2 ? String(pair[1]) : ""
                cookies[String(name)] = setCookie.contains("Max-Age=0") || value.isEmpty ? nil : value
            }
        }
        return response
    }

    mutating func authorize(_ request: AuthRequest) async -> WireResponse {
        await send("GET", LoginServer.authorizePath + "?" + request.query)
    }

    /// Posts the login page's form.
    mutating func signIn(_ username: String, password: String = OP.password) async -> WireResponse {
        let form = [
            ("authorization", fields["authorization"] ?? ""), ("csrf", fields["csrf"] ?? ""), ("username", username),
            ("password", password),
        ]
        return await send("POST", LoginServer.authorizePath, form: form)
    }

    /// Posts the consent page's choice.
    mutating func decide(_ decision: String) async -> WireResponse {
        let form = [
            ("authorization", fields["authorization"] ?? ""), ("csrf", fields["csrf"] ?? ""), ("decision", decision),
        ]
        return await send("POST", LoginServer.consentPath, form: form)
    }

    /// Runs `request` to its code: signs in as `username` when the login page shows, allows
    /// when the consent page shows. Expects the redirect with the code, the state and the issuer.
    mutating func code(_ request: AuthRequest, as username: String = OP.ann) async throws -> String {
        var response = await authorize(request)
        if response.status == 200, lastHTML.contains("<h1>Sign in</h1>") {
            response = await signIn(username)
        }
        if response.status == 200, lastHTML.contains("<h1>Allow ") {
            response = await decide("allow")
        }
        try #require(response.status == 303, "\(response.status) \(lastHTML.prefix(400))")
        let location = try #require(response.headers["Location"])
        #expect(location.hasPrefix(request.redirectURI + "?"))
        let query = redirectQuery(response)
        #expect(query["state"] == request.state)
        #expect(query["iss"] == OP.issuer)
        return try #require(query["code"], "\(location)")
    }

    /// Signs in at `request`'s client and exchanges the code.
    mutating func tokens(
        _ request: AuthRequest,
        as username: String = OP.ann,
        auth: ClientAuth? = nil
    ) async throws -> Tokens {
        let code = try await code(request, as: username)
        return try await fixture.exchange(code, request, auth: auth ?? defaultAuth(request.clientID))
    }
}

/// How each test client authenticates unless a test says otherwise.
func defaultAuth(_ clientID: String) -> ClientAuth {
    switch clientID {
    case OP.web: .basic(OP.web, OP.webSecret)
    case OP.portal: .post(OP.portal, OP.portalSecret)
    default: .none(clientID)
    }
}

/// The query of a response's Location, decoded.
func redirectQuery(_ response: WireResponse) -> [String: String] {
    guard let location = response.headers["Location"], let query = FormFields(queryOf: location) else { return [:] }
    return query.values
}

/// A login with the OpenID tests' clients and the users ann and bob, on a manual clock; the web and
/// portal clients' back-channel logout URIs are on `backchannelPort` (a free loopback port unless
/// given).
func withOpenID(
    backchannelPort: Int? = nil,
    rotationPeriod: Int? = nil,
    _ body: (OpenIDFixture) async throws -> Void
) async throws {
    let port = try #require(backchannelPort ?? LoopbackPort.free())
    var section: [String: ConfigValue] = [
        "clients": .list([
            .object([
                "id": .string(OP.web), "name": .string("Web Shop"), "redirectURIs": .list([.string(OP.webRedirect)]),
                "secret": .string(OP.webSecret),
                "scopes": .list([.string("openid"), .string("profile"), .string("email")]),
                "postLogoutRedirectURIs": .list([.string(OP.webAfter)]),
                "backchannelLogoutURI": .string("http://127.0.0.1:\(port)/backchannel/web"),
            ]),
            .object([
                "id": .string(OP.portal), "name": .string("Example Portal"),
                "redirectURIs": .list([.string(OP.portalRedirect)]), "secret": .string(OP.portalSecret),
                "consent": .bool(true), "scopes": .list([.string("openid"), .string("profile"), .string("email")]),
                "postLogoutRedirectURIs": .list([.string(OP.portalAfter)]),
                "backchannelLogoutURI": .string("http://127.0.0.1:\(port)/backchannel/portal"),
                "idTokenSigningAlgorithm": .string("ES256"),
            ]),
            .object([
                "id": .string(OP.spa), "name": .string("Single Page"), "redirectURIs": .list([.string(OP.spaRedirect)]),
                "scopes": .list([.string("openid"), .string("profile")]),
            ]),
            .object([
                "id": .string(OP.pairOne), "redirectURIs": .list([.string(OP.pairOneRedirect)]),
                "subjectType": .string("pairwise"),
                "backchannelLogoutURI": .string("http://127.0.0.1:\(port)/backchannel/pair-one"),
            ]),
            .object([
                "id": .string(OP.pairTwo), "redirectURIs": .list([.string(OP.pairTwoRedirect)]),
                "subjectType": .string("pairwise"),
            ]),
        ]),
        "passwordCost": .integer(14),
    ]
    if let rotationPeriod { section["signingKeys"] = .object(["rotationPeriod": .integer(rotationPeriod)]) }
    let configuration = try ConfigurationDecoder().decode(LoginConfiguration.self, from: .object(section))
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
    let logs = RecordingLogger(label: "openid-tests", level: .info)
    try await withLoginStorage { storage in
        let login = try LoginServer(
            configuration: configuration,
            storage: storage,
            environment: PluginEnvironment(logger: logs.logger, clock: clock),
            publicURL: URL(string: OP.publicURL)
        )
        try await login.addUser(OP.ann, password: OP.password)
        try await login.addUser(OP.bob, password: OP.password)
        try await body(
            OpenIDFixture(login: login, storage: storage, clock: clock, logs: logs, backchannelPort: port)
        )
    }
}

// MARK: - Back-channel logout receiver

/// A relying party's back-channel logout endpoint on loopback: records every POST.
final class LogoutReceiver: Sendable {
    struct Delivery: Sendable {
        var path: String
        var contentType: String?
        var form: [String: String]
    }

    private let deliveries = Mutex<[Delivery]>([])

    var received: [Delivery] { deliveries.withLock { $0 } }

    /// Waits (at most `seconds`) until `count` deliveries arrived; returns what arrived.
    func wait(for count: Int, seconds: Double = 10) async -> [Delivery] {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while received.count < count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        return received
    }

    /// Runs `body` with a receiver listening on 127.0.0.1:`port`, then stops it.
    static func with<Result: Sendable>(
        port: Int,
        _ body: (LogoutReceiver) async throws -> Result
    ) async throws -> Result {
        let receiver = LogoutReceiver()
        let router = Router()
        for client in [OP.web, OP.portal, OP.pairOne] {
            router.post("/backchannel/\(client)") { request, _ -> Response in
                let bytes = try await request.body.collect(upTo: 65_536)
                let form = FormFields(Substring(String(buffer: bytes)))?.values ?? [:]
                let delivery = Delivery(
                    path: request.uri.path,
                    contentType: request.headers[.contentType],
                    form: form
                )
                receiver.deliveries.withLock { $0.append(delivery) }
                return Response(status: .ok)
            }
        }
        let (started, continuation) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "logout-receiver")
        logger.logLevel = .critical
        let application = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) },
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = started.makeAsyncIterator()
            #expect(await iterator.next() == port)
            do {
                let result = try await body(receiver)
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return result
            } catch {
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                throw error
            }
        }
    }
}

/// base64url of the left half of the access token's SHA-256 (Core 1.0 §3.1.3.6).
func accessTokenHash(_ accessToken: String) -> String {
    Data(SHA256.hash(data: Data(accessToken.utf8))).prefix(16).base64URLEncodedString
}
