import Foundation
public import GatehouseKernel
public import GatehouseProtocol
public import GatehouseServer
public import Logging

/// Sends pushes through Firebase Cloud Messaging's HTTP v1 API:
/// `POST /v1/projects/<project_id>/messages:send` with an OAuth 2 access token the service
/// account obtains for itself, kept until shortly before it expires and obtained anew once when
/// FCM answers 401.
///
/// FCM's answers become what the token server acts on: 200 is delivered; the error code
/// `UNREGISTERED` is a dead registration token (`PushDeliveryError` `unregistered`: the server
/// disenrols the device); 429 (`QUOTA_EXCEEDED`), 500 (`INTERNAL`), 502, 503 (`UNAVAILABLE`)
/// and 504 are temporary (tried again,
/// after `Retry-After` when given); 400 (`INVALID_ARGUMENT`) and any other answer are refused
/// for good.
public final class FCMSender: PushTransport {
    private let sendURL: String
    private let accessTokens: FCMAccessToken
    private let http: PushHTTPClient
    private let clock: any WallClock
    private let logger: Logger

    /// A sender for `configuration`: reads the service account's key file (which must be private
    /// to its owner) and the CA file. Throws a ``PushSetupError`` naming the file and the fix
    /// when either is missing or unusable.
    public init(
        configuration: PushConfiguration.FCM,
        clock: any WallClock = SystemWallClock(),
        logger: Logger
    ) throws(PushSetupError) {
        let settings = "server.mobileAuth.push.fcm"
        let data = try PrivateKeyFile.read(
            configuration.serviceAccountFile,
            key: "\(settings).serviceAccountFile",
            missing: "download a key for the service account from the Firebase console (Project settings, Service "
                + "accounts) and name its path"
        )
        let account = try FCMServiceAccount(
            json: data,
            path: configuration.serviceAccountFile,
            key: "\(settings).serviceAccountFile"
        )
        let http = try PushHTTPClient(caFile: configuration.caFile, key: "\(settings).caFile")
        sendURL = "\(configuration.baseURL)/v1/projects/\(account.projectID)/messages:send"
        accessTokens = FCMAccessToken(
            account: account,
            tokenURL: configuration.tokenURL ?? account.tokenURI,
            http: http,
            clock: clock,
            logger: logger
        )
        self.http = http
        self.clock = clock
        self.logger = logger
    }

    /// Sends `notification` to the registration token `token`; returns when FCM answered 200,
    /// throws a `PushDeliveryError` otherwise. `platform` is ignored: FCM reaches Android and
    /// Apple devices alike.
    public func deliver(_ notification: PushNotification, token: String, platform: PushPlatform) async throws {
        let body = try notification.fcmMessage(token: token, now: clock.now.timeIntervalSince1970)
        let headers = [("content-type", "application/json; charset=utf-8")]
        let accessToken = try await accessTokens.current()
        var answer = try await http.post(
            sendURL,
            headers: headers + [("authorization", "Bearer \(accessToken)")],
            body: body
        )
        if answer.status == 401 {
            logger.notice("FCM refused the access token; obtaining a new one")
            await accessTokens.discard(accessToken)
            let renewed = try await accessTokens.current()
            answer = try await http.post(
                sendURL,
                headers: headers + [("authorization", "Bearer \(renewed)")],
                body: body
            )
        }
        if let refusal = Self.refusal(answer, now: clock.now) { throw refusal }
    }

    /// Closes the connections to FCM and the token endpoint; nothing is sent after.
    public func shutdown() async {
        await accessTokens.shutdown()
        await http.shutdown()
    }

    /// What FCM's answer means for the push: nil when it was taken.
    static func refusal(_ answer: PushHTTPClient.Answer, now: Date) -> PushDeliveryError? {
        guard answer.status != 200 else { return nil }
        let (status, errorCode) = Self.error(answer.body)
        let said =
            "\(answer.status) \([status, errorCode].compactMap { $0 }.joined(separator: " ").nonEmpty ?? "(no status)")"
        // Only FCM's own error code says the token is dead: a bare 404 (a wrong project or URL,
        // a proxy's) would say so of every device alike.
        if errorCode == "UNREGISTERED" {
            return PushDeliveryError(.unregistered, reason: said)
        }
        if [429, 500, 502, 503, 504].contains(answer.status)
            || ["QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL"].contains(errorCode)
        {
            return PushDeliveryError(
                .temporary,
                reason: said,
                retryAfter: PushHTTPClient.retryAfter(answer.headers, now: now)
            )
        }
        return PushDeliveryError(.rejected, reason: said)
    }

    /// The `error.status` of a Google API error and the `errorCode` of its FCM details
    /// (`type.googleapis.com/google.firebase.fcm.v1.FcmError`), when they are plain words. The
    /// message is not read: it may quote the token.
    static func error(_ body: Data) -> (status: String?, errorCode: String?) {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let error = object["error"] as? [String: Any]
        else { return (nil, nil) }
        let status = (error["status"] as? String).flatMap { PushSenders.isPlainWord($0) ? $0 : nil }
        let details = error["details"] as? [[String: Any]] ?? []
        let code = details.first { ($0["@type"] as? String)?.hasSuffix("google.firebase.fcm.v1.FcmError") == true }?[
            "errorCode"
        ]
        return (status, (code as? String).flatMap { PushSenders.isPlainWord($0) ? $0 : nil })
    }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
