import Crypto
import Foundation
import GatehouseProtocol
import Synchronization

/// Apple Push Notification service as Apple documents it ("Sending notification requests to
/// APNs", "Establishing a token-based connection to APNs"), behind a ``LoopbackHTTP2Server``:
/// `POST /3/device/<token>` over HTTP/2 with `authorization: bearer <provider token>`, the
/// provider token an ES256 JWT (`alg`, `kid`; `iss`, `iat`) verified against the team key's
/// public half, the `apns-*` headers checked, and Apple's answers: 200 with `apns-id`, or a
/// status with `{"reason": …}`. Tests script answers per device token and can expire every
/// provider token seen so far.
final class APNsStandIn: Sendable {
    /// One notification request as it arrived, and the status it got.
    struct Received: Sendable {
        var deviceToken: String
        var providerToken: String
        var request: HTTP2Request
        var status: Int
    }

    private struct State {
        var received: [Received] = []
        var scripts: [String: [HTTP2Answer]] = [:]
        var expired: Set<String> = []
        var violations: [String] = []
    }

    /// The team's provider key, as Apple hands it out (`AuthKey_<keyID>.p8`).
    let teamKey = P256.Signing.PrivateKey()
    let keyID = "ABC123DEFG"
    let teamID = "DEF123GHIJ"
    let topic = "com.example.gatehouse"
    private let state = Mutex(State())

    /// The key file's contents: PKCS#8 PEM.
    var keyFileContents: String { teamKey.pemRepresentation }

    /// Every notification request so far, oldest first.
    var received: [Received] { state.withLock { $0.received } }

    /// What the requests got wrong about Apple's protocol (should stay empty).
    var violations: [String] { state.withLock { $0.violations } }

    /// The next requests for `deviceToken` get `answers`, in order; then 200 again.
    func script(_ deviceToken: String, _ answers: HTTP2Answer...) {
        state.withLock { $0.scripts[deviceToken, default: []] += answers }
    }

    /// Every provider token seen so far is refused from now on (403 `ExpiredProviderToken`).
    func expireProviderTokens() {
        state.withLock { $0.expired.formUnion($0.received.map(\.providerToken)) }
    }

    /// Apple's error answer.
    static func refusal(_ status: Int, _ reason: String, headers: [String: String] = [:]) -> HTTP2Answer {
        var body: [String: Any] = ["reason": reason]
        if status == 410 { body["timestamp"] = Int(Date().timeIntervalSince1970 * 1000) }
        return .json(status, body, headers: headers.merging(["apns-id": UUID().uuidString]) { $1 })
    }

    /// Answers one request as APNs would.
    func answer(_ request: HTTP2Request) -> HTTP2Answer {
        let prefix = "/3/device/"
        guard request.method == "POST", request.path.hasPrefix(prefix) else {
            return violation("\(request.method) \(request.path)", Self.refusal(405, "MethodNotAllowed"))
        }
        guard request.scheme == "https" else {
            return violation("scheme \(request.scheme)", Self.refusal(400, "BadPath"))
        }
        let deviceToken = String(request.path.dropFirst(prefix.count))
        guard let authorization = request.headers["authorization"], authorization.hasPrefix("bearer ") else {
            return violation("no provider token", Self.refusal(403, "MissingProviderToken"))
        }
        let providerToken = String(authorization.dropFirst("bearer ".count))
        let answer = state.withLock { state -> HTTP2Answer in
            let answer: HTTP2Answer
            if let problem = verify(providerToken) {
                state.violations.append(problem)
                answer = Self.refusal(403, "InvalidProviderToken")
            } else if state.expired.contains(providerToken) {
                answer = Self.refusal(403, "ExpiredProviderToken")
            } else if let problem = headerProblem(request) {
                state.violations.append(problem.1)
                answer = Self.refusal(400, problem.0)
            } else if let next = state.scripts[deviceToken]?.first {
                state.scripts[deviceToken]?.removeFirst()
                answer = next
            } else {
                answer = HTTP2Answer(status: 200, headers: ["apns-id": UUID().uuidString])
            }
            state.received.append(
                Received(
                    deviceToken: deviceToken,
                    providerToken: providerToken,
                    request: request,
                    status: answer.status
                )
            )
            return answer
        }
        return answer
    }

    private func violation(_ problem: String, _ answer: HTTP2Answer) -> HTTP2Answer {
        state.withLock { $0.violations.append(problem) }
        return answer
    }

    /// Why the provider token is not one Apple accepts (nil when it is): ES256 over
    /// `header.claims` by the team key, `kid` the key id, `iss` the team id, `iat` within the hour.
    private func verify(_ token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Data(base64URLEncoded: parts[0]),
            let claimsData = Data(base64URLEncoded: parts[1]), let signatureData = Data(base64URLEncoded: parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any]
        else { return "the provider token is not a compact JWT" }
        guard header["alg"] as? String == "ES256", header["kid"] as? String == keyID else {
            return "the provider token's header is \(header)"
        }
        guard claims["iss"] as? String == teamID, let issued = claims["iat"] as? Int,
            abs(Double(issued) - Date().timeIntervalSince1970) < 3600
        else { return "the provider token's claims are \(claims)" }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            teamKey.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else { return "the provider token's signature does not verify" }
        return nil
    }

    /// Apple's reason and the problem, when the notification's headers or payload are wrong.
    private func headerProblem(_ request: HTTP2Request) -> (String, String)? {
        let headers = request.headers
        if headers["apns-topic"] != topic {
            return ("DeviceTokenNotForTopic", "apns-topic \(headers["apns-topic"] ?? "-")")
        }
        if headers["apns-push-type"] != "alert" { return ("InvalidPushType", "apns-push-type") }
        if headers["apns-priority"] != "10" { return ("BadPriority", "apns-priority") }
        if headers["apns-expiration"].flatMap(Int.init) == nil { return ("BadExpirationDate", "apns-expiration") }
        guard let collapse = headers["apns-collapse-id"], (1...64).contains(collapse.utf8.count) else {
            return ("BadCollapseId", "apns-collapse-id")
        }
        guard let payload = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any],
            payload["aps"] is [String: Any]
        else { return ("PayloadEmpty", "no aps dictionary") }
        return nil
    }
}
