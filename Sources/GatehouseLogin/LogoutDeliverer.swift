import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseOutbound
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

/// Sends logout tokens (Back-Channel Logout 1.0 §2.4) to the clients of ended sessions. The
/// deliveries wait in the store, so one that fails (the client is down) or that an instance
/// could not finish (it stopped) is tried again; each attempt signs a fresh token, so one that
/// waited is not refused as expired.
struct LogoutDeliverer: Sendable {
    /// Seconds a logout token is valid.
    static let tokenLifetime = 120
    /// Seconds a delivery is left to the instance that claimed it.
    static let lease: Double = 30
    /// A delivery is given up a day after its first attempt failed.
    static let maxAttempts = 12

    let logger: Logger

    struct LogoutClaims: Encodable {
        var iss: String
        var sub: String
        var aud: String
        var iat: Int
        var exp: Int
        var jti: String
        var sid: String
        var events = ["http://schemas.openid.net/event/backchannel-logout": [String: String]()]
    }

    func deliverDue(store: LoginStore, keyRing: SigningKeyRing, issuer: String, now: @Sendable () -> Double) async {
        do {
            while true {
                let due = try await store.claimLogoutDeliveries(now: now(), lease: Self.lease)
                if due.isEmpty { return }
                for delivery in due {
                    await deliver(delivery, store: store, keyRing: keyRing, issuer: issuer, now: now())
                }
                if due.count < 20 { return }
            }
        } catch {
            logger.error("Back-channel logouts could not be read", metadata: ["error": "\(String(reflecting: error))"])
        }
    }

    private func deliver(
        _ delivery: LoginStore.LogoutDelivery,
        store: LoginStore,
        keyRing: SigningKeyRing,
        issuer: String,
        now: Double
    ) async {
        do {
            guard let key = try await keyRing.keys(now: now).signing[.rs256] else { return }
            let claims = LogoutClaims(
                iss: issuer,
                sub: delivery.subject,
                aud: delivery.clientID,
                iat: Int(now),
                exp: Int(now) + Self.tokenLifetime,
                jti: Data.random(count: 16).base64URLEncodedString,
                sid: delivery.sessionID
            )
            let token = try JSONWebSignature.sign(claims, with: key, type: "logout+jwt")
            let response = try await OutboundHTTP.post(
                try OutboundURL(delivery.uri),
                headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: Data(FormFields.encode([("logout_token", token)]).utf8),
                timeout: .seconds(5)
            )
            guard (200...299).contains(response.status) else {
                throw OutboundHTTP.Failure(url: delivery.uri, reason: "answered \(response.status)")
            }
            try await store.finishLogoutDelivery(delivery.id)
            logger.info("Back-channel logout delivered", metadata: ["client": "\(delivery.clientID)"])
        } catch {
            let attempts = delivery.attempts
            if attempts >= Self.maxAttempts {
                logger.error(
                    "Back-channel logout given up",
                    metadata: ["client": "\(delivery.clientID)", "attempts": "\(attempts)", "error": "\(error)"]
                )
                try? await store.finishLogoutDelivery(delivery.id)
                return
            }
            // 10 s, 20 s, 40 s … up to an hour apart.
            let pause = min(3600, 10 * pow(2, Double(attempts - 1)))
            logger.warning(
                "Back-channel logout failed; it will be tried again",
                metadata: ["client": "\(delivery.clientID)", "in": "\(Int(pause)) s", "error": "\(error)"]
            )
            try? await store.retryLogoutDelivery(delivery.id, at: now + pause)
        }
    }
}
