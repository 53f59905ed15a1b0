public import Foundation
import GatehouseKernel
public import GatehouseProtocol

/// A browser without a screen for the token server's hosted login, for demos and tests: it opens
/// the authorization URL, fills in the login form (keeping the page's cookie, as a browser does),
/// allows the consent page if one comes, and returns where the login redirected — without
/// following the redirect, which is the app's to receive. It speaks through a
/// `TokenServerTransport`, so it works against an embedded server as well as over HTTP.
public struct HeadlessLoginBrowser: Sendable {
    /// How the hosted login is reached: over HTTP, or an embedded server.
    public let transport: any TokenServerTransport
    /// The user name the browser types into the login form.
    public let username: String
    /// The password the browser types into the login form.
    public let password: String

    /// A browser that logs in as `username` through `transport`.
    public init(transport: any TokenServerTransport, username: String, password: String) {
        self.transport = transport
        self.username = username
        self.password = password
    }

    /// Why a login did not reach its redirect.
    public enum Failure: Error, Equatable, LocalizedError {
        /// The page at this step answered with this status and showed this text.
        case page(status: Int, text: String)
        /// The page that should be the login form is not; the text says what is missing.
        case notTheLogin(String)

        /// A sentence for a person.
        public var errorDescription: String? {
            switch self {
            case .page(let status, let text) where text.isEmpty:
                "The login page answered HTTP \(status) without saying why."
            case .page(_, let text): "The login page said: \(text)"
            case .notTheLogin(let problem): "That is not the login page: \(problem)."
            }
        }
    }

    /// Signs in at `url` and returns the redirect the login answered with. The URL's path and
    /// query go to the transport's server, whatever host the URL names (an embedded server has
    /// none the browser could reach).
    public func signIn(at url: URL) async throws -> URL {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false), parts.path.hasPrefix("/") else {
            throw Failure.notTheLogin("\(url) has no path")
        }
        let path = parts.percentEncodedPath + (parts.percentEncodedQuery.map { "?" + $0 } ?? "")
        let page = try await transport.send(WireRequest(method: "GET", path: path))
        guard page.status == 200 else { return try redirectOrFailure(page) }
        let cookie = page.headers.first { $0.key.lowercased() == "set-cookie" }?.value.prefix { $0 != ";" } ?? ""
        var form = try fields(of: page)
        form["username"] = username
        form["password"] = password
        var answer = try await post(form, to: Self.action(of: page), cookie: String(cookie))
        if answer.status == 200, String(decoding: answer.body, as: UTF8.self).contains(#"name="decision""#) {
            var consent = try fields(of: answer)
            consent["decision"] = "allow"
            answer = try await post(consent, to: Self.action(of: answer), cookie: String(cookie))
        }
        return try redirectOrFailure(answer)
    }

    private func post(_ fields: [String: String], to path: String, cookie: String) async throws -> WireResponse {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let body = fields.sorted { $0.key < $1.key }.map {
            "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
        }
        .joined(separator: "&")
        return try await transport.send(
            WireRequest(
                method: "POST",
                path: path,
                headers: ["Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie],
                body: Data(body.utf8)
            )
        )
    }

    private func redirectOrFailure(_ response: WireResponse) throws -> URL {
        if (300..<400).contains(response.status),
            let location = response.headers.first(where: { $0.key.lowercased() == "location" })?.value,
            let url = URL(string: location)
        {
            return url
        }
        let text = String(decoding: response.body, as: UTF8.self)
        let shown = text.range(of: #"role="alert">[^<]*"#, options: .regularExpression).map {
            String(text[$0].dropFirst(#"role="alert">"#.count))
        }
        throw Failure.page(status: response.status, text: shown ?? "")
    }

    /// The hidden fields of the page's form.
    private func fields(of page: WireResponse) throws -> [String: String] {
        let html = String(decoding: page.body, as: UTF8.self)
        var fields: [String: String] = [:]
        for name in ["authorization", "csrf"] {
            guard let range = html.range(of: #"name="\#(name)" value="[^"]*""#, options: .regularExpression) else {
                throw Failure.notTheLogin("the page has no \(name) field")
            }
            fields[name] = String(html[range].split(separator: "\"", omittingEmptySubsequences: false)[3])
        }
        return fields
    }

    private static func action(of page: WireResponse) throws -> String {
        let html = String(decoding: page.body, as: UTF8.self)
        guard let range = html.range(of: #"action="[^"]*""#, options: .regularExpression) else {
            throw Failure.notTheLogin("the page has no form")
        }
        return String(html[range].dropFirst(8).dropLast())
    }
}
