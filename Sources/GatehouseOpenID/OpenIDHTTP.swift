import Foundation
import GatehouseOutbound
import GatehouseProtocol

/// The relying party's calls to a provider: discovery, keys, token and userinfo endpoints, all
/// through ``OutboundHTTP`` (no redirects, a deadline, a bounded answer) and only to URLs that
/// pass ``OpenIDHTTP/providerURL(_:role:)``.
enum OpenIDHTTP {
    /// The largest discovery document, key set, token or userinfo answer read.
    static let maxResponseBytes = 256 * 1024

    /// Accepts `text` as a URL of the provider's: an ``OutboundURL`` with `https`, or `http` on a
    /// loopback host (`127.0.0.1`, `localhost`, `[::1]`), which is only for tests and local
    /// development. `role` names it in the error (`the token endpoint`).
    static func providerURL(_ text: String, role: String) throws(OpenIDRelyingPartyError) -> OutboundURL {
        let url: OutboundURL
        do {
            url = try OutboundURL(text)
        } catch {
            throw .invalidProviderResponse(url: text, reason: "\(role) is not an acceptable URL: \(error.reason)")
        }
        guard url.scheme == "https" || isLoopback(url.host) else {
            throw .invalidProviderResponse(
                url: text,
                reason: "\(role) must use https (http is allowed for 127.0.0.1, localhost and [::1] only)"
            )
        }
        return url
    }

    /// Whether `host` is one of the loopback spellings http is allowed for.
    static func isLoopback(_ host: String) -> Bool { ["127.0.0.1", "localhost", "[::1]"].contains(host) }

    /// GETs `url` and decodes its JSON answer (status 200 only).
    static func getJSON<Value: Decodable>(
        _ url: OutboundURL,
        as type: Value.Type,
        what: String,
        headers: [(String, String)] = [],
        timeout: Duration
    ) async throws(OpenIDRelyingPartyError) -> Value {
        let response: OutboundHTTP.Response
        do {
            response = try await OutboundHTTP.get(
                url,
                headers: [("Accept", "application/json")] + headers,
                timeout: timeout,
                maxResponseBytes: maxResponseBytes
            )
        } catch {
            throw .providerUnreachable(url: url.text, reason: error.reason)
        }
        guard response.status == 200 else {
            throw .invalidProviderResponse(url: url.text, reason: "\(what) answered HTTP \(response.status), not 200")
        }
        return try decode(Value.self, from: response.body, url: url, what: what)
    }

    /// POSTs `fields` as `application/x-www-form-urlencoded`; returns the status and body.
    static func postForm(
        _ url: OutboundURL,
        fields: [(String, String)],
        headers: [(String, String)],
        timeout: Duration
    ) async throws(OpenIDRelyingPartyError) -> OutboundHTTP.Response {
        do {
            return try await OutboundHTTP.post(
                url,
                headers: [
                    ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                ] + headers,
                body: Data(FormFields.encode(fields).utf8),
                timeout: timeout,
                maxResponseBytes: maxResponseBytes
            )
        } catch {
            throw .providerUnreachable(url: url.text, reason: error.reason)
        }
    }

    /// Decodes `body` as JSON, naming `what` in the error.
    static func decode<Value: Decodable>(
        _ type: Value.Type,
        from body: Data,
        url: OutboundURL,
        what: String
    ) throws(OpenIDRelyingPartyError) -> Value {
        do {
            return try JSONDecoder().decode(Value.self, from: body)
        } catch let DecodingError.keyNotFound(key, _) {
            throw .invalidProviderResponse(url: url.text, reason: "\(what) has no \(key.stringValue)")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw .invalidProviderResponse(url: url.text, reason: "\(what) has a \(path) of the wrong type")
        } catch {
            throw .invalidProviderResponse(url: url.text, reason: "\(what) is not JSON of the expected form")
        }
    }
}
