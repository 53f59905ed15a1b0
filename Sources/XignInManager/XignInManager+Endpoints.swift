import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import GatehouseServer
import Logging
import XignInValidators
import _CryptoExtras

/// A refusal with its status and OAuth-style body.
struct Refusal: Error {
    var status: Int
    var body: Data
    /// `Allow` for a 405, `Retry-After` for a 429.
    var headers: [String: String] = [:]

    init(_ status: Int, _ error: String, _ description: String, remaining: Int? = nil) {
        self.status = status
        let body = ErrorBody(error: error, errorDescription: description, remainingFailureCount: remaining)
        self.body = (try? WireCoding.encode(body)) ?? Data()
    }

    init(attributes refusal: ManagerRegistrationRefusal) {
        status = 422
        body = (try? WireCoding.encode(refusal)) ?? Data()
    }

    var response: WireResponse {
        WireResponse(
            status: status,
            headers: headers.merging(["Content-Type": "application/json", "Cache-Control": "no-store"]) { $1 },
            body: body
        )
    }
}

/// The longest attribute value, alias or arbitrary attribute accepted, in characters.
private let maximumValueLength = 1024
/// The most arbitrary attributes one registration may carry.
private let maximumArbitraryAttributes = 50

extension XignInManager {
    func json(_ value: some Encodable, status: Int = 200) throws -> WireResponse {
        WireResponse(
            status: status,
            headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: try WireCoding.encode(value)
        )
    }

    /// Strict JSON: size, media type, syntax, field types, no unknown fields.
    func decode<T: Decodable>(_ type: T.Type, _ request: WireRequest) throws -> T {
        do {
            return try RequestBody.decode(type, from: request, maxBytes: maxRequestBytes)
        } catch {
            throw Refusal(error.status, "invalid_request", error.description)
        }
    }

    /// A code that has had as many PIN evaluations as it may.
    static var lockedCode: Refusal {
        Refusal(400, "invalid_grant", "The activation code is locked after too many wrong PINs.")
    }

    static func hash(_ text: String) -> Data { Data(SHA256.hash(data: Data(text.utf8))) }

    static func randomToken(_ count: Int = 24) -> String {
        Data.random(count: count).base64URLEncodedString
    }

    /// An activation code: 10 characters from an alphabet without look-alikes (about 50 bits).
    static func activationCode() -> String {
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<10).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
    }

    /// Evaluates a blinded PIN with the key in `keyBytes`; returns the evaluation and the key's
    /// public half (X9.63), parsing the key once.
    private func evaluate(_ blinded: String, keyBytes: Data) async throws -> (evaluation: Data, publicKey: Data) {
        guard let element = Data(base64URLEncoded: blinded) else {
            throw Refusal(400, "invalid_request", "Invalid field blinded: expected base64url.")
        }
        return try await cpuWork.run {
            let key = try P384._VOPRF.PrivateKey(rawRepresentation: keyBytes)
            let point: P384._VOPRF.BlindedElement
            do {
                point = try P384._VOPRF.BlindedElement(oprfRepresentation: element)
            } catch {
                throw Refusal(400, "invalid_request", "Invalid field blinded: not a P-384 point.")
            }
            return (try key.evaluate(point).rawRepresentation, key.publicKey.x963Representation)
        }
    }

    // MARK: - PIN evaluation

    func evaluatePin(_ request: WireRequest) async throws -> WireResponse {
        let body = try decode(PinEvaluationRequest.self, request)
        let now = now
        guard let code = body.activationCode else {
            // Registration: a fresh key for this account-to-be, stored for ten minutes, so the
            // number one source may ask for is limited.
            try requireOpen()
            // This instance's limit first (a flood stops in memory), then the one all share.
            var wait = evaluationLimiter.retryAfter(forAddress: request.clientAddress, now: now)
            if wait == nil {
                wait = try await sharedEvaluations.retryAfter(forAddress: request.clientAddress, now: now)
            }
            if let seconds = wait {
                var refusal = Refusal(
                    429,
                    "too_many_requests",
                    "Too many PIN evaluations from this address; try again in \(seconds) s."
                )
                refusal.headers["Retry-After"] = String(seconds)
                throw refusal
            }
            let keyBytes = P384._VOPRF.PrivateKey().rawRepresentation
            let (evaluation, publicKey) = try await evaluate(body.blinded, keyBytes: keyBytes)
            let token = Self.randomToken()
            try await store.keepPinKey(keyBytes, token: token, now: now)
            return try json(
                PinEvaluationResponse(
                    evaluation: evaluation.base64URLEncodedString,
                    oprfPublicKey: publicKey.base64URLEncodedString,
                    token: token,
                    nonce: nil
                )
            )
        }
        // Activation: the account's key; one counted attempt, refused at the limit.
        let codeHash = Self.hash(code.uppercased())
        let maximum = configuration.maxActivationAttempts
        let keyBytes: Data
        switch try await store.activationKey(codeHash: codeHash, maximumAttempts: maximum, now: now) {
        case .key(let key): keyBytes = key
        case .invalid: throw Refusal(400, "invalid_grant", "The activation code is not valid.")
        case .locked: throw Self.lockedCode
        }
        let (evaluation, publicKey) = try await evaluate(body.blinded, keyBytes: keyBytes)
        let token = Self.randomToken()
        let nonce = Data.random(count: 32)
        guard
            try await store.reserveActivationAttempt(
                codeHash: codeHash,
                maximumAttempts: maximum,
                token: token,
                nonce: nonce,
                now: now
            )
        else { throw Self.lockedCode }
        return try json(
            PinEvaluationResponse(
                evaluation: evaluation.base64URLEncodedString,
                oprfPublicKey: publicKey.base64URLEncodedString,
                token: token,
                nonce: nonce.base64URLEncodedString
            )
        )
    }
}
