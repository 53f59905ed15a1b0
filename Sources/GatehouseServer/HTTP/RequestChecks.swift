import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

// What every endpoint checks of a request, and how it answers.

extension TokenServer {
    /// Refuses a request whose method is not `method` (for the routes that serve a path prefix).
    func require(_ method: String, _ request: WireRequest) throws {
        guard request.method == method else { throw Self.methodNotAllowed(request, allowed: method) }
    }

    /// 405, naming the methods the path accepts in `Allow`.
    static func methodNotAllowed(_ request: WireRequest, allowed: String) -> ServerError {
        var error = ServerError(405, "invalid_request", "\(request.path) accepts \(allowed) only.")
        error.headers["Allow"] = allowed
        return error
    }

    /// Decodes a JSON body strictly: size, media type, syntax, and every field's type, with the
    /// field named in the message. Unknown fields are refused.
    func decodeBody<T: Decodable>(_ type: T.Type, _ request: WireRequest, oauth: Bool = false) throws -> T {
        do {
            return try RequestBody.decode(
                type,
                from: request,
                maxBytes: configuration.maxRequestBytes,
                allowingForm: oauth
            )
        } catch {
            throw ServerError(error.status, "invalid_request", error.description)
        }
    }

    /// Checks the request's DPoP proof (not yet its single use: the store records it with the
    /// change it authorises).
    func proof(_ request: WireRequest, accessToken: String? = nil) throws -> ServerStore.ProofUse {
        guard let header = request.header("DPoP") else { throw ServerError.invalidProof("A DPoP proof is required.") }
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        let verified: DPoP.VerifiedProof
        do {
            verified = try DPoP.verify(
                header,
                method: request.method,
                url: publicURL + path,
                accessToken: accessToken,
                now: clock.now
            )
        } catch {
            throw ServerError.invalidProof("The DPoP proof is not valid: \(error.reason).")
        }
        if configuration.requireDPoPNonce {
            guard let nonce = verified.nonce, nonces.accepts(nonce, now: now) else {
                throw ServerError.useDPoPNonce(
                    "The DPoP proof must carry the nonce from the DPoP-Nonce response header."
                )
            }
        }
        return ServerStore.ProofUse(keyThumbprint: verified.keyThumbprint, jti: verified.jti, now: now)
    }

    /// Refuses the request with 429 and `Retry-After` when its address has used up `limiter`.
    func limit(_ request: WireRequest, by limiter: RateLimiter) throws {
        guard let seconds = limiter.retryAfter(forAddress: request.clientAddress, now: now) else { return }
        metrics.event("rate_limited")
        throw ServerError.tooManyRequests(retryAfter: seconds)
    }

    func json(_ value: some Encodable, status: Int = 200) throws -> WireResponse {
        json(encoded: try WireCoding.encode(value), status: status)
    }

    /// A JSON answer already encoded.
    func json(encoded body: Data, status: Int = 200) -> WireResponse {
        WireResponse(
            status: status,
            headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: body
        )
    }

    var now: Double { clock.now.timeIntervalSince1970 }
}
