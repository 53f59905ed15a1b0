import Foundation
import GatehouseKernel
import GatehouseProtocol

// App-to-web single sign-on: the app asks for a one-time login token for a web address its
// application allows; the browser redeems it at /web/sign-in and lands there with a cookie
// session. /web/session is the page the server hosts to show who that session is.

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
                    code: AppToWebSingleSignOnError.Code.disabled.rawValue
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

    func redeemWebLogin(_ request: WireRequest) async throws -> WireResponse {
        guard let query = FormFields(queryOf: request.path), let token = query["token"],
            (1...128).contains(token.utf8.count),
            let (target, session) = try await store.redeemWebLogin(
                token,
                now: now,
                sessionLifetime: Double(configuration.webSessionLifetime)
            )
        else {
            return webPage(
                400,
                "Sign-in link not valid",
                "This sign-in link was used, has expired or is not valid. Sign in from the app again."
            )
        }
        var cookie =
            "gh_web=\(session); Path=/web/; HttpOnly; SameSite=Lax; Max-Age=\(configuration.webSessionLifetime)"
        if publicURL.hasPrefix("https://") { cookie += "; Secure" }
        return WireResponse(
            status: 303,
            headers: [
                "Location": target, "Set-Cookie": cookie, "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
            ],
            body: Data()
        )
    }

    func webSessionPage(_ request: WireRequest) async throws -> WireResponse {
        var session: String?
        for pair in (request.header("Cookie") ?? "").split(separator: ";") {
            let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == "gh_web", parts[1].utf8.count <= 128 { session = String(parts[1]) }
        }
        guard let session, let user = try await store.webSessionUser(session, now: now) else {
            return webPage(401, "Not signed in", "Open this page from the app to be signed in.")
        }
        return webPage(200, "Signed in", "Signed in as \(user.subject) (through \(user.identityProvider)).")
    }

    /// A small page: escaped text, no scripts, no framing.
    private func webPage(_ status: Int, _ heading: String, _ message: String) -> WireResponse {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
                .replacingOccurrences(of: "'", with: "&#39;")
        }
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>\(escaped(heading))</title>
            <meta name="viewport" content="width=device-width, initial-scale=1"></head>
            <body><main><h1>\(escaped(heading))</h1><p>\(escaped(message))</p></main></body></html>
            """
        return WireResponse(
            status: status,
            headers: [
                "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store",
                "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
                "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
            ],
            body: Data(html.utf8)
        )
    }
}
