import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import NIOCore
import NIOHTTP1
@_spi(Benchmarks) import PINAuthenticator
import _CryptoExtras

// The operations the load generator measures, each a state machine over one connection. Every
// request is prepared before the timed window where the protocol allows it: DPoP proofs signed
// ahead with unique `jti`s, blinded PIN elements computed ahead. What depends on the server's
// previous answer (a rotated refresh token, a flow's id, a nonce to sign) is done when it arrives,
// and a proof that runs out of its prepared stock is signed live and counted.
//
// All workloads of one run share one event-loop thread, so their shared stocks need no locks:
// hence `@unchecked Sendable`, which only lets them be handed to that thread.

/// Values made before the timed window; one taken after the stock ran out is made in the window
/// and counted (`madeLive`).
final class Stock<Value>: @unchecked Sendable {
    private var values: [Value]
    private var next = 0
    private let make: () throws -> Value
    private(set) var madeLive = 0

    init(count: Int, make: @escaping () throws -> Value) throws {
        self.make = make
        values = try (0..<count).map { _ in try make() }
    }

    func take() -> Value? {
        if next < values.count {
            defer { next += 1 }
            return values[next]
        }
        madeLive += 1
        return try? make()
    }
}

/// DPoP proofs for one key, method and URL (and access token, for a resource request).
func proofStock(
    count: Int,
    key: P256.Signing.PrivateKey,
    method: String,
    url: String,
    accessToken: String? = nil
) throws -> Stock<String> {
    try Stock(count: count) {
        try DPoP.proof(method: method, url: url, accessToken: accessToken, key: key, now: Date())
    }
}

/// Blinded PIN elements, shared by every device (the blinded element depends on the PIN and a
/// fresh random scalar only, not on the user's OPRF key).
func blindedPINStock(count: Int, oprfPublicKey: Data) throws -> Stock<Data> {
    let key = try P384._VOPRF.PublicKey(x963Representation: oprfPublicKey)
    return try Stock(count: count) { try key.blind(Data(benchmarkPIN.utf8)).blindedElement.oprfRepresentation }
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
    let proofs: Stock<String>
    private(set) var lastAccessToken: String

    init(device: WireDevice, baseURL: String, prepared: Int) throws {
        refreshToken = device.refreshToken
        lastAccessToken = device.accessToken
        proofs = try proofStock(count: prepared, key: device.profileKey, method: "POST", url: baseURL + Endpoint.token)
    }

    var canContinueAfterFailure: Bool { false }
    var madeLive: Int { proofs.madeLive }

    func begin() -> PreparedRequest {
        PreparedRequest(
            .POST,
            Endpoint.token,
            headers: [
                ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                ("DPoP", proofs.take() ?? ""),
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
    var madeLive: Int { 0 }
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
    /// Whole requests, each with a proof of its own, made before the timed window.
    let requests: Stock<PreparedRequest>
    let expected: [UInt8]

    init(device: WireDevice, baseURL: String, prepared: Int) throws {
        let key = device.profileKey
        let url = baseURL + Endpoint.profileResource
        let token = device.accessToken
        requests = try Stock(count: prepared) {
            PreparedRequest(
                .GET,
                Endpoint.profileResource,
                headers: [
                    ("Accept", "application/json"), ("Authorization", "DPoP " + token),
                    ("DPoP", try DPoP.proof(method: "GET", url: url, accessToken: token, key: key, now: Date())),
                ]
            )
        }
        expected = Array(#""profile_id":"\#(device.profileID)""#.utf8)
    }

    var canContinueAfterFailure: Bool { true }
    var madeLive: Int { requests.madeLive }

    func begin() -> PreparedRequest {
        // Without a proof, the server refuses it: counted as a wrong answer.
        requests.take() ?? PreparedRequest(.GET, Endpoint.profileResource, headers: [])
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
    let startProofs: Stock<String>
    let blinded: Stock<Data>
    let startBody: ByteBuffer
    private var step = 0
    private var flowID = ""
    private let encoder = JSONEncoder()

    init(device: WireDevice, baseURL: String, blinded: Stock<Data>, prepared: Int) throws {
        self.device = device
        self.baseURL = baseURL
        self.blinded = blinded
        startProofs = try proofStock(
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
    var madeLive: Int { startProofs.madeLive }

    func begin() -> PreparedRequest {
        step = 0
        return PreparedRequest(
            .POST,
            Endpoint.authentication,
            headers: [
                ("Content-Type", "application/json"), ("Accept", "application/json"),
                ("DPoP", startProofs.take() ?? ""),
            ],
            body: startBody
        )
    }

    private func flowMessage(_ message: PINMessage) -> PreparedRequest? {
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
            let message = PINMessage(
                op: .evaluate,
                blinded: blinded.take() ?? Data(),
                oprfKeyDigest: device.oprfKeyDigest
            )
            return flowMessage(message).map(Next.send) ?? .failed("could not make the evaluate message")
        case 2:
            guard let payload = flow.challenge?.data,
                let challenge = try? jsonDecoder.decode(PINChallengePayload.self, from: payload),
                let evaluation = challenge.evaluation, !evaluation.isEmpty, let nonce = challenge.nonce
            else { return .failed("no evaluation: \(answer.text.prefix(300))") }
            guard
                let signature = try? device.pinKey.signature(
                    for: device.pinSigningInput(purpose: "authenticate", nonce: nonce)
                )
            else { return .failed("could not sign") }
            let message = PINMessage(op: .prove, signature: signature.derRepresentation)
            return flowMessage(message).map(Next.send) ?? .failed("could not make the prove message")
        default:
            guard flow.stage == nil, let tokens = flow.tokens, !tokens.accessToken.isEmpty else {
                return .failed("no session: \(answer.text.prefix(300))")
            }
            return .finished
        }
    }
}
