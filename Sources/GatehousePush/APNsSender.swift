import Crypto
import Foundation
public import GatehouseKernel
public import GatehouseProtocol
public import GatehouseServer
public import Logging

/// Sends pushes to Apple Push Notification service: `POST /3/device/<token>` over HTTP/2 with
/// token-based authentication (a provider token signed by the team's `.p8` key, reused for up to
/// 50 minutes), the notification's `apns-*` headers and its alert payload.
///
/// APNs' answers become what the token server acts on: 200 is delivered; 410 is a dead device
/// token (`PushDeliveryError` `unregistered`: the server disenrols the device); 429 and 5xx are
/// temporary (tried again); 400 `BadDeviceToken` and `DeviceTokenNotForTopic` are refused for
/// good but disenrol nothing, since a wrong `environment` or `topic` draws them for every device;
/// 403 `ExpiredProviderToken` or `InvalidProviderToken` makes a new provider token and tries once
/// more at once; any other answer is refused for good.
public final class APNsSender: PushTransport {
    private let baseURL: String
    private let topic: String
    private let providerTokens: APNsProviderToken
    private let http: PushHTTPClient
    private let clock: any WallClock
    private let logger: Logger

    /// A sender for `configuration`: reads its key file (which must be private to its owner) and
    /// its CA file. Throws a ``PushSetupError`` naming the file and the fix when either is missing
    /// or unusable.
    public init(
        configuration: PushConfiguration.APNs,
        clock: any WallClock = SystemWallClock(),
        logger: Logger
    ) throws(PushSetupError) {
        let settings = "server.mobileAuth.push.apns"
        let keyFile = configuration.keyFile
        let data = try PrivateKeyFile.read(
            keyFile,
            key: "\(settings).keyFile",
            missing: "download the key (a .p8 file) from Apple's developer account (Certificates, Identifiers & "
                + "Profiles, Keys) and name its path"
        )
        guard let pem = String(data: data, encoding: .utf8),
            let key = try? P256.Signing.PrivateKey(pemRepresentation: pem)
        else {
            throw PushSetupError(
                key: "\(settings).keyFile",
                problem: "\(keyFile) is not a PKCS#8 P-256 private key (a .p8 file, -----BEGIN PRIVATE KEY-----); "
                    + "name the file Apple gave out with key \(configuration.keyID)"
            )
        }
        baseURL = configuration.baseURL
        topic = configuration.topic
        providerTokens = APNsProviderToken(
            key: key,
            keyID: configuration.keyID,
            teamID: configuration.teamID,
            clock: clock
        )
        http = try PushHTTPClient(caFile: configuration.caFile, key: "\(settings).caFile")
        self.clock = clock
        self.logger = logger
    }

    /// Sends `notification` to the device `token`; returns when APNs answered 200, throws a
    /// `PushDeliveryError` otherwise. `platform` is ignored.
    public func deliver(_ notification: PushNotification, token: String, platform: PushPlatform) async throws {
        guard PushSenders.isDeviceToken(token) else {
            throw PushDeliveryError(.rejected, reason: "the push token is not an APNs device token")
        }
        let url = "\(baseURL)/3/device/\(token)"
        let headers =
            notification.apnsHeaders(topic: topic).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            + [("content-type", "application/json")]
        let body = try notification.apnsPayload()
        let providerToken = try makeProviderToken { try providerTokens.token() }
        var answer = try await http.post(
            url,
            headers: headers + [("authorization", "bearer \(providerToken)")],
            body: body
        )
        if answer.status == 403, let reason = Self.reason(answer.body),
            ["ExpiredProviderToken", "InvalidProviderToken"].contains(reason)
        {
            logger.notice("APNs refused the provider token; making a new one", metadata: ["reason": "\(reason)"])
            let renewed = try makeProviderToken { try providerTokens.renew(rejected: providerToken) }
            answer = try await http.post(url, headers: headers + [("authorization", "bearer \(renewed)")], body: body)
        }
        if let refusal = Self.refusal(answer, now: clock.now) { throw refusal }
    }

    /// Closes the connections to APNs; nothing is sent after.
    public func shutdown() async {
        await http.shutdown()
    }

    private func makeProviderToken(_ make: () throws -> String) throws(PushDeliveryError) -> String {
        do {
            return try make()
        } catch {
            throw PushDeliveryError(.rejected, reason: "the provider token could not be signed")
        }
    }

    /// What APNs' answer means for the push: nil when it was taken.
    static func refusal(_ answer: PushHTTPClient.Answer, now: Date) -> PushDeliveryError? {
        guard answer.status != 200 else { return nil }
        let reason = Self.reason(answer.body)
        let said = "\(answer.status) \(reason ?? "(no reason)")"
        switch (answer.status, reason) {
        // Only 410 says the device is gone. BadDeviceToken and DeviceTokenNotForTopic also answer
        // a wrong `environment` or `topic`, for every device alike: not retried, never disenrolled.
        case (410, _):
            return PushDeliveryError(.unregistered, reason: said)
        case (429, _), (500...599, _):
            return PushDeliveryError(
                .temporary,
                reason: said,
                retryAfter: PushHTTPClient.retryAfter(answer.headers, now: now)
            )
        default:
            return PushDeliveryError(.rejected, reason: said)
        }
    }

    /// The `reason` of an APNs error body (`{"reason": "BadDeviceToken"}`), when it is a plain word.
    static func reason(_ body: Data) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let reason = object["reason"] as? String, PushSenders.isPlainWord(reason)
        else { return nil }
        return reason
    }
}
