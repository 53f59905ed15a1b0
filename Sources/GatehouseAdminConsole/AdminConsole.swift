import Crypto
import Foundation
public import GatehouseKernel
public import GatehouseLogin
import GatehouseOpenID
public import GatehouseProtocol
public import GatehouseServer
import Logging
import Synchronization

/// The admin console for a helpdesk, mounted on the token server under `/admin/`: server-rendered
/// pages where an operator finds a user by e-mail address (or a profile or installation id), sees
/// their devices, sessions and recent events, and revokes sessions, removes an authenticator,
/// disenrols a device, deregisters a profile or clears failed attempts.
///
/// Operators sign in through the hosted login as its OpenID client (authorization code with
/// PKCE, state and nonce), which is asked for the configured `acr` values and to sign them in
/// again; the ID token must say one of those values, a second factor (`amr` has `mfa`), and name
/// a configured operator. A console session is a random cookie whose SHA-256 is kept in the
/// console's table (idle and absolute lifetimes). Every change goes through the token server's
/// admin service as the operator (`operator:<subject>` in the audit trail), from a form carrying
/// a token bound to the session, after a confirmation page; an operator with `admin:read` only
/// sees no such form and is refused one (403).
///
/// The pages carry no script and no inline style (`default-src 'none'; style-src 'self'`), are
/// never cached, and cannot be framed.
public final class AdminConsole: AdminServiceExtension {
    /// The console's pages are under `/admin/`.
    public var pathPrefix: String { "/admin/" }
    /// The console's start page: the user search.
    public static let homePath = "/admin/"
    /// Starts a sign-in at the hosted login.
    public static let signInPath = "/admin/sign-in"
    /// Where the hosted login sends the operator back: register `<public URL>/admin/callback`
    /// as the login client's redirect URI.
    public static let callbackPath = "/admin/callback"
    /// Ends the console session (POST).
    public static let signOutPath = "/admin/sign-out"
    /// One user's profiles, devices, sessions and recent events.
    public static let userPath = "/admin/user"
    /// The confirmation page of an action (POST).
    public static let confirmPath = "/admin/confirm"
    /// Where a confirmed action is posted.
    public static let actionPath = "/admin/act"
    /// The audit trail, filtered and paged.
    public static let auditPath = "/admin/audit"
    /// The pages' style sheet.
    public static let stylePath = "/admin/console.css"

    /// The manifest's `adminConsole` section.
    public let configuration: AdminConsoleConfiguration
    let store: AdminConsoleStore
    let relyingParty: OpenIDRelyingParty
    /// The authenticators that are a profile's PIN: never offered for removal.
    let pinAuthenticators: Set<String>
    /// The identity providers' names, by id, as the pages show them.
    let identityProviderNames: [String: String]
    /// Whether the cookies carry `Secure`: the server is reached over https.
    let secureCookies: Bool
    let clock: any WallClock
    let logger: Logger
    /// Sign-ins started per client address (each keeps a row until it lapses).
    let signInLimiter = RateLimiter(perMinute: 30, burst: 30)
    /// The token server's admin service, once the server is built.
    let adminService = Mutex<AdminService?>(nil)
    /// The key the forms' tokens are made with, once read from the store.
    let formKey = Mutex<SymmetricKey?>(nil)

    /// How long a sign-in may take at the login before its callback is refused.
    static let signInLifetime = 600.0
    /// The session cookie's name.
    static let sessionCookie = "gh_admin_session"
    /// The cookie of a sign-in under way.
    static let signInCookie = "gh_admin_signin"

    /// A console for `configuration` that signs operators in at `login` (the hosted login the
    /// same token server mounts), its state in the token server's `storage` (opened with
    /// ``AdminConsoleStore/migrations``). `pinAuthenticators` are the manifest's PIN
    /// authenticators' ids, which no operator may remove; `identityProviderNames` what the pages
    /// call each identity provider (by id; an id without a name is shown as it is). Throws an
    /// ``AdminConsoleSetupError`` when the login cannot sign operators in as configured.
    public init(
        configuration: AdminConsoleConfiguration,
        login: LoginServer,
        storage: ServerStorage,
        environment: PluginEnvironment,
        pinAuthenticators: Set<String> = ["pin"],
        identityProviderNames: [String: String] = [:]
    ) throws {
        let client = try Self.checkedClient(configuration, login: login)
        let base = String(login.issuer.dropLast("/login".count))
        do {
            relyingParty = try OpenIDRelyingParty(
                .init(
                    issuer: login.issuer,
                    clientID: client.id,
                    clientSecret: client.secret,
                    redirectURI: base + Self.callbackPath,
                    scopes: ["openid"],
                    clock: environment.clock
                )
            )
        } catch {
            throw AdminConsoleSetupError(
                "The admin console cannot sign in at \(login.issuer): \(error). The server's public URL must be "
                    + "https (or a loopback address)."
            )
        }
        self.configuration = configuration
        self.pinAuthenticators = pinAuthenticators
        self.identityProviderNames = identityProviderNames
        store = try AdminConsoleStore(storage: storage)
        secureCookies = base.hasPrefix("https://")
        clock = environment.clock
        logger = environment.logger
    }

    /// The manifest's `adminConsole` section, signing in at `login`; the PIN authenticators are
    /// the manifest's `pin` entries, the identity providers' names their entries' `name`.
    /// Problems are said as manifest errors at `adminConsole`.
    public convenience init(
        manifest: Manifest,
        login: LoginServer,
        storage: ServerStorage,
        environment: PluginEnvironment
    ) throws {
        let configuration = try manifest.section("adminConsole", as: AdminConsoleConfiguration.self)
        let pins = manifest.entries(of: .authenticator).filter { $0.type.rawValue == "pin" }.map(\.id)
        var names: [String: String] = [:]
        for entry in manifest.entries(of: .identityProvider) { names[entry.id] = entry.name }
        do {
            try self.init(
                configuration: configuration,
                login: login,
                storage: storage,
                environment: environment,
                pinAuthenticators: Set(pins),
                identityProviderNames: names
            )
        } catch let error as AdminConsoleSetupError {
            throw ManifestError(source: manifest.source, path: "adminConsole.loginClient", problem: error.message)
        }
    }

    /// The login's client the console signs in as, checked: listed, with the console's redirect
    /// URI, public subjects and `openid`, and able to give one of the `acr` values asked.
    static func checkedClient(
        _ configuration: AdminConsoleConfiguration,
        login: LoginServer
    ) throws -> LoginConfiguration.Client {
        let redirect = String(login.issuer.dropLast("/login".count)) + callbackPath
        let name = configuration.loginClient
        guard let client = login.configuration.clients.first(where: { $0.id == name }) else {
            throw AdminConsoleSetupError(
                "the login section has no client \"\(name)\"; add one with redirectURIs: [\(redirect)]"
            )
        }
        guard client.redirectURIs.contains(redirect) else {
            throw AdminConsoleSetupError("the login client \"\(name)\" needs the redirect URI \(redirect)")
        }
        guard client.subjectType == .public else {
            throw AdminConsoleSetupError(
                "the login client \"\(name)\" must have public subjects: operators are named by their usernames"
            )
        }
        guard client.scopes.contains("openid") else {
            throw AdminConsoleSetupError("the login client \"\(name)\" must be allowed the scope openid")
        }
        let login = login.configuration
        let methods = login.signInMethods(for: client)
        let producible: [String: Bool] = [
            AdminConsoleConfiguration.passkeyACR: methods.contains(.passkey),
            AdminConsoleConfiguration.phoneACR: methods.contains(.push) || methods.contains(.qr),
        ]
        // An acr of another provider's cannot be checked here; one the login never gives can.
        if configuration.acrValues.allSatisfy({ producible[$0] == false }) {
            throw AdminConsoleSetupError(
                "the login client \"\(name)\" offers no sign-in giving \(configuration.acrValues.joined(separator: " or ")); "
                    + "configure the login's passkeys or phone sign-in"
            )
        }
        return client
    }

    /// Keeps the token server's admin service (the server calls it once it is built).
    public func mounted(with admin: AdminService) {
        adminService.withLock { $0 = admin }
    }

    var now: Double { clock.now.timeIntervalSince1970 }

    /// The admin service; a console mounted on no token server cannot do anything.
    func admin() throws -> AdminService {
        guard let admin = adminService.withLock({ $0 }) else {
            throw ConsoleProblem(503, "Not ready", "The console is not connected to a token server yet.")
        }
        return admin
    }

    // MARK: - Requests

    /// What the pages call the identity provider `id`: its name, and the id when they differ.
    func identityProviderName(_ id: String) -> String {
        guard let name = identityProviderNames[id], name != id else { return id }
        return "\(name) (\(id))"
    }

    /// The methods each page takes, for the 405 a wrong one gets (RFC 9110 §15.5.6).
    static let pageMethods: [String: String] = [
        homePath: "GET", signInPath: "GET", callbackPath: "GET", signOutPath: "POST", userPath: "GET",
        confirmPath: "POST", actionPath: "POST", auditPath: "GET", stylePath: "GET",
    ]

    /// Answers a request under `/admin/` with a page or a redirect; never throws.
    public func handle(_ request: WireRequest) async -> WireResponse {
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        do {
            switch (request.method, path) {
            case ("GET", Self.homePath): return try await home(request)
            case ("GET", Self.stylePath): return Self.styleSheet
            case ("GET", Self.signInPath): return try await beginSignIn(request)
            case ("GET", Self.callbackPath): return try await finishSignIn(request)
            case ("POST", Self.signOutPath): return try await signOut(request)
            case ("GET", Self.userPath): return try await userPage(request)
            case ("POST", Self.confirmPath): return try await confirmation(request)
            case ("POST", Self.actionPath): return try await act(request)
            case ("GET", Self.auditPath): return try await auditPage(request)
            case (_, _) where Self.pageMethods[path] != nil:
                return message(
                    405,
                    "Not allowed",
                    "This page does not accept \(request.method.prefix(10)) requests.",
                    headers: ["Allow": Self.pageMethods[path] ?? ""]
                )
            default:
                return message(404, "Not found", "There is no such page.", back: (Self.homePath, "Find a user"))
            }
        } catch let problem as ConsoleProblem {
            return message(
                problem.status,
                problem.heading,
                problem.message,
                signIn: problem.offersSignIn,
                back: problem.back
            )
        } catch let busy as StorageUnavailable {
            // The database is busy or unreachable (PostgreSQL): the browser may try again.
            return message(503, "Try again", busy.message)
        } catch {
            logger.error("Admin console request failed", metadata: ["error": "\(String(reflecting: error))"])
            return message(500, "Something went wrong", "The console could not complete the request.")
        }
    }

    // MARK: - Pages

    /// A page with the security headers every console page carries; `chrome` is the signed-in
    /// header (navigation, operator, sign-out form).
    func page(
        _ status: Int,
        _ title: String,
        template: String,
        _ values: [String: Any],
        chrome: [String: Any]? = nil,
        headers extra: [String: String] = [:]
    ) -> WireResponse {
        var headers = [
            "Content-Type": "text/html; charset=utf-8",
            "Cache-Control": "no-store",
            "Content-Security-Policy":
                "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        ]
        headers.merge(extra) { $1 }
        return WireResponse(
            status: status,
            headers: headers,
            body: Data(AdminConsolePages.render(template, title: title, values, chrome: chrome).utf8)
        )
    }

    /// A page that says one thing: a refusal, a problem, or that the operator signed out.
    func message(
        _ status: Int,
        _ heading: String,
        _ text: String,
        signIn: Bool = false,
        back: (String, String)? = nil,
        headers: [String: String] = [:]
    ) -> WireResponse {
        var values: [String: Any] = [
            "heading": heading, "message": text, "kind": status < 400 ? "notice" : "error",
            "role": status < 400 ? "status" : "alert",
        ]
        if signIn { values["signIn"] = Self.signInPath }
        if let back {
            values["back"] = back.0
            values["backLabel"] = back.1
        }
        return page(status, heading, template: "message", values, headers: headers)
    }

    /// The style sheet: the same for everyone, so it may be cached a while.
    static let styleSheet = WireResponse(
        status: 200,
        headers: [
            "Content-Type": "text/css; charset=utf-8", "Cache-Control": "public, max-age=3600",
            "X-Content-Type-Options": "nosniff",
        ],
        body: Data(AdminConsolePages.style.utf8)
    )

    /// A 303 to `location` (a path of the console's, or the login's authorization URL).
    func redirect(_ location: String, cookies: [String] = []) -> WireResponse {
        var headers = ["Location": location, "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"]
        if !cookies.isEmpty { headers["Set-Cookie"] = cookies.joined(separator: "\n") }
        return WireResponse(status: 303, headers: headers, body: Data())
    }

    /// The value of cookie `name` in the request.
    func cookie(_ name: String, in request: WireRequest) -> String? {
        for pair in (request.header("Cookie") ?? "").split(separator: ";") {
            let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == name { return String(parts[1]) }
        }
        return nil
    }

    /// A cookie of the console's: HttpOnly, only under `/admin/`, `Secure` over https.
    func setCookie(_ name: String, _ value: String, maxAge: Int, sameSite: String = "Strict") -> String {
        "\(name)=\(value); Path=/admin/; HttpOnly; SameSite=\(sameSite); Max-Age=\(maxAge)"
            + (secureCookies ? "; Secure" : "")
    }
}

/// Why the console cannot be set up as configured; said as a sentence.
public struct AdminConsoleSetupError: Error, CustomStringConvertible {
    /// What is wrong and what to change.
    public var message: String
    init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// A problem shown to the operator on a page with its status; never a Swift value.
struct ConsoleProblem: Error {
    var status: Int
    var heading: String
    var message: String
    /// The page offers "Sign in again".
    var offersSignIn = false
    /// A link back: its path and label.
    var back: (String, String)?

    init(_ status: Int, _ heading: String, _ message: String, signIn: Bool = false, back: (String, String)? = nil) {
        self.status = status
        self.heading = heading
        self.message = message
        offersSignIn = signIn
        self.back = back
    }
}
