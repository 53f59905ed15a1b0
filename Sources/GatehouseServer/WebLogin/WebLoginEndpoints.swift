import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol

// App-to-web single sign-on: the app asks for a one-time login token for a web address its
// application allows; the browser opens /web/sign-in, whose page asks its user to continue as
// the token's user, and the confirming POST redeems it and lands there with a cookie session
// that ends with the app session. /web/session is the page the server hosts to show who that
// session is.

extension TokenServer {
    /// Seconds a login token may wait for the browser.
    static let webLoginLifetime = 60

    func issueWebLogin(_ request: WireRequest) async throws -> WireResponse {
        let token = try bearerToken(request)
        let proof = try proof(request, accessToken: token)
        let body = try decodeBody(WebLoginRequest.self, request)
        let clients = configuration.clients
        let loginToken = try await store.issueWebLogin(
            accessToken: token,
            proof: proof,
            lifetime: Double(Self.webLoginLifetime)
        ) { appID in
            let allowed = clients.first { $0.id == appID }?.webLoginTargets ?? []
            guard body.targetURL.utf8.count <= 2048, body.targetURL.utf8.allSatisfy(Self.isURIByte),
                let target = URLComponents(string: body.targetURL), let canonical = target.string,
                allowed.contains(where: { Self.target(target, isWithin: $0) })
            else {
                throw ServerError(
                    400,
                    "invalid_target",
                    allowed.isEmpty
                        ? "App-to-web single sign-on is off for this application (server.clients[].webLoginTargets)."
                        : "The target is not among the application's web login targets.",
                    code: AppToWebSingleSignOnError.Code.disabled
                )
            }
            return canonical
        }
        return try json(
            WebLoginResponse(
                redirectURL: publicURL + Endpoint.webSignIn + "?token=" + loginToken,
                token: loginToken,
                expiresIn: Self.webLoginLifetime
            )
        )
    }

    /// RFC 3986's characters only: unreserved, reserved and `%`; no backslash, white space or
    /// control character, which browsers read in ways a URL parser here may not.
    static func isURIByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: "-._~:/?#[]@!$&'()*+,;=%".utf8.contains(byte)
        }
    }

    /// Whether `target` is `allowed` or under it: same scheme, host and port, and a path that
    /// is the allowed one or continues it after a `/`.
    static func target(_ target: URLComponents, isWithin allowed: String) -> Bool {
        guard let allowed = URLComponents(string: allowed), target.scheme?.lowercased() == allowed.scheme,
            target.host?.lowercased() == allowed.host?.lowercased(), target.port == allowed.port, target.user == nil,
            target.password == nil, target.fragment == nil
        else { return false }
        // The path as sent, compared as sent: no dot segments, and no encoded dot, slash or
        // backslash that a browser might turn into one (the caller refused raw backslashes and
        // white space already).
        let path = target.percentEncodedPath
        let lowered = path.lowercased()
        guard
            !path.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == "." || $0 == ".." }),
            !lowered.contains("%2e"), !lowered.contains("%2f"), !lowered.contains("%5c")
        else { return false }
        if allowed.percentEncodedPath.hasSuffix("/") { return path.hasPrefix(allowed.percentEncodedPath) }
        return path == allowed.percentEncodedPath || path.hasPrefix(allowed.percentEncodedPath + "/")
    }

    /// `GET /web/sign-in?token=`: asks the browser's user to continue as the link's user. Nothing
    /// is spent or opened here: a link opened by someone else (sent to them, or opened for them by
    /// a page that wants their browser signed in as another user) names the user it signs in as,
    /// and only the button, a same-site POST from this page, goes on.
    func webSignInPage(_ request: WireRequest) async throws -> WireResponse {
        guard let query = FormFields(queryOf: request.path), let token = query["token"],
            (1...128).contains(token.utf8.count), let user = try await store.webLoginUser(token, now: now)
        else { return invalidSignInLink() }
        // Double submit: the form's value must come back with this cookie, which a page on
        // another site can neither read nor (SameSite=Strict) have sent with its own POST. The
        // value is this server's, for this link: a pair made up, or shown for another link, fails.
        let csrf = signInConfirmation(for: token, nonce: Data.random(count: 18))
        var cookie =
            "\(Self.signInCookie)=\(csrf); Path=/web/; HttpOnly; SameSite=Strict; Max-Age=\(Self.webLoginLifetime)"
        if publicURL.hasPrefix("https://") { cookie += "; Secure" }
        var page = webPage(
            200,
            "Continue as \(user.subject)?",
            "This link signs this browser in as \(user.subject) (through \(user.identityProvider)). Continue only if "
                + "you opened it from your own app just now; otherwise close this page.",
            form: (
                action: "sign-in",
                fields: [("token", token), ("csrf", csrf)],
                button: "Continue as \(user.subject)"
            )
        )
        page.headers["Set-Cookie"] = cookie
        return page
    }

    /// `POST /web/sign-in` from that page: spends the login token and opens the web session.
    func redeemWebLogin(_ request: WireRequest) async throws -> WireResponse {
        // The form this server showed, in this browser: its cookie came back with the same value,
        // and the browser does not report the POST as coming from another site. Anything else —
        // another body included — is not a confirmation, whatever its token.
        guard request.body.count <= configuration.maxRequestBytes,
            request.header("Content-Type")?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true,
            let fields = FormFields(body: request.body), let token = fields["token"],
            (1...128).contains(token.utf8.count),
            let csrf = fields["csrf"], isSignInConfirmation(csrf, for: token),
            cookie(Self.signInCookie, in: request).map({ ConstantTime.equals($0, csrf) }) == true,
            request.header("Sec-Fetch-Site")?.lowercased() != "cross-site"
        else {
            return webPage(
                403,
                "Sign-in not confirmed",
                "Open the sign-in link from the app again and continue on its page."
            )
        }
        guard
            let (target, session) = try await store.redeemWebLogin(
                token,
                now: now,
                sessionLifetime: Double(configuration.webSessionLifetime)
            )
        else { return invalidSignInLink() }
        let secure = publicURL.hasPrefix("https://") ? "; Secure" : ""
        var cookies =
            "gh_web=\(session); Path=/web/; HttpOnly; SameSite=Lax; Max-Age=\(configuration.webSessionLifetime)"
            + secure
        // The hosted login, when mounted, signs this browser in too: the target's own OpenID
        // sign-in there then completes without asking for anything.
        if let starter = extensions.lazy.compactMap({ $0 as? any BrowserSessionStarter }).first,
            let user = try await store.webSessionUser(session, now: now)
        {
            cookies +=
                "\n"
                + (try await starter.startBrowserSession(
                    subject: user.subject,
                    identityProvider: user.identityProvider,
                    cookies: request.header("Cookie")
                ))
        }
        return WireResponse(
            status: 303,
            headers: [
                "Location": target,
                "Set-Cookie": cookies,
                "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
            ],
            body: Data()
        )
    }

    /// The double-submit cookie of the sign-in page.
    static let signInCookie = "gh_web_confirm"

    /// `nonce.mac`: an HMAC of the link token and the nonce under a server secret every instance
    /// shares, so only a page this server showed for this link yields a value that passes.
    func signInConfirmation(for token: String, nonce: Data) -> String {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data("gatehouse web sign-in \(token) ".utf8) + nonce,
            using: SymmetricKey(data: store.dpopNonceSecret)
        )
        return nonce.base64URLEncodedString + "." + Data(mac).base64URLEncodedString
    }

    func isSignInConfirmation(_ value: String, for token: String) -> Bool {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count == 24, let nonce = Data(base64URLEncoded: String(parts[0]))
        else { return false }
        return ConstantTime.equals(signInConfirmation(for: token, nonce: nonce), value)
    }

    /// No such live link (used, expired, unknown, its app session ended): 404, the link names nothing.
    private func invalidSignInLink() -> WireResponse {
        webPage(
            404,
            "Sign-in link not valid",
            "This sign-in link was used, has expired or is not valid. Sign in from the app again."
        )
    }

    func webSessionPage(_ request: WireRequest) async throws -> WireResponse {
        guard let session = cookie("gh_web", in: request),
            let user = try await store.webSessionUser(session, now: now)
        else {
            return webPage(401, "Not signed in", "Open this page from the app to be signed in.")
        }
        return webPage(200, "Signed in", "Signed in as \(user.subject) (through \(user.identityProvider)).")
    }

    /// The request's cookie `name` (up to 128 bytes).
    private func cookie(_ name: String, in request: WireRequest) -> String? {
        var value: String?
        for pair in (request.header("Cookie") ?? "").split(separator: ";") {
            let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == name, parts[1].utf8.count <= 128 { value = String(parts[1]) }
        }
        return value
    }

    /// A small page: escaped text, an optional form that posts hidden fields, no scripts, no
    /// framing, and no referrer (the sign-in page's address carries its token).
    private func webPage(
        _ status: Int,
        _ heading: String,
        _ message: String,
        form: (action: String, fields: [(String, String)], button: String)? = nil
    ) -> WireResponse {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
                .replacingOccurrences(of: "'", with: "&#39;")
        }
        let formHTML =
            form.map { form in
                let hidden = form.fields.map {
                    #"<input type="hidden" name="\#(escaped($0.0))" value="\#(escaped($0.1))">"#
                }
                return #"<form method="post" action="\#(escaped(form.action))">"# + hidden.joined()
                    + #"<button type="submit">\#(escaped(form.button))</button></form>"#
            } ?? ""
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>\(escaped(heading))</title>
            <meta name="viewport" content="width=device-width, initial-scale=1"></head>
            <body><main><h1>\(escaped(heading))</h1><p>\(escaped(message))</p>\(formHTML)</main></body></html>
            """
        return WireResponse(
            status: status,
            headers: [
                "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store",
                "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
                "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            ],
            body: Data(html.utf8)
        )
    }
}
