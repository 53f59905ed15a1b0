import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import Synchronization

/// One request to the token server: JSON body, DPoP proof, access token; a refusal becomes the
/// domain error it stands for, so callers catch the same types in-process and over HTTP.
struct ServerCalls: Sendable {
    let transport: any TokenServerTransport
    let clock: any WallClock
    /// The server's latest DPoP nonce (RFC 9449 §8), put into the next proofs.
    let nonce = DPoPNonceMemory()

    /// A refusal as the server sent it, with the domain error it stands for.
    struct Refusal: Error {
        var error: any DomainError
        var body: ErrorBody?
        /// The HTTP status.
        var status = 0
    }

    func call<Response: Decodable>(
        _ method: String,
        _ path: String,
        body: (some Encodable & Sendable)? = String?.none,
        key: P256.Signing.PrivateKey? = nil,
        accessToken: String? = nil,
        errors: WireErrors.Context = .flows
    ) async throws -> Response {
        do {
            return try await exchange(method, path, body: body, key: key, accessToken: accessToken, errors: errors)
        } catch let refusal as Refusal {
            throw refusal.error
        }
    }

    /// As ``call(_:_:body:key:accessToken:)``, but a refusal keeps its wire body.
    func exchange<Response: Decodable>(
        _ method: String,
        _ path: String,
        body: (some Encodable & Sendable)? = String?.none,
        key: P256.Signing.PrivateKey? = nil,
        accessToken: String? = nil,
        errors: WireErrors.Context = .flows
    ) async throws -> Response {
        var response = try await transport.send(
            try self.request(method, path, body: body, key: key, accessToken: accessToken)
        )
        // A server that wants nonces says so once; the request goes again with the one it sent.
        if key != nil, nonce.remember(response), Self.asksForNonce(response) {
            response = try await transport.send(
                try self.request(method, path, body: body, key: key, accessToken: accessToken)
            )
            nonce.remember(response)
        }
        guard (200..<300).contains(response.status) else { throw refusal(response, errors: errors) }
        do {
            return try WireCoding.decode(Response.self, from: response.body)
        } catch {
            throw GenericError(.requestInvalid, message: "The server's answer to \(path) is malformed.")
        }
    }

    /// A request with its JSON body, DPoP proof and access token.
    func request(
        _ method: String,
        _ path: String,
        body: (some Encodable & Sendable)? = String?.none,
        key: P256.Signing.PrivateKey? = nil,
        accessToken: String? = nil
    ) throws -> WireRequest {
        var headers: [String: String] = ["Accept": "application/json"]
        var data = Data()
        if let body {
            data = try WireCoding.encode(body)
            headers["Content-Type"] = "application/json"
        }
        if let key {
            // RFC 9449: htu is the URL without its query.
            let target = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
            headers["DPoP"] = try DPoP.proof(
                method: method,
                url: transport.baseURL + target,
                accessToken: accessToken,
                nonce: nonce.current,
                key: key,
                now: clock.now
            )
        }
        if let accessToken { headers["Authorization"] = "DPoP \(accessToken)" }
        return WireRequest(method: method, path: path, headers: headers, body: data)
    }

    /// Whether `response` refuses a proof for want of the server's nonce.
    static func asksForNonce(_ response: WireResponse) -> Bool {
        guard response.status == 400 || response.status == 401 else { return false }
        if response.header("WWW-Authenticate")?.contains(#"error="use_dpop_nonce""#) == true { return true }
        return (try? WireCoding.decode(ErrorBody.self, from: response.body))?.error == "use_dpop_nonce"
    }

    /// The refusal an error response stands for.
    func refusal(_ response: WireResponse, errors: WireErrors.Context) -> Refusal {
        guard let error = try? WireCoding.decode(ErrorBody.self, from: response.body) else {
            return Refusal(
                error: GenericError(.unknown, message: "The server answered HTTP \(response.status)."),
                status: response.status
            )
        }
        return Refusal(
            error: WireErrors.domainError(error, status: response.status, context: errors),
            body: error,
            status: response.status
        )
    }
}

/// The latest `DPoP-Nonce` a server sent, shared by every call to it.
final class DPoPNonceMemory: Sendable {
    private let value = Mutex<String?>(nil)

    var current: String? { value.withLock { $0 } }

    /// Keeps the response's nonce, if it has one; returns whether it did.
    @discardableResult
    func remember(_ response: WireResponse) -> Bool {
        guard let nonce = response.header("DPoP-Nonce"), !nonce.isEmpty, nonce.utf8.count <= 256 else { return false }
        value.withLock { $0 = nonce }
        return true
    }
}
