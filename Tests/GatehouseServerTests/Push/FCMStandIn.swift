import Crypto
import Foundation
import GatehouseProtocol
import Synchronization
import _CryptoExtras

/// Firebase Cloud Messaging's HTTP v1 API and Google's OAuth 2 token endpoint as Google documents
/// them, behind one ``LoopbackHTTP2Server``. `POST /token` takes a JWT bearer assertion (RFC 7523),
/// verified RS256 against the service account's public key with its `iss`, `scope`, `aud`,
/// `iat` and `exp` checked, and answers an access token; `POST /v1/projects/<id>/messages:send`
/// takes a message with `authorization: Bearer <access token>` and answers 200 `{"name": …}` or
/// Google's error (`error.status`, `error.details[].errorCode` of the FcmError type).
final class FCMStandIn: Sendable {
    /// One `messages:send` request as it arrived, and the status it got.
    struct Received: Sendable {
        var registrationToken: String
        var accessToken: String
        var request: HTTP2Request
        var status: Int
    }

    private struct State {
        var baseURL = ""
        var received: [Received] = []
        var issued: [String] = []
        var revoked: Set<String> = []
        var scripts: [String: [HTTP2Answer]] = [:]
        var violations: [String] = []
    }

    let serviceAccountKey: _RSA.Signing.PrivateKey
    let clientEmail = "gatehouse-push@example-project.iam.gserviceaccount.com"
    let projectID = "example-project"
    private let state = Mutex(State())

    init() throws {
        serviceAccountKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
    }

    /// Tells the stand-in where it is served, for the `aud` it expects.
    func served(at url: String) { state.withLock { $0.baseURL = url } }

    /// The token endpoint, as the service account file names it.
    var tokenURI: String { state.withLock { $0.baseURL } + "/token" }

    /// The service account's key file, as the Firebase console hands it out.
    func serviceAccountFile() throws -> Data {
        try JSONSerialization.data(
            withJSONObject: [
                "type": "service_account", "project_id": projectID, "private_key_id": "0123456789abcdef",
                "private_key": serviceAccountKey.pkcs8PEMRepresentation, "client_email": clientEmail,
                "client_id": "1234567890", "auth_uri": "https://accounts.example/o/oauth2/auth",
                "token_uri": tokenURI,
            ],
            options: [.sortedKeys]
        )
    }

    /// Every `messages:send` request so far, oldest first.
    var received: [Received] { state.withLock { $0.received } }
    /// The access tokens given out so far, oldest first.
    var issued: [String] { state.withLock { $0.issued } }
    /// What the requests got wrong about Google's protocol (should stay empty).
    var violations: [String] { state.withLock { $0.violations } }

    /// The next `messages:send` requests for `registrationToken` get `answers`, in order.
    func script(_ registrationToken: String, _ answers: HTTP2Answer...) {
        state.withLock { $0.scripts[registrationToken, default: []] += answers }
    }

    /// Every access token given out so far is refused from now on (401 `UNAUTHENTICATED`).
    func revokeAccessTokens() {
        state.withLock { $0.revoked.formUnion($0.issued) }
    }

    /// Google's error answer, with an FcmError detail when `errorCode` is given.
    static func refusal(
        _ status: Int,
        _ googleStatus: String,
        errorCode: String? = nil,
        headers: [String: String] = [:]
    ) -> HTTP2Answer {
        var error: [String: Any] = ["code": status, "message": "Stand-in refusal.", "status": googleStatus]
        if let errorCode {
            error["details"] = [
                ["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode]
            ]
        }
        return .json(status, ["error": error], headers: headers)
    }

    /// Answers one request as Google would.
    func answer(_ request: HTTP2Request) -> HTTP2Answer {
        guard request.scheme == "https", request.method == "POST" else {
            return violation("\(request.scheme) \(request.method)", HTTP2Answer(status: 405))
        }
        if request.path == "/token" { return token(request) }
        if request.path == "/v1/projects/\(projectID)/messages:send" { return send(request) }
        return violation("path \(request.path)", Self.refusal(404, "NOT_FOUND"))
    }

    private func token(_ request: HTTP2Request) -> HTTP2Answer {
        let form = request.form
        guard request.headers["content-type"]?.hasPrefix("application/x-www-form-urlencoded") == true,
            form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form["assertion"]
        else {
            return violation("token request \(form.keys.sorted())", .json(400, ["error": "unsupported_grant_type"]))
        }
        if let problem = verify(assertion) { return violation(problem, .json(400, ["error": "invalid_grant"])) }
        return state.withLock { state in
            let token = "ya29.stand-in-\(state.issued.count + 1)-\(UUID().uuidString)"
            state.issued.append(token)
            return .json(200, ["access_token": token, "expires_in": 3599, "token_type": "Bearer"])
        }
    }

    private func send(_ request: HTTP2Request) -> HTTP2Answer {
        guard let authorization = request.headers["authorization"], authorization.hasPrefix("Bearer ") else {
            return violation("no access token", Self.refusal(401, "UNAUTHENTICATED"))
        }
        let accessToken = String(authorization.dropFirst("Bearer ".count))
        guard let object = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any],
            let message = object["message"] as? [String: Any], let registrationToken = message["token"] as? String,
            message["data"] is [String: String]
        else { return violation("the message is not an FCM v1 message", Self.refusal(400, "INVALID_ARGUMENT")) }
        return state.withLock { state in
            let answer: HTTP2Answer
            if !state.issued.contains(accessToken) || state.revoked.contains(accessToken) {
                answer = Self.refusal(401, "UNAUTHENTICATED")
            } else if let next = state.scripts[registrationToken]?.first {
                state.scripts[registrationToken]?.removeFirst()
                answer = next
            } else {
                answer = .json(200, ["name": "projects/\(projectID)/messages/\(state.received.count + 1)"])
            }
            state.received.append(
                Received(
                    registrationToken: registrationToken,
                    accessToken: accessToken,
                    request: request,
                    status: answer.status
                )
            )
            return answer
        }
    }

    private func violation(_ problem: String, _ answer: HTTP2Answer) -> HTTP2Answer {
        state.withLock { $0.violations.append(problem) }
        return answer
    }

    /// Why the assertion is not one Google accepts (nil when it is): RS256 by the service
    /// account's key, `iss` its e-mail, `scope` FCM's, `aud` the token endpoint, at most an hour.
    private func verify(_ assertion: String) -> String? {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Data(base64URLEncoded: parts[0]),
            let claimsData = Data(base64URLEncoded: parts[1]), let signatureData = Data(base64URLEncoded: parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any]
        else { return "the assertion is not a compact JWT" }
        guard header["alg"] as? String == "RS256" else { return "the assertion's header is \(header)" }
        let now = Date().timeIntervalSince1970
        guard claims["iss"] as? String == clientEmail,
            claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging",
            claims["aud"] as? String == tokenURI, let issued = claims["iat"] as? Int,
            let expires = claims["exp"] as? Int,
            Double(issued) <= now + 60, Double(expires) > now, expires - issued <= 3600
        else { return "the assertion's claims are \(claims)" }
        let signature = _RSA.Signing.RSASignature(rawRepresentation: signatureData)
        guard
            serviceAccountKey.publicKey.isValidSignature(
                signature,
                for: SHA256.hash(data: Data((parts[0] + "." + parts[1]).utf8)),
                padding: .insecurePKCS1v1_5
            )
        else { return "the assertion's signature does not verify" }
        return nil
    }
}
