public import GatehouseKernel
import GatehouseOutbound
public import GatehouseProtocol
public import GatehouseServer
public import Logging

/// The push senders a manifest's `server.mobileAuth.push` section asks for — ``APNsSender`` for
/// devices enrolled with platform `apns`, ``FCMSender`` for `fcm` — as the token server takes
/// them (its `pushTransports`). `gatehouse serve` makes them before the server starts, so a key
/// file that cannot be used stops the start; call ``shutdown()`` after the server's own shutdown.
public struct PushSenders: Sendable {
    /// The senders by platform; empty when the manifest configures none.
    public let transports: [PushPlatform: any PushTransport]
    private let apns: APNsSender?
    private let fcm: FCMSender?

    /// The senders `configuration` names (none for nil). A key or CA file that is missing, open to
    /// others or unusable is a ``PushSetupError`` naming the setting, the file and the fix.
    public init(
        configuration: PushConfiguration?,
        clock: any WallClock = SystemWallClock(),
        logger: Logger
    ) async throws(PushSetupError) {
        let apns = try configuration?.apns.map { settings throws(PushSetupError) in
            try APNsSender(configuration: settings, clock: clock, logger: logger)
        }
        let fcm: FCMSender?
        do {
            fcm = try configuration?.fcm.map { settings throws(PushSetupError) in
                try FCMSender(configuration: settings, clock: clock, logger: logger)
            }
        } catch {
            // The APNs sender's connections would outlive the start that failed.
            await apns?.shutdown()
            throw error
        }
        self.apns = apns
        self.fcm = fcm
        // Which services the pushes go to, so an operator sees it at start (no key, no token).
        if let settings = configuration?.apns {
            logger.info(
                "Push delivery through APNs",
                metadata: [
                    "environment": "\(settings.environment.rawValue)", "url": "\(settings.baseURL)",
                    "topic": "\(settings.topic)",
                ]
            )
        }
        if let settings = configuration?.fcm {
            logger.info("Push delivery through FCM", metadata: ["url": "\(settings.baseURL)"])
        }
        var transports: [PushPlatform: any PushTransport] = [:]
        if let apns { transports[.apns] = apns }
        if let fcm { transports[.fcm] = fcm }
        self.transports = transports
    }

    /// The senders of `manifest`'s `server.mobileAuth.push` section. Throws a `ManifestError`
    /// naming the manifest, the setting and the problem: one line, as any other manifest problem.
    public init(manifest: Manifest, clock: any WallClock = SystemWallClock(), logger: Logger) async throws {
        let configuration = try manifest.section("server", as: ServerConfiguration.self).mobileAuth?.push
        do {
            try await self.init(configuration: configuration, clock: clock, logger: logger)
        } catch {
            throw ManifestError(source: manifest.source, path: error.key, problem: error.problem)
        }
    }

    /// Closes every sender's connections; nothing is sent after.
    public func shutdown() async {
        await apns?.shutdown()
        await fcm?.shutdown()
    }

    // MARK: - What may go into a URL, a header or a log line

    /// A push token as enrolment accepts them: 8 to 512 letters, digits, `-`, `_`, `:` or `.`,
    /// safe in a URL path.
    static func isDeviceToken(_ token: String) -> Bool {
        (8...512).contains(token.utf8.count)
            && token.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || "0123456789-_:.".unicodeScalars.contains($0))
            }
    }

    /// A word a push service answers with (`BadDeviceToken`, `UNREGISTERED`): letters, digits
    /// and `_`, at most 64 — anything else is not repeated in a log line.
    static func isPlainWord(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || "0123456789_".unicodeScalars.contains($0))
            }
    }

    /// Visible ASCII without spaces, at most 4096 bytes: safe in a header or a claim.
    static func isPlainText(_ text: String) -> Bool {
        (1...4096).contains(text.utf8.count) && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// An `https` URL the server may call.
    static func isHTTPS(_ url: String) -> Bool {
        (try? OutboundURL(url))?.scheme == "https"
    }
}
