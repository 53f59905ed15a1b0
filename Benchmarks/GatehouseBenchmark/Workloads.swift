import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import NIOCore
import NIOHTTP1
import _CryptoExtras

// The operations the load generator measures, each a state machine over one connection. Every
// request is prepared before the timed window where the protocol allows it: DPoP proofs signed
// ahead with unique `jti`s, blinded PIN elements computed ahead. What depends on the server's
// previous answer (a rotated refresh token, a flow's id, a nonce to sign) is done when it arrives,
// and a proof that runs out of its prepared stock is signed live and counted.
//
// All workloads of one run share one event-loop thread, so their shared stocks need no locks:
// hence `@unchecked Sendable`, which only lets them be handed to that thread.

/// Proofs signed ahead for one key, method and URL (and access token, for a resource request).
final class ProofStock: @unchecked Sendable {
    private var proofs: [String]
    private var next = 0
    let key: P256.Signing.PrivateKey
    let method: String
    let url: String
    let accessToken: String?
    /// Proofs the stock ran out of and were signed in the timed window.
    private(set) var signedLive = 0

    init(count: Int, key: P256.Signing.PrivateKey, method: String, url: String, accessToken: String? = nil) throws {
        self.key = key
        self.method = method
        self.url = url
        self.accessToken = accessToken
        let now = Date()
        proofs = try (0..<count).map { _ in
            try DPoP.proof(method: method, url: url, accessToken: accessToken, key: key, now: now)
        }
    }

    func take() -> String {
        if next < proofs.count {
            defer { next += 1 }
            return proofs[next]
        }
        signedLive += 1
        return (try? DPoP.proof(method: method, url: url, accessToken: accessToken, key: key, now: Date())) ?? ""
    }
}

/// Blinded PIN elements computed ahead, shared by every device (the blinded element depends on
/// the PIN and a fresh random scalar only, not on the user's OPRF key).
final class BlindedStock: @unchecked Sendable {
    private var elements: [Data]
    private var next = 0
    private(set) var blindedLive = 0
    let oprfPublicKey: P384._VOPRF.PublicKey

    init(count: Int, oprfPublicKey: Data) throws {
        self.oprfPublicKey = try P384._VOPRF.PublicKey(x963Representation: oprfPublicKey)
        let key = self.oprfPublicKey
        elements = try (0..<count).map { _ in
            try key.blind(Data(benchmarkPIN.utf8)).blindedElement.oprfRepresentation
        }
    }

    func take() -> Data {
        if next < elements.count {
            defer { next += 1 }
            return elements[next]
        }
        blindedLive += 1
        return (try? oprfPublicKey.blind(Data(benchmarkPIN.utf8)).blindedElement.oprfRepresentation) ?? Data()
    }
}

private let jsonDecoder = JSONDecoder()

private func decode<T: Decodable>(_ type: T.Type, _ answer: Answer) -> T? {
    try? jsonDecoder.decode(type, from: Data(answer.body.readableBytesView))
}

private func refusal(_ answer: Answer) -> Next {
    .failed("HTTP \(answer.status): \(answer.text.prefix(300))")
}

// MARK: - Refresh grant

/// `grant_type=refresh_token` with DPoP, back to back: each answer's refresh token is the next
/// request's. A wrong answer breaks the chain, so this client stops.
final class RefreshWorkload: Workload, @unchecked Sendable {
    private var refreshToken: String
    let proofs: ProofStock
    private(set) var lastAccessToken: String

    init(device: WireDevice, baseURL: String, prepared: Int) throws {
        refreshToken = device.refreshToken
        lastAccessToken = device.accessToken
        proofs = try ProofStock(count: prepared, key: device.profileKey, method: "POST", url: baseURL + Endpoint.token)
    }

    var canContinueAfterFailure: Bool { false }

    func begin() -> PreparedRequest {
        PreparedRequest(
            .POST,
            Endpoint.token,
            headers: [
                ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                ("DPoP", proofs.take()),
            ],
            body: ByteBuffer(string: "grant_type=refresh_token&refresh_token=" + refreshToken)
        )
    }

    func next(after answer: Answer) -> Next {
        guard answer.status == 200 else { return refusal(answer) }
        guard let tokens = decode(TokenResponse.self, answer), tokens.refreshToken != refreshToken,
            !tokens.accessToken.isEmpty
        else { return .failed("the grant did not rotate the refresh token: \(answer.text.prefix(300))") }
        refreshToken = tokens.refreshToken
        lastAccessToken = tokens.accessToken
        return .finished
    }

    /// The session as the chain left it (for the workloads that follow).
    func session(of device: WireDevice) -> WireDevice {
        var updated = device
        updated.refreshToken = refreshToken
        updated.accessToken = lastAccessToken
        return updated
    }
}

// MARK: - Introspection

/// RFC 7662 introspection by a resource server (HTTP Basic): the same prepared request each time;
/// right only when the token is active and names its user.
final class IntrospectionWorkload: Workload, @unchecked Sendable {
    let request: PreparedRequest
    let expected: [[UInt8]]

    init(device: WireDevice, resourceServer: String, secret: String) {
        let credentials = Data("\(resourceServer):\(secret)".utf8).base64EncodedString()
        request = PreparedRequest(
            .POST,
            Endpoint.introspect,
            headers: [
                ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                ("Authorization", "Basic \(credentials)"),
            ],
            body: ByteBuffer(string: "token=" + device.accessToken)
        )
        expected = [Array(#""active":true"#.utf8), Array(#""sub":"\#(device.subject)""#.utf8)]
    }

    var canContinueAfterFailure: Bool { true }
    func begin() -> PreparedRequest { request }

    func next(after answer: Answer) -> Next {
        guard answer.status == 200 else { return refusal(answer) }
        guard expected.allSatisfy(answer.contains) else { return .failed("not active: \(answer.text.prefix(300))") }
        return .finished
    }
}

// MARK: - Token validation

/// A protected resource of the server itself (`GET /v1/resource/profile`): the DPoP-bound access
/// token checked with a fresh proof (signature, `ath`, single use) and the session looked up.
final class ValidationWorkload: Workload, @unchecked Sendable {
    let proofs: ProofStock
    let authorization: String
    let expected: [UInt8]
    /// Whole requests, made from the stock of proofs before the timed window.
    private var requests: [PreparedRequest] = []
    private var next = 0

    init(device: WireDevice, baseURL: String, prepared: Int) throws {
        proofs = try ProofStock(
            count: prepared,
            key: device.profileKey,
            method: "GET",
            url: baseURL + Endpoint.profileResource,
            accessToken: device.accessToken
        )
        authorization = "DPoP " + device.accessToken
        expected = Array(#""profile_id":"\#(device.profileID)""#.utf8)
        requests = (0..<prepared).map { _ in request() }
    }

    var canContinueAfterFailure: Bool { true }

    private func request() -> PreparedRequest {
        PreparedRequest(
            .GET,
            Endpoint.profileResource,
            headers: [("Accept", "application/json"), ("Authorization", authorization), ("DPoP", proofs.take())]
        )
    }

    func begin() -> PreparedRequest {
        guard next < requests.count else { return request() }
        defer { next += 1 }
        return requests[next]
    }

    func next(after answer: Answer) -> Next {
        guard answer.status == 200 else { return refusal(answer) }
        guard answer.contains(expected) else { return .failed("another profile: \(answer.text.prefix(300))") }
        return .finished
    }
}

// MARK: - PIN authentication

/// A whole PIN authentication: start the flow (proof signed ahead), send a blinded PIN (computed
/// ahead; the server counts the attempt and evaluates it), sign the server's nonce with the
/// PIN-protected key and receive the session. The flow's id is known only from the server's
/// answer, so the two flow messages' proofs are signed live; right only when tokens come back.
///
/// A real device unblinds the evaluation to unseal its PIN-protected key; this one holds the key
/// already, so the client's share of the OPRF is not repeated here (the server's is untouched).
final class PINWorkload: Workload, @unchecked Sendable {
    let device: WireDevice
    let baseURL: String
    let startProofs: ProofStock
    let blinded: BlindedStock
    let startBody: ByteBuffer
    private var step = 0
    private var flowID = ""
    private let encoder = JSONEncoder()

    init(device: WireDevice, baseURL: String, blinded: BlindedStock, prepared: Int) throws {
        self.device = device
        self.baseURL = baseURL
        self.blinded = blinded
        startProofs = try ProofStock(
            count: prepared,
            key: device.profileKey,
            method: "POST",
            url: baseURL + Endpoint.authentication
        )
        startBody = ByteBuffer(
            bytes: try WireCoding.encode(AuthenticationStartRequest(profileID: device.profileID, authenticator: "pin"))
        )
    }

    var canContinueAfterFailure: Bool { true }

    func begin() -> PreparedRequest {
        step = 0
        return PreparedRequest(
            .POST,
            Endpoint.authentication,
            headers: [
                ("Content-Type", "application/json"), ("Accept", "application/json"), ("DPoP", startProofs.take()),
            ],
            body: startBody
        )
    }

    private func flowMessage(_ message: PINWireMessage) -> PreparedRequest? {
        let path = Endpoint.flow(flowID)
        guard let inner = try? encoder.encode(message),
            let body = try? encoder.encode(FlowMessageRequest(message: inner)),
            let proof = try? DPoP.proof(method: "POST", url: baseURL + path, key: device.profileKey, now: Date())
        else { return nil }
        return PreparedRequest(
            .POST,
            path,
            headers: [("Content-Type", "application/json"), ("Accept", "application/json"), ("DPoP", proof)],
            body: ByteBuffer(bytes: body)
        )
    }

    func next(after answer: Answer) -> Next {
        guard answer.status == 200 else { return refusal(answer) }
        guard let flow = decode(FlowResponse.self, answer) else { return .failed("not a flow: \(answer.text)") }
        step += 1
        switch step {
        case 1:
            guard flow.stage == .authenticate("pin") else { return .failed("stage \(String(describing: flow.stage))") }
            flowID = flow.flowID
            let message = PINWireMessage(op: "evaluate", blinded: blinded.take(), oprfKeyDigest: device.oprfKeyDigest)
            return flowMessage(message).map(Next.send) ?? .failed("could not make the evaluate message")
        case 2:
            guard let payload = flow.challenge?.data,
                let challenge = try? jsonDecoder.decode(PINWireChallenge.self, from: payload),
                let evaluation = challenge.evaluation, !evaluation.isEmpty, let nonce = challenge.nonce
            else { return .failed("no evaluation: \(answer.text.prefix(300))") }
            guard
                let signature = try? device.pinKey.signature(
                    for: device.pinSigningInput(purpose: "authenticate", nonce: nonce)
                )
            else { return .failed("could not sign") }
            let message = PINWireMessage(op: "prove", signature: signature.derRepresentation)
            return flowMessage(message).map(Next.send) ?? .failed("could not make the prove message")
        default:
            guard flow.stage == nil, let tokens = flow.tokens, !tokens.accessToken.isEmpty else {
                return .failed("no session: \(answer.text.prefix(300))")
            }
            return .finished
        }
    }
}
