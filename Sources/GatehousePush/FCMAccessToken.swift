import Foundation
import GatehouseKernel
import GatehouseServer
import Logging

/// The OAuth 2 access token FCM wants in every request's `authorization`: obtained at the service
/// account's token endpoint with a JWT bearer assertion (RFC 7523: RS256, `iss` the service
/// account, `scope` FCM's, `aud` its `token_uri` wherever the request goes, an hour at most),
/// kept until five minutes before it expires, and dropped when FCM answers 401. One request for a
/// token at a time.
actor FCMAccessToken {
    /// The scope FCM's HTTP v1 API needs.
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    private struct Claims: Encodable {
        var iss: String
        var scope: String
        var aud: String
        var iat: Int
        var exp: Int
    }

    private struct Answer: Decodable {
        var access_token: String
        var expires_in: Int?
    }

    private typealias Token = (value: String, renewAt: Double)

    private let account: FCMServiceAccount
    private let tokenURL: String
    private let http: PushHTTPClient
    private let clock: any WallClock
    private let logger: Logger
    private var cached: Token?
    private var fetching: Task<Token, any Error>?

    init(account: FCMServiceAccount, tokenURL: String, http: PushHTTPClient, clock: any WallClock, logger: Logger) {
        self.account = account
        self.tokenURL = tokenURL
        self.http = http
        self.clock = clock
        self.logger = logger
    }

    /// The token to send now: the one kept while it is fresh, else a new one from the endpoint.
    func current() async throws(PushDeliveryError) -> String {
        if let cached, clock.now.timeIntervalSince1970 < cached.renewAt { return cached.value }
        let task: Task<Token, any Error>
        if let fetching {
            task = fetching
        } else {
            task = Task { [account, tokenURL, http, clock, logger] in
                try await Self.fetch(account: account, tokenURL: tokenURL, http: http, clock: clock, logger: logger)
            }
            fetching = task
        }
        do {
            // The waiters are the pushes being tried, cancelled only when the server stops: the
            // fetch then stops too rather than hold the shutdown up to its timeout.
            let token = try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
            if fetching == task { fetching = nil }
            cached = token
            return token.value
        } catch {
            if fetching == task { fetching = nil }
            throw error as? PushDeliveryError ?? PushDeliveryError(.temporary, reason: "no access token")
        }
    }

    /// Stops a fetch under way; the pushes waiting for it fail as temporary.
    func shutdown() {
        fetching?.cancel()
        fetching = nil
    }

    /// Forgets `token`, which FCM refused (401): the next push gets a new one.
    func discard(_ token: String) {
        if cached?.value == token { cached = nil }
    }

    private static func fetch(
        account: FCMServiceAccount,
        tokenURL: String,
        http: PushHTTPClient,
        clock: any WallClock,
        logger: Logger
    ) async throws(PushDeliveryError) -> Token {
        let now = clock.now.timeIntervalSince1970
        let assertion: String
        do {
            var header = ["alg": "RS256", "typ": "JWT"]
            if let kid = account.privateKeyID { header["kid"] = kid }
            assertion = try CompactJWS.make(
                header: header,
                claims: Claims(
                    iss: account.clientEmail,
                    scope: scope,
                    aud: account.tokenURI,
                    iat: Int(now),
                    exp: Int(now) + 3600
                ),
                sign: account.sign
            )
        } catch {
            throw PushDeliveryError(.rejected, reason: "the service account's assertion could not be signed")
        }
        // RFC 7523's grant type, form-encoded; the assertion is base64url, safe as it is.
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let answer = try await http.post(
            tokenURL,
            headers: [("content-type", "application/x-www-form-urlencoded"), ("accept", "application/json")],
            body: Data(form.utf8)
        )
        switch answer.status {
        case 200:
            guard let decoded = try? JSONDecoder().decode(Answer.self, from: answer.body),
                PushSenders.isPlainText(decoded.access_token)
            else { throw PushDeliveryError(.temporary, reason: "the token endpoint's answer has no access token") }
            let lifetime = Double(min(max(decoded.expires_in ?? 3600, 60), 86400))
            logger.debug("FCM access token obtained", metadata: ["expires_in": "\(Int(lifetime))"])
            return (decoded.access_token, now + max(lifetime - 300, lifetime / 2))
        case 429, 500...599:
            throw PushDeliveryError(
                .temporary,
                reason: "the token endpoint answered \(answer.status)",
                retryAfter: PushHTTPClient.retryAfter(answer.headers, now: clock.now)
            )
        default:
            let code = (try? JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["error"] as? String
            throw PushDeliveryError(
                .rejected,
                reason: "the token endpoint refused the service account: \(answer.status) "
                    + "\(code.flatMap { PushSenders.isPlainWord($0) ? $0 : nil } ?? "(no error code)")"
            )
        }
    }
}
