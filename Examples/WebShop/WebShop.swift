// A web shop that signs its users in with an OpenID provider: Gatehouse's hosted login or any other.
//
//   WEB_SHOP_CLIENT_SECRET=… web-shop --issuer http://127.0.0.1:8080/login --client-id web-shop
//
// Register http://127.0.0.1:8070/callback as the client's redirect URI and
// http://127.0.0.1:8070/ as its post-logout redirect URI at the provider.
//
// The sign-in's state, nonce and PKCE verifier travel in a cookie sealed with AES-GCM under a
// key made at start-up (a restart only ends sign-ins under way); the session is an opaque id into
// this process's memory. Several instances need a shared key and session store instead.
import ArgumentParser
import Crypto
import Foundation
import GatehouseOpenID
import Hummingbird
import Logging
import Synchronization

@main
struct WebShop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web-shop",
        abstract: "An example web application that signs users in with an OpenID provider."
    )

    @Option(help: "The port to listen on, on 127.0.0.1.")
    var port: Int = 8070

    @Option(help: "The OpenID provider's issuer, e.g. http://127.0.0.1:8080/login.")
    var issuer: String

    @Option(help: "This application's client id at the provider.")
    var clientId: String = "web-shop"

    @Option(help: "The client secret (better: $WEB_SHOP_CLIENT_SECRET; none for a public client).")
    var clientSecret: String?

    @Option(help: "The URL browsers reach this application at (default: http://127.0.0.1:<port>).")
    var publicURL: String?

    func run() async throws {
        guard (1...65535).contains(port) else { throw ValidationError("--port must be 1–65535.") }
        var publicURL = publicURL ?? "http://127.0.0.1:\(port)"
        while publicURL.hasSuffix("/") { publicURL.removeLast() }
        let secret = clientSecret ?? ProcessInfo.processInfo.environment["WEB_SHOP_CLIENT_SECRET"]
        let party = try OpenIDRelyingParty(
            .init(issuer: issuer, clientID: clientId, clientSecret: secret, redirectURI: publicURL + "/callback")
        )
        let shop = Shop(party: party, publicURL: publicURL)
        var logger = Logger(label: "web-shop")
        logger.logLevel = .notice
        let port = port
        let application = Application(
            router: shop.router(),
            configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "web-shop"),
            onServerRunning: { _ in
                FileHandle.standardOutput.write(Data("listening on http://127.0.0.1:\(port)\n".utf8))
            },
            logger: logger
        )
        try await application.runService()
    }
}

/// The signed-in user, kept in memory under a random session id.
struct Session: Sendable {
    var subject: String
    var email: String?
    var idToken: String
    var expires: Date
}

final class Shop: Sendable {
    let party: OpenIDRelyingParty
    let publicURL: String
    let sealer = CookieSealer()
    let sessions = Mutex<[String: Session]>([:])
    init(party: OpenIDRelyingParty, publicURL: String) {
        self.party = party
        self.publicURL = publicURL
    }
    static let loginCookie = "web_shop_login"
    static let sessionCookie = "web_shop_session"

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/") { [self] request, _ in page(signedInAs: session(request)) }
        router.get("/login") { [self] _, _ in
            // New state, nonce and PKCE verifier; the browser carries them sealed to the callback.
            let login: OpenIDAuthorizationRequest
            do {
                login = try await party.begin()
            } catch {
                return errorPage("The sign-in cannot start: \(String(describing: error))")
            }
            var response = Response.redirect(to: login.url, type: .found)
            response.setCookie(cookie(Self.loginCookie, try sealer.seal(login, lifetime: 600), maxAge: 600))
            return response
        }
        router.get("/callback") { [self] request, _ in
            var parameters: [String: String] = [:]
            for (name, value) in request.uri.queryParameters { parameters[String(name)] = String(value) }
            guard
                let login = request.cookies[Self.loginCookie].flatMap({
                    sealer.open($0.value, as: OpenIDAuthorizationRequest.self)
                })
            else { return errorPage("This sign-in has expired or was not started here. Please sign in again.") }
            do {
                let signIn = try await party.finish(callback: parameters, request: login)
                let id = CookieSealer.randomID()
                let email = signIn.claims.email ?? signIn.userInfo?.email
                sessions.withLock {
                    $0 = $0.filter { $0.value.expires > Date() }
                    $0[id] = Session(
                        subject: signIn.claims.sub,
                        email: email,
                        idToken: signIn.idToken,
                        expires: Date().addingTimeInterval(8 * 3600)
                    )
                }
                var response = Response.redirect(to: "/", type: .found)
                response.setCookie(cookie(Self.sessionCookie, id, maxAge: 8 * 3600))
                response.setCookie(cookie(Self.loginCookie, "", maxAge: 0))
                return response
            } catch {
                var response = errorPage("The sign-in failed: \(String(describing: error))")
                response.setCookie(cookie(Self.loginCookie, "", maxAge: 0))
                return response
            }
        }
        let logout: @Sendable (Request, BasicRequestContext) async throws -> Response = { [self] request, _ in
            let ended = request.cookies[Self.sessionCookie].flatMap { id in
                sessions.withLock { $0.removeValue(forKey: id.value) }
            }
            // Also end the session at the provider, which then sends the browser back here.
            let url = try? await party.endSessionURL(
                idTokenHint: ended?.idToken,
                postLogoutRedirectURI: ended == nil ? nil : publicURL + "/"
            )
            var response = Response.redirect(to: (ended == nil ? nil : url) ?? "/", type: .found)
            response.setCookie(cookie(Self.sessionCookie, "", maxAge: 0))
            return response
        }
        router.get("/logout", use: logout)
        router.post("/logout", use: logout)
        return router
    }

    func session(_ request: Request) -> Session? {
        guard let id = request.cookies[Self.sessionCookie]?.value else { return nil }
        return sessions.withLock { $0[id] }.flatMap { $0.expires > Date() ? $0 : nil }
    }

    /// HttpOnly, SameSite=Lax (sent on the provider's redirect back, not on cross-site posts),
    /// Secure when the application is served over https.
    func cookie(_ name: String, _ value: String, maxAge: Int) -> Cookie {
        Cookie(
            name: name,
            value: value,
            maxAge: maxAge,
            path: "/",
            secure: publicURL.hasPrefix("https://"),
            httpOnly: true,
            sameSite: .lax
        )
    }

    func page(signedInAs session: Session?) -> Response {
        let body =
            if let session {
                "<p>Signed in as \(escape(session.subject)) (\(escape(session.email ?? "no email")))</p>"
                    + "<form method=\"post\" action=\"/logout\"><button>Sign out</button></form>"
            } else {
                "<p><a href=\"/login\">Sign in</a></p>"
            }
        return html("<h1>Web shop</h1>" + body, status: .ok)
    }

    func errorPage(_ message: String) -> Response {
        html("<h1>Web shop</h1><p>\(escape(message))</p><p><a href=\"/login\">Sign in</a></p>", status: .badRequest)
    }

    func html(_ body: String, status: HTTPResponse.Status) -> Response {
        let document =
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>Web shop</title></head><body>"
            + body + "</body></html>"
        return Response(
            status: status,
            headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: document))
        )
    }

    /// Escapes text for HTML content and attribute values.
    func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}

/// Values sealed into cookie text with AES-GCM under a key only this process knows: the browser
/// carries them but can neither read them (the PKCE verifier stays secret) nor change them
/// unnoticed, and each carries its expiry.
struct CookieSealer: Sendable {
    private let key = SymmetricKey(size: .bits256)

    private struct Sealed<Value: Codable>: Codable {
        var value: Value
        var expires: Date
    }

    func seal(_ value: some Codable, lifetime: TimeInterval) throws -> String {
        let payload = try JSONEncoder().encode(Sealed(value: value, expires: Date().addingTimeInterval(lifetime)))
        guard let combined = try AES.GCM.seal(payload, using: key).combined else {
            throw CryptoKitError.incorrectParameterSize
        }
        return Self.base64URL(combined)
    }

    func open<Value: Codable>(_ text: String, as type: Value.Type) -> Value? {
        guard let combined = Self.data(text), let box = try? AES.GCM.SealedBox(combined: combined),
            let payload = try? AES.GCM.open(box, using: key),
            let sealed = try? JSONDecoder().decode(Sealed<Value>.self, from: payload), sealed.expires > Date()
        else { return nil }
        return sealed.value
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func data(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }

    /// A random session id: 256 bits from the system's secure generator.
    static func randomID() -> String {
        var generator = SystemRandomNumberGenerator()
        return base64URL(Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }))
    }
}
