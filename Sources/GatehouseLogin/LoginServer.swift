public import BrowserIdentityProvider
public import Foundation
public import GatehouseKernel
import GatehouseOpenID
public import GatehouseProtocol
public import GatehouseServer
import Logging
import Synchronization

/// The hosted login, mounted on the token server under `/login/`: the OAuth 2.0 authorization
/// endpoint (code flow, PKCE S256 required, exact redirect URIs, loopback redirects for native
/// apps), the login page against the user directory, the consent page, and redemption of the
/// codes it issues (``redeem(code:clientID:redirectURI:verifier:)``) for the `idp.browser` plugin.
public final class LoginServer: ServerExtension, BrowserLoginService, BrowserSessionStarter {
    /// The login's pages are under `/login/`.
    public var pathPrefix: String { "/login/" }
    /// The OAuth authorization endpoint: GET shows the sign-in page, POST signs in.
    public static let authorizePath = "/login/authorize"
    /// Where the consent page posts the user's choice.
    public static let consentPath = "/login/consent"
    /// The OpenID provider's discovery document (the issuer is the server's URL + `/login`).
    public static let discoveryPath = "/login/.well-known/openid-configuration"
    /// The provider's published signing keys.
    public static let jwksPath = "/login/jwks"
    /// Web clients exchange codes and refresh tokens here.
    public static let tokenPath = "/login/token"
    /// An access token reads the user's claims here.
    public static let userinfoPath = "/login/userinfo"
    /// RP-initiated logout.
    public static let logoutPath = "/login/logout"

    /// The manifest's `login` section.
    public let configuration: LoginConfiguration
    let store: LoginStore
    let hasher: PasswordHasher
    let clock: any WallClock
    let cpuWork: any CPUWorkExecutor
    let logger: Logger
    /// Checked when a username is unknown, so an unknown user costs as long as a wrong password.
    let decoyHash: String
    /// Whether the login's cookies carry `Secure`: the server is reached over https.
    let secureCookies: Bool
    /// Password checks per client address, in this instance's memory: floods stop here.
    let passwordLimiter: RateLimiter
    /// The same limit, counted once for every instance on the database.
    let sharedPasswordChecks: SharedRateLimiter
    /// Sign-in pages (stored authorization requests) per client address.
    let pageLimiter: RateLimiter
    /// Wrong client secrets at the token endpoint per client address.
    let clientSecretLimiter: RateLimiter
    /// The OpenID provider's issuer identifier: the server's public URL + `/login`.
    public let issuer: String
    /// The signing keys.
    let keyRing: SigningKeyRing
    /// Sends logout tokens to clients' back-channel logout URIs.
    let logoutDelivery: LogoutDeliverer
    /// The pairwise-subject secret, once read from the store.
    let pairwiseSecret = Mutex<Data?>(nil)
    /// The token server's mobile authentication (phone sign-in), once the server is built.
    let phone = Mutex<PhoneSignIn?>(nil)
    /// The token server's audit trail (passkeys added and removed), once the server is built.
    let admin = Mutex<AdminService?>(nil)
    /// Sign-in pushes per username: a burst, then one a minute.
    let pushLimiter: RateLimiter
    /// QR codes per client address.
    let qrLimiter: RateLimiter
    /// Passkey sign-in attempts (options asked, assertions sent) per client address.
    let passkeyLimiter: RateLimiter
    /// The login's own client: the passkeys page signs users in through the login page (with a
    /// phone or a passkey, as `acr_values` ask) and takes them back to itself. Its code is never
    /// redeemed, and no manifest client can have its id (ids cannot start with `@`).
    let accountClient: LoginConfiguration.Client
    /// The relying parties of the `federation` providers, by id.
    let relyingParties: [String: OpenIDRelyingParty]
    /// The identity providers whose subjects are this login's usernames (`idp.browser` entries
    /// that sign in here): an app user of one is the same user here.
    public let directoryIdentityProviders: Set<String>

    /// A login with `configuration`, its state in the token server's `storage` (opened with
    /// ``LoginStore/migrations``); `publicURL` is where browsers reach the server (its cookies are
    /// `Secure` when it is https).
    public init(
        configuration: LoginConfiguration,
        storage: ServerStorage,
        environment: PluginEnvironment,
        publicURL: URL? = nil,
        directoryIdentityProviders: Set<String> = []
    ) throws {
        self.configuration = configuration
        self.directoryIdentityProviders = directoryIdentityProviders
        secureCookies = publicURL?.scheme == "https"
        let base = publicURL?.absoluteString ?? "http://127.0.0.1:8080"
        issuer = (base.hasSuffix("/") ? String(base.dropLast()) : base) + "/login"
        store = try LoginStore(storage: storage)
        keyRing = SigningKeyRing(
            store: store,
            cpuWork: environment.cpuWork,
            rotationPeriod: Double(configuration.signingKeys.rotationPeriod),
            // What a retired key signed lives at most an ID token's lifetime; a logout token
            // two minutes; a minute more for clocks that differ.
            retention: Double(max(configuration.idTokenLifetime, LogoutDeliverer.tokenLifetime) + 60),
            logger: environment.logger
        )
        logoutDelivery = LogoutDeliverer(logger: environment.logger)
        relyingParties = try Self.makeRelyingParties(configuration, issuer: issuer, clock: environment.clock)
        var account = try ConfigurationDecoder().decode(
            LoginConfiguration.Client.self,
            from: .object([
                "id": .string("account"), "name": .string("your passkeys"),
                "redirectURIs": .list([.string(issuer + "/passkeys")]),
            ])
        )
        account.id = Self.accountClientID
        accountClient = account
        hasher = PasswordHasher(logN: configuration.passwordCost, blockSize: 8, parallelism: 1)
        clock = environment.clock
        cpuWork = environment.cpuWork
        logger = environment.logger
        decoyHash = hasher.decoy()
        pageLimiter = RateLimiter(perMinute: configuration.pagesPerMinute, burst: configuration.pagesPerMinute)
        clientSecretLimiter = RateLimiter(perMinute: 10, burst: 10)
        pushLimiter = RateLimiter(perMinute: 1, burst: configuration.phone?.pushesPerUser ?? 5)
        let qrCodes = configuration.phone?.qrCodesPerMinute ?? 10
        qrLimiter = RateLimiter(perMinute: qrCodes, burst: qrCodes)
        let passkeyAttempts = configuration.passkeys?.attemptsPerMinute ?? 30
        passkeyLimiter = RateLimiter(perMinute: passkeyAttempts, burst: passkeyAttempts)
        passwordLimiter = RateLimiter(
            perMinute: configuration.passwordChecksPerMinute,
            burst: configuration.passwordChecksPerMinute
        )
        sharedPasswordChecks = SharedRateLimiter(
            name: "login.password-checks",
            perMinute: configuration.passwordChecksPerMinute,
            burst: configuration.passwordChecksPerMinute,
            storage: storage
        )
    }

    /// The manifest's `login` section, with `server.publicURL` (else `servedURL`, the address
    /// `serve` listens at), on the token server's `storage`.
    public convenience init(
        manifest: Manifest,
        storage: ServerStorage,
        environment: PluginEnvironment,
        servedURL: URL? = nil
    ) throws {
        let configuration = try manifest.section("login", as: LoginConfiguration.self)
        let server = try manifest.section("server", as: ServerConfiguration.self)
        // The phone's types must be the server's, with the delivery each way needs.
        let wanted: [(String?, MobileAuthConfiguration.Delivery, String)] = [
            (configuration.phone?.pushType, .push, "pushType"), (configuration.phone?.qrType, .otp, "qrType"),
        ]
        for case (let name?, let delivery, let key) in wanted
        where server.mobileAuth?.types.contains(where: { $0.name == name && $0.delivery == delivery }) != true {
            throw ManifestError(
                source: manifest.source,
                path: "login.phone.\(key)",
                problem: "server.mobileAuth has no type \"\(name)\" with delivery \(delivery.rawValue)"
            )
        }
        try self.init(
            configuration: configuration,
            storage: storage,
            environment: environment,
            publicURL: server.publicURL ?? servedURL,
            directoryIdentityProviders: Set(
                manifest.entries.filter { entry in
                    guard entry.kind == .identityProvider, entry.type.rawValue == "idp.browser",
                        case .object(let config) = entry.configuration
                    else { return false }
                    return config["login"] != nil
                }.map(\.id)
            )
        )
    }

    var now: Double { clock.now.timeIntervalSince1970 }

    /// The id of ``accountClient``.
    static let accountClientID = "@account"

    /// A client the sign-in pages may serve: the manifest's, or the login's own.
    func pageClient(_ id: String) -> LoginConfiguration.Client? {
        id == Self.accountClientID ? accountClient : configuration.clients.first { $0.id == id }
    }

    // MARK: - Users

    /// Adds a user to the directory; the password is hashed off the caller's thread.
    public func addUser(_ username: String, password: String) async throws {
        guard password.count >= 8 else { throw LoginError("A password needs at least 8 characters.") }
        // "provider|subject" names app users of other identity providers (app-to-web sign-on).
        guard !username.contains("|") else { throw LoginError("A username cannot contain |.") }
        let hasher = hasher
        let hash = try await cpuWork.run { try hasher.hash(password) }
        do {
            try await store.addUser(username, passwordHash: hash, now: now)
        } catch LoginStore.UserError.exists {
            throw LoginError("The user \(LoginStore.normalized(username)) exists already.")
        } catch LoginStore.UserError.invalidUsername {
            throw LoginError("A username is 1 to 254 characters.")
        }
    }

    /// The directory's usernames, sorted.
    public func usernames() async throws -> [String] { try await store.usernames() }

    /// Imports once the users of `directory/login.sqlite`, where versions before the login moved
    /// into the server's database kept them, then renames that file `login.sqlite.imported` (so
    /// a later start imports nothing again, and the file stays for the operator to delete).
    /// Returns how many users were added; nil when there was no such file.
    public func importEarlierUsers(from directory: URL) async throws -> Int? {
        let earlier = directory.appendingPathComponent("login.sqlite")
        guard FileManager.default.fileExists(atPath: earlier.path) else { return nil }
        let added = try await store.importUsers(fromEarlierFile: earlier.path)
        for suffix in ["", "-wal", "-shm"] {
            let file = earlier.path + suffix
            guard FileManager.default.fileExists(atPath: file) else { continue }
            try FileManager.default.moveItem(atPath: file, toPath: earlier.path + ".imported" + suffix)
        }
        logger.notice(
            "Imported the hosted login's users from its earlier file",
            metadata: ["file": "\(earlier.path)", "added": "\(added)"]
        )
        return added
    }

    // MARK: - Codes

    /// Redeems a code this login issued: once, for its client and redirect, with the PKCE
    /// verifier. Returns the user. (`idp.browser`'s `BrowserLoginService`.)
    public func redeem(
        code: String,
        clientID: String,
        redirectURI: String,
        verifier: String
    ) async throws -> String {
        do {
            return try await store.redeem(
                code,
                clientID: clientID,
                redirectURI: redirectURI,
                verifier: verifier,
                now: now
            ).subject
        } catch LoginStore.RedemptionError.replayed(let subject) {
            logger.warning("An authorization code was used twice", metadata: ["client": "\(clientID)"])
            throw BrowserLoginReplay(subject: subject)
        }
    }

    // MARK: - Requests

    /// Answers a request under `/login/` with a page or a redirect; never throws.
    public func handle(_ request: WireRequest) async -> WireResponse {
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        do {
            switch (request.method, path) {
            case ("GET", Self.authorizePath): return try await authorize(request)
            case ("POST", Self.authorizePath): return try await signIn(request)
            case ("POST", Self.consentPath): return try await consent(request)
            case ("GET", Self.discoveryPath): return try discovery()
            case ("GET", Self.jwksPath): return try await jwks()
            case ("POST", Self.tokenPath): return await token(request)
            case ("GET", Self.userinfoPath), ("POST", Self.userinfoPath): return await userinfo(request)
            case ("GET", Self.logoutPath), ("POST", Self.logoutPath): return try await logout(request)
            case ("POST", Self.federationStartPath): return try await federationButton(request)
            case ("GET", Self.federationCallbackPath): return try await federationCallback(request)
            case ("POST", Self.phonePath): return try await startPushSignIn(request)
            case ("POST", Self.qrPath): return try await startQRSignIn(request)
            case ("GET", Self.phoneStatusPath): return try await phoneStatus(request)
            case ("POST", Self.phoneCompletePath): return try await completePhoneSignIn(request)
            case ("GET", Self.scriptPath): return LoginScript.response
            case ("POST", Self.passkeySignInOptionsPath): return try await passkeySignInOptions(request)
            case ("POST", Self.passkeySignInPath): return try await passkeySignIn(request)
            case ("GET", Self.passkeysPath): return try await passkeysPage(request)
            case ("POST", Self.passkeyRegistrationOptionsPath): return try await passkeyRegistrationOptions(request)
            case ("POST", Self.passkeysPath): return try await passkeysForm(request)
            // A 405 names the methods the resource takes (RFC 9110 §15.5.6).
            case (_, Self.tokenPath), (_, Self.discoveryPath), (_, Self.jwksPath):
                return json(
                    405,
                    ["error": "invalid_request", "error_description": "Method not allowed."],
                    headers: ["Allow": path == Self.tokenPath ? "POST" : "GET"]
                )
            case (_, _) where Self.pageMethods[path] != nil:
                let allowed = Self.pageMethods[path] ?? ""
                let message = "This page does not accept \(request.method.prefix(10)) requests."
                return page(
                    405,
                    "Not allowed",
                    ["heading": "Not allowed", "message": message],
                    headers: ["Allow": allowed]
                )
            default:
                return page(404, "Not found", "There is no such page.")
            }
        } catch let problem as LoginError {
            return page(400, "Cannot continue", problem.message)
        } catch let busy as StorageUnavailable {
            // The database is busy or unreachable (PostgreSQL): the browser may try again.
            return page(503, "Try again", busy.message)
        } catch {
            logger.error("Login request failed", metadata: ["error": "\(String(reflecting: error))"])
            return page(500, "Something went wrong", "The login could not complete the request.")
        }
    }

    /// The methods each page takes, for the 405 a wrong one gets (RFC 9110 §15.5.6).
    static let pageMethods: [String: String] = [
        authorizePath: "GET, POST", consentPath: "POST", userinfoPath: "GET, POST", logoutPath: "GET, POST",
        federationStartPath: "POST", federationCallbackPath: "GET", phonePath: "POST", qrPath: "POST",
        phoneStatusPath: "GET", phoneCompletePath: "POST", scriptPath: "GET", passkeySignInOptionsPath: "POST",
        passkeySignInPath: "POST", passkeysPath: "GET, POST", passkeyRegistrationOptionsPath: "POST",
    ]

    /// A page with the security headers every login page carries.
    func page(
        _ status: Int,
        _ title: String,
        template: String = "problem",
        _ values: [String: Any] = [:],
        formTarget: String? = nil,
        scripts: Bool = false,
        headers extra: [String: String] = [:]
    ) -> WireResponse {
        // Forms post here and may redirect to the client's redirect URI: both are allowed targets.
        let formAction = ["'self'", formTarget].compactMap { $0 }.joined(separator: " ")
        // Pages that wait for a phone or use passkeys run this site's own script, nothing inline.
        let scriptPolicy = scripts ? "script-src 'self'; connect-src 'self'; " : ""
        var headers = [
            "Content-Type": "text/html; charset=utf-8",
            "Cache-Control": "no-store",
            "Content-Security-Policy":
                "default-src 'none'; \(scriptPolicy)style-src 'unsafe-inline'; form-action \(formAction); frame-ancestors 'none'; base-uri 'none'",
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        ]
        headers.merge(extra) { $1 }
        return WireResponse(
            status: status,
            headers: headers,
            body: Data(LoginPages.render(template, title: title, values).utf8)
        )
    }

    func page(_ status: Int, _ heading: String, _ message: String) -> WireResponse {
        page(status, heading, ["heading": heading, "message": message])
    }

    /// A 303 to the client's redirect URI with `fields` added to its query.
    func redirect(_ redirectURI: String, _ fields: [(String, String)]) -> WireResponse {
        let separator = redirectURI.contains("?") ? "&" : "?"
        return WireResponse(
            status: 303,
            headers: [
                "Location": fields.isEmpty ? redirectURI : redirectURI + separator + FormFields.encode(fields),
                "Cache-Control": "no-store",
                "Referrer-Policy": "no-referrer",
            ],
            body: Data()
        )
    }
}

/// A problem the user is shown on a page; said as its message, never as a Swift value.
struct LoginError: Error, LocalizedError, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
    var errorDescription: String? { message }
}
