import BrowserIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehouseOpenID
import GatehousePlugins
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import GatehouseYAML
import Logging
import Testing

// What the passwordless tests share: a browser tab that keeps every cookie the login sets (the
// passkeys page sets two at once) and may come from an address (so rate limits apply), a login
// with passkeys on http://localhost:8080, and a token server with the login mounted whose enrolled
// phones answer through the SDK.

/// The `acr` values the login produces.
enum ACR {
    static let password = "urn:gatehouse:acr:password"
    static let phone = "urn:gatehouse:acr:phone"
    static let passkey = "urn:gatehouse:acr:passkey"
    static let app = "urn:gatehouse:acr:app"
}

/// One browser tab: its cookie jar, the last page and that page's hidden fields.
struct Tab {
    let login: LoginServer
    /// The client address requests come from; nil: in-process, never rate-limited.
    var address: String?
    var jar: [String: String] = [:]
    var html = ""
    var hidden: [String: String] = [:]

    init(_ login: LoginServer, address: String? = nil) {
        self.login = login
        self.address = address
    }

    /// The `Cookie` header the tab sends.
    var cookieHeader: String? {
        jar.isEmpty ? nil : jar.keys.sorted().map { "\($0)=\(jar[$0] ?? "")" }.joined(separator: "; ")
    }

    /// The page's waiting authorization and its CSRF token, as every sign-in form sends them.
    var pageForm: [(String, String)] {
        [("authorization", hidden["authorization"] ?? ""), ("csrf", hidden["csrf"] ?? "")]
    }

    /// Opens the authorization endpoint with `request`.
    mutating func open(_ request: AuthRequest) async -> WireResponse {
        await get(LoginServer.authorizePath + "?" + request.query)
    }

    /// Posts `fields` as a form, and shows the answer; `withCookies: false` sends it as another
    /// site's page would.
    mutating func post(_ path: String, _ fields: [(String, String)], withCookies: Bool = true) async -> WireResponse {
        show(await fetch(path, fields, withCookies: withCookies))
    }

    /// Posts `fields` as the page's script does: the page stays as it was (cookies are kept).
    mutating func fetch(_ path: String, _ fields: [(String, String)], withCookies: Bool = true) async -> WireResponse {
        await exchange(formRequest(path, fields), withCookies: withCookies)
    }

    /// A GET as the page's script makes it: the page stays as it was.
    mutating func fetch(_ path: String, withCookies: Bool = true) async -> WireResponse {
        await exchange(WireRequest(method: "GET", path: path), withCookies: withCookies)
    }

    /// The POST of `fields` to `path` this tab would send (its address and cookies).
    func formRequest(_ path: String, _ fields: [(String, String)]) -> WireRequest {
        var request = WireRequest(
            method: "POST",
            path: path,
            headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Data(FormFields.encode(fields).utf8),
            clientAddress: address
        )
        request.setHeader("Cookie", cookieHeader)
        return request
    }

    /// Opens `path` and shows it.
    mutating func get(_ path: String) async -> WireResponse {
        show(await exchange(WireRequest(method: "GET", path: path)))
    }

    /// Makes `response` the page the tab shows.
    private mutating func show(_ response: WireResponse) -> WireResponse {
        html = String(decoding: response.body, as: UTF8.self)
        hidden = [:]
        for match in html.matches(of: #/<input type="hidden" name="([a-z_]+)" value="([^"]*)"/#) {
            hidden[String(match.output.1)] = String(match.output.2)
        }
        return response
    }

    /// Sends `request` with the tab's address and cookies; keeps the cookies it sets.
    private mutating func exchange(_ request: WireRequest, withCookies: Bool = true) async -> WireResponse {
        var request = request
        request.clientAddress = address
        request.setHeader("Cookie", withCookies ? cookieHeader : nil)
        let response = await login.handle(request)
        // Several cookies arrive on separate lines of one header.
        for line in (response.headers["Set-Cookie"] ?? "").split(separator: "\n") {
            let attributes = line.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let pair = attributes.first, let equals = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<equals])
            let value = String(pair[pair.index(after: equals)...])
            jar[name] = attributes.contains("Max-Age=0") || value.isEmpty ? nil : value
        }
        return response
    }

    /// The text of the element with `id`, if the page has one.
    func text(of id: String) -> String? {
        guard let regex = try? Regex(#"id="\#(id)"[^>]*>([^<]*)<"#),
            let match = html.firstMatch(of: regex), let text = match.output[1].substring
        else { return nil }
        return String(text)
    }

    /// Whether the page has an element with `id`.
    func has(_ id: String) -> Bool { html.contains(#"id="\#(id)""#) }

    /// The page's alert, if any.
    var alert: String? {
        html.firstMatch(of: #/role="alert">([^<]*)</#).map { String($0.output.1) }
    }
}

/// The JSON object of a response.
func jsonObject(_ response: WireResponse) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:]
}

/// The OpenID tests' fixture over `login` (for exchanging codes and checking ID tokens).
func openIDFixture(
    _ login: LoginServer,
    _ storage: ServerStorage,
    _ environment: PluginEnvironment
) throws
    -> OpenIDFixture
{
    OpenIDFixture(
        login: login,
        storage: storage,
        clock: try #require(environment.clock as? ManualClock),
        logs: passwordlessLogs,
        backchannelPort: 0
    )
}

/// What the passwordless tests' logins and servers log, kept rather than printed.
let passwordlessLogs = RecordingLogger(label: "passwordless-tests", level: .info)

/// An environment on a manual clock standing at the real time (the SDK's DPoP proofs carry it).
func manualEnvironment() -> PluginEnvironment {
    PluginEnvironment(logger: passwordlessLogs.logger, clock: ManualClock(Date()))
}

/// Exchanges the code of a redirect for `request` and returns the verified ID token.
func idToken(_ op: OpenIDFixture, _ response: WireResponse, _ request: AuthRequest) async throws -> VerifiedToken {
    try #require(
        response.status == 303,
        "\(response.status) \(String(decoding: response.body, as: UTF8.self).prefix(600))"
    )
    let query = redirectQuery(response)
    #expect(query["state"] == request.state && query["iss"] == op.login.issuer)
    let code = try #require(query["code"], "\(query)")
    let tokens = try await op.exchange(code, request, auth: defaultAuth(request.clientID))
    let verified = try await op.verify(try #require(tokens.idToken))
    #expect(verified.claims.nonce == request.nonce)
    return verified
}

// MARK: - Passkeys

/// The login's users, clients and passkey settings for the passkey tests: `web` (every method)
/// on `publicURL`, passkeys with `attemptsPerMinute` per address.
func withPasskeyLogin(
    publicURL: String = "http://localhost:8080",
    attemptsPerMinute: Int = 30,
    _ body: (OpenIDFixture) async throws -> Void
) async throws {
    let configuration = try ConfigurationDecoder().decode(
        LoginConfiguration.self,
        from: .object([
            "clients": .list([
                .object([
                    "id": .string(OP.web), "name": .string("Web Shop"),
                    "redirectURIs": .list([.string(OP.webRedirect)]),
                    "secret": .string(OP.webSecret),
                    "scopes": .list([.string("openid"), .string("profile"), .string("email")]),
                ])
            ]),
            "passwordCost": .integer(14),
            "passkeys": .object([
                "relyingPartyName": .string("Gatehouse tests"), "attemptsPerMinute": .integer(attemptsPerMinute),
            ]),
        ])
    )
    let environment = manualEnvironment()
    try await withLoginStorage { storage in
        let login = try LoginServer(
            configuration: configuration,
            storage: storage,
            environment: environment,
            publicURL: URL(string: publicURL)
        )
        try await login.addUser(OP.ann, password: OP.password)
        try await login.addUser(OP.bob, password: OP.password)
        try await body(try openIDFixture(login, storage, environment))
    }
}

/// A user's tab on the passkeys page, signed in there with the password (or a passkey).
struct PasskeysPage {
    var tab: Tab
    /// The user handle the registration options named (base64url).
    var userHandle: String?

    /// Whether the page lets this session add and remove passkeys (else it asks for a passkey first).
    var mayManage: Bool {
        tab.has("passkey-register") && !tab.has("passkey-form")
    }

    /// Whether the page shows Remove buttons.
    var hasRemoveButtons: Bool { tab.html.contains(#"name="remove""#) }

    /// Opens the passkeys page and signs in on it as `username`.
    static func signIn(_ login: LoginServer, as username: String) async throws -> PasskeysPage {
        var tab = Tab(login)
        let page = await tab.get(LoginServer.passkeysPath)
        try #require(page.status == 200 && tab.has("password"), "\(tab.html.prefix(400))")
        let signedIn = await tab.post(
            LoginServer.passkeysPath,
            [("csrf", tab.hidden["csrf"] ?? ""), ("username", username), ("password", OP.password)]
        )
        try #require(signedIn.status == 200 && tab.html.contains("Your passkeys"), "\(tab.alert ?? tab.html)")
        #expect(tab.jar["gh_sso"] != nil && tab.jar["gh_csrf_account"] != nil)
        return PasskeysPage(tab: tab)
    }

    /// Asks the options the page's passkey form asks (`data-options`); the JSON's `publicKey`.
    mutating func fetchOptions() async throws -> [String: Any] {
        let response = await tab.fetch(LoginServer.passkeyRegistrationOptionsPath, [("csrf", tab.hidden["csrf"] ?? "")])
        try #require(response.status == 200, "\(response.status) \(String(decoding: response.body, as: UTF8.self))")
        return try #require(jsonObject(response)["publicKey"] as? [String: Any])
    }

    /// Asks for sign-in options, as the page does for a session that may not change passkeys: a
    /// request for a passkey (no user, user verification required); their challenge.
    mutating func signInChallenge() async throws -> [UInt8] {
        let options = try await fetchOptions()
        try #require(options["user"] == nil && options["excludeCredentials"] == nil, "\(options)")
        #expect(options["userVerification"] as? String == "required")
        let text = try #require(options["challenge"] as? String)
        return Array(try #require(Data(base64URLEncoded: text)))
    }

    /// Posts an assertion as the page's passkey form does (no name); the page as it answers.
    mutating func sendAssertion(_ assertion: [UInt8]) async -> WireResponse {
        await tab.post(
            LoginServer.passkeysPath,
            [("csrf", tab.hidden["csrf"] ?? ""), ("credential", String(decoding: assertion, as: UTF8.self))]
        )
    }

    /// Confirms with `authenticator`'s passkey on this page (sign-in options, an assertion with
    /// ``userHandle``), or signs in with it on the page without a session; expects the list with
    /// management.
    mutating func confirm(
        _ authenticator: SoftwareAuthenticator,
        _ change: (inout Ceremony) -> Void = { _ in }
    )
        async throws
    {
        var ceremony = Ceremony(challenge: try await signInChallenge())
        change(&ceremony)
        var assertion = try authenticator.assert(ceremony)
        assertion.userHandle = userHandle.flatMap { Data(base64URLEncoded: $0) }.map(Array.init)
        let response = await sendAssertion(assertion.json)
        try #require(response.status == 200 && mayManage, "\(response.status) \(tab.alert ?? tab.html)")
    }

    /// Asks for registration options: the challenge, and the user handle they name.
    mutating func options() async throws -> (challenge: [UInt8], options: [String: Any]) {
        let options = try await fetchOptions()
        let user = try #require(options["user"] as? [String: Any], "\(options)")
        userHandle = user["id"] as? String
        let text = try #require(options["challenge"] as? String)
        return (Array(try #require(Data(base64URLEncoded: text))), options)
    }

    /// Posts a registration response named `name`; the page as it answers.
    mutating func add(_ registration: [UInt8], name: String = "Laptop") async -> WireResponse {
        await tab.post(
            LoginServer.passkeysPath,
            [
                ("csrf", tab.hidden["csrf"] ?? ""), ("name", name),
                ("credential", String(decoding: registration, as: UTF8.self)),
            ]
        )
    }

    /// Registers `authenticator`'s credential with `change` applied to the ceremony; expects it added.
    mutating func register(
        _ authenticator: SoftwareAuthenticator,
        name: String = "Laptop",
        _ change: (inout Ceremony) -> Void = { _ in }
    ) async throws {
        var ceremony = Ceremony(challenge: try await options().challenge)
        change(&ceremony)
        let response = await add(try authenticator.register(ceremony).json, name: name)
        try #require(response.status == 200 && tab.html.contains("was added"), "\(tab.html.prefix(800))")
    }

    /// Removes the passkey with credential id `id`; the page as it answers.
    mutating func remove(_ id: [UInt8]) async -> WireResponse {
        await tab.post(LoginServer.passkeysPath, [("csrf", tab.hidden["csrf"] ?? ""), ("remove", encode(id))])
    }
}

/// Signing in with a passkey on a login page: a fresh tab opened at `request`.
struct PasskeySignIn {
    var tab: Tab
    let request: AuthRequest
    /// The relying party the options must name.
    var rpID = Ceremony.rpID

    static func open(
        _ login: LoginServer,
        _ request: AuthRequest = .web(),
        address: String? = nil,
        rpID: String = Ceremony.rpID
    ) async throws
        -> PasskeySignIn
    {
        var tab = Tab(login, address: address)
        let page = await tab.open(request)
        try #require(page.status == 200 && tab.has("passkey"), "\(page.status) \(tab.html.prefix(600))")
        return PasskeySignIn(tab: tab, request: request, rpID: rpID)
    }

    /// Asks for the sign-in options; their challenge.
    mutating func challenge() async throws -> [UInt8] {
        let response = await tab.fetch(LoginServer.passkeySignInOptionsPath, tab.pageForm)
        try #require(response.status == 200, "\(response.status) \(tab.html.prefix(400))")
        let options = try #require(jsonObject(response)["publicKey"] as? [String: Any])
        #expect(options["rpId"] as? String == rpID && options["userVerification"] as? String == "required")
        let text = try #require(options["challenge"] as? String)
        return Array(try #require(Data(base64URLEncoded: text)))
    }

    /// Posts an assertion; the answer as it comes (the page's fields kept for another try).
    mutating func send(_ assertion: [UInt8]) async -> WireResponse {
        let form = tab.pageForm
        return await tab.post(
            LoginServer.passkeySignInPath,
            form + [("credential", String(decoding: assertion, as: UTF8.self))]
        )
    }

    /// A fresh challenge, and an assertion of `authenticator` for it (user handle `userHandle`,
    /// base64url), with `change` applied to the ceremony; the answer.
    mutating func signIn(
        _ authenticator: SoftwareAuthenticator,
        userHandle: String?,
        _ change: (inout Ceremony) -> Void = { _ in }
    ) async throws -> WireResponse {
        var ceremony = Ceremony(challenge: try await challenge())
        change(&ceremony)
        var assertion = try authenticator.assert(ceremony)
        assertion.userHandle = userHandle.flatMap { Data(base64URLEncoded: $0) }.map(Array.init)
        return await send(assertion.json)
    }
}

// MARK: - Phone sign-in

/// A token server with the hosted login mounted (phone sign-in on), its users ann and bob, on a
/// clock that moves only when told, and the devices of the test.
struct PhoneLogin {
    let op: OpenIDFixture
    let server: EmbeddedTokenServer
    let manifest: Manifest
    let directory: URL

    var login: LoginServer { op.login }
    var clock: ManualClock { op.clock }

    /// The client registered at `request`'s redirect URI that offers only the password.
    static let passwordOnly = "password-only"
    static let passwordOnlyRedirect = "https://password-only.example/cb"
    static let pin = "258147"

    /// A passkey ceremony for this login (`https://id.example`), which ``withPhoneLogin`` serves.
    static func passkeyCeremony(_ ceremony: inout Ceremony) {
        ceremony.origin = "https://id.example"
        ceremony.rpID = "id.example"
    }

    /// A device of `username`: registered through the login (idp.browser `web`), signed in with
    /// its PIN and enrolled for mobile authentication.
    func device(_ name: String, of username: String) async throws -> Device {
        let client = try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: directory.appendingPathComponent(name),
                transport: server,
                appID: "test-app",
                plugins: try PluginRegistry.builtIn.load(manifest, sides: .client),
                clock: clock
            )
        )
        let browser = HeadlessLoginBrowser(transport: server, username: username, password: OP.password)
        let registered = try await client.registerUser(
            identityProvider: "web",
            delegate: BrowserRegistration(browser: browser)
        )
        try await client.authenticateUser(registered.profile, delegate: ScriptedResponder([.pin(Self.pin)]))
        try await client.enrollForMobileAuth()
        return Device(client: client, profile: registered.profile)
    }

    /// Signs in with the password on a fresh tab at `request`; the tab, holding the session.
    func passwordSession(_ request: AuthRequest = .web(), as username: String = OP.ann) async throws -> Tab {
        var tab = Tab(login)
        _ = await tab.open(request)
        let answer = await tab.post(
            LoginServer.authorizePath,
            tab.pageForm + [("username", username), ("password", OP.password)]
        )
        let token = try await idToken(op, answer, request)
        #expect(token.claims.acr == ACR.password)
        return tab
    }
}

/// An enrolled phone, driven through the SDK.
struct Device {
    let client: UserClient
    let profile: UserProfile

    /// The one sign-in request waiting for this device.
    func waiting() async throws -> PendingMobileAuthRequest {
        let pending = try await client.pendingPushMobileAuthRequests()
        try #require(pending.count == 1, "\(pending.count) requests wait")
        return try #require(pending.first)
    }

    /// Answers the waiting push as `script` says; the SDK's result.
    @discardableResult
    func answer(_ script: [ScriptedAnswer]) async throws -> MobileAuthHandlingResult {
        await client.handlePushMobileAuthRequest(try await waiting(), delegate: ScriptedResponder(script))
    }

    /// Scans `otp` and answers as `script` says.
    @discardableResult
    func scan(_ otp: String, _ script: [ScriptedAnswer]) async -> MobileAuthHandlingResult {
        await client.handleOTPMobileAuthRequest(otp: otp, profile: profile, delegate: ScriptedResponder(script))
    }
}

extension Tab {
    /// Posts the login page's "Approve on my phone" with `username`.
    mutating func push(_ username: String) async -> WireResponse {
        await post(LoginServer.phonePath, pageForm + [("username", username)])
    }

    /// Posts the login page's "Scan a QR code with my phone".
    mutating func qrCode() async -> WireResponse { await post(LoginServer.qrPath, pageForm) }

    /// The number the waiting page shows.
    var number: Int? { text(of: "number").flatMap { Int($0) } }

    /// How the waiting page's approval stands, as its script asks; nil when refused.
    mutating func phoneStatus(withCookies: Bool = true) async -> String? {
        let id = FormFields.encode([("authorization", hidden["authorization"] ?? "")])
        let response = await fetch(LoginServer.phoneStatusPath + "?" + id, withCookies: withCookies)
        return response.status == 200 ? jsonObject(response)["status"] as? String : nil
    }

    /// Posts the waiting page's form, as its script does once approved.
    mutating func complete() async -> WireResponse { await post(LoginServer.phoneCompletePath, pageForm) }
}

extension MobileAuthHandlingResult {
    var isApproved: Bool {
        if case .approved = self { true } else { false }
    }
}

/// Registers through the hosted login with a headless browser, and chooses the PIN.
private struct BrowserRegistration: RegistrationDelegate {
    let browser: HeadlessLoginBrowser

    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        guard let redirect = try? await browser.signIn(at: challenge.url) else { return .cancel }
        return .redirect(redirect)
    }

    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .pin(PIN(PhoneLogin.pin)) }
}

/// A token server with mobile authentication (`login`: a tap with number matching, open
/// `pushTimeToLive` seconds; `login-pin`: the PIN; `login-qr`: an OTP to scan) and the hosted
/// login mounted, its phone sign-in pushing `pushType`; users ann and bob in the directory. With
/// `passkeys`, the login offers passkeys too (relying party `id.example`, see
/// ``PhoneLogin/passkeyCeremony(_:)``).
func withPhoneLogin(
    pushType: String = "login",
    pushTimeToLive: Int = 120,
    pushesPerUser: Int = 5,
    qrCodesPerMinute: Int = 10,
    passwordChecksPerMinute: Int = 30,
    passkeys: Bool = false,
    _ body: (PhoneLogin) async throws -> Void
) async throws {
    let manifest = try ManifestLoader.jsonAndYAML.parse(
        Data(
            ("""
            server:
              clients: [{id: test-app}]
              mobileAuth:
                apiClients: [{id: portal, secret: portal-secret-0123456789abcdef}]
                types:
                  - {name: login, method: confirmation, numberMatching: true, timeToLive: \(pushTimeToLive)}
                  - {name: login-pin, method: pin, timeToLive: 120}
                  - {name: login-qr, method: confirmation, delivery: otp, timeToLive: 120}
            authenticators: [{id: pin, type: pin}]
            identityProviders:
              - {id: web, type: idp.browser, name: Example login,
                 config: {authorizationURL: "\(EmbeddedTokenServer.defaultURL)/login/authorize", login: gatehouse-login}}
            login:
              passwordCost: 14
              clients:
                - {id: gatehouse, name: Example App, loopbackRedirectPaths: [/callback], signInMethods: [password]}
                - {id: \(OP.web), name: Web Shop, secret: \(OP.webSecret), redirectURIs: ["\(OP.webRedirect)"],
                   scopes: [openid, profile, email]}
                - {id: \(PhoneLogin.passwordOnly), name: Password Only, redirectURIs: ["\(PhoneLogin.passwordOnlyRedirect)"],
                   signInMethods: [password]}
              passwordChecksPerMinute: \(passwordChecksPerMinute)
              phone: {pushType: \(pushType), qrType: login-qr, pushesPerUser: \(pushesPerUser),
                      qrCodesPerMinute: \(qrCodesPerMinute)}
            """ + (passkeys ? "\n  passkeys: {relyingPartyName: Gatehouse tests}" : "")).utf8
        ),
        format: YAMLManifestFormat(),
        source: "phone.yaml",
        additionalSections: ["server", "login"]
    )
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-phone-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    try await withLoginStorage { storage in
        var environment = manualEnvironment()
        let login = try LoginServer(
            manifest: manifest,
            storage: storage,
            environment: environment,
            servedURL: URL(string: OP.publicURL)
        )
        #expect(login.directoryIdentityProviders == ["web"])
        try await login.addUser(OP.ann, password: OP.password)
        try await login.addUser(OP.bob, password: OP.password)
        environment.services[BrowserLoginServiceKey.self, named: "gatehouse-login"] = login
        let server = try await EmbeddedTokenServer(
            storage: storage,
            manifest: manifest,
            registry: try PluginRegistry.builtIn,
            environment: environment,
            extensions: [login]
        )
        try await body(
            PhoneLogin(
                op: try openIDFixture(login, storage, environment),
                server: server,
                manifest: manifest,
                directory: directory
            )
        )
    }
}
