import GatehouseKernel
import GatehouseOutbound

/// The manifest's `server.mobileAuth.push` section: the push services `gatehouse serve` sends
/// through, and how often a push is tried. Only the settings: the credentials' files are read
/// where the senders are made (GatehousePush), not here, so a manifest check opens no key.
public struct PushConfiguration: Decodable, Sendable {
    /// Apple Push Notification service with a token-based provider key (a `.p8` file).
    public struct APNs: Decodable, Sendable {
        /// Which APNs the app's build registers with.
        public enum Environment: String, Decodable, Sendable {
            /// Apps from the App Store, TestFlight and ad-hoc builds: `https://api.push.apple.com`.
            case production
            /// Development builds: `https://api.sandbox.push.apple.com`.
            case sandbox
        }

        /// The provider key Apple gave out: a PKCS#8 P-256 private key (`AuthKey_KEYID.p8`),
        /// readable by its owner only. A path, relative to the working folder or absolute.
        public var keyFile: String
        /// The key's id, ten characters from Apple's developer account (`kid` of the provider token).
        public var keyID: String
        /// The team id the key belongs to (`iss` of the provider token).
        public var teamID: String
        /// The app's bundle id: `apns-topic`.
        public var topic: String
        /// `production` (the default) or `sandbox`.
        public var environment: Environment
        /// Another APNs base URL than the environment's, `https://host[:port][/path]`: a proxy, or a test server.
        public var url: String?
        /// A PEM file of certificates to trust beside the system's, for a proxy or a test server
        /// with its own certificate authority. Verification is never turned off.
        public var caFile: String?

        /// The APNs of production.
        public static let productionURL = "https://api.push.apple.com"
        /// The APNs of development builds.
        public static let sandboxURL = "https://api.sandbox.push.apple.com"

        /// The base URL pushes go to: `url`, else the environment's.
        public var baseURL: String {
            url ?? (environment == .production ? Self.productionURL : Self.sandboxURL)
        }

        private enum CodingKeys: String, CodingKey { case keyFile, keyID, teamID, topic, environment, url, caFile }

        /// Reads the section; `keyFile`, `keyID`, `teamID` and `topic` are required. Throws when
        /// an id has characters other than letters, digits, `.` and `-`, or `url` is not an
        /// `https` URL without query.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            keyFile = try container.decode(String.self, forKey: .keyFile)
            keyID = try container.decode(String.self, forKey: .keyID)
            teamID = try container.decode(String.self, forKey: .teamID)
            topic = try container.decode(String.self, forKey: .topic)
            let environmentName = try container.decodeIfPresent(String.self, forKey: .environment) ?? "production"
            guard let environment = Environment(rawValue: environmentName) else {
                throw container.invalid(
                    .environment,
                    "expected production or sandbox, found \"\(environmentName.prefix(64))\""
                )
            }
            self.environment = environment
            url = try container.decodeIfPresent(String.self, forKey: .url).map {
                $0.hasSuffix("/") ? String($0.dropLast()) : $0
            }
            caFile = try container.decodeIfPresent(String.self, forKey: .caFile)
            for (key, value) in [(CodingKeys.keyID, keyID), (.teamID, teamID), (.topic, topic)]
            where !PushConfiguration.isIdentifier(value) {
                throw container.invalid(
                    key,
                    "expected letters, digits, '.' and '-' (1 to 255), found \"\(value.prefix(64))\""
                )
            }
            if let url, let problem = PushConfiguration.problem(withBaseURL: url) {
                throw container.invalid(.url, problem)
            }
        }
    }

    /// Firebase Cloud Messaging (HTTP v1) with a service account.
    public struct FCM: Decodable, Sendable {
        /// The service account's key file from the Firebase console (JSON with `client_email`,
        /// `private_key`, `token_uri` and `project_id`), readable by its owner only.
        public var serviceAccountFile: String
        /// Another FCM base URL than Google's, `https://host[:port][/path]`: a proxy, or a test server.
        public var url: String?
        /// Another OAuth 2 token endpoint than the service account's `token_uri` (a proxy); the
        /// assertion's audience stays `token_uri`.
        public var tokenURL: String?
        /// A PEM file of certificates to trust beside the system's (for `url` and `tokenURL`).
        public var caFile: String?

        /// Google's FCM.
        public static let defaultURL = "https://fcm.googleapis.com"

        /// The base URL messages go to: `url`, else Google's.
        public var baseURL: String { url ?? Self.defaultURL }

        private enum CodingKeys: String, CodingKey { case serviceAccountFile, url, tokenURL, caFile }

        /// Reads the section; `serviceAccountFile` is required. Throws when `url` or `tokenURL`
        /// is not an `https` URL.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            serviceAccountFile = try container.decode(String.self, forKey: .serviceAccountFile)
            url = try container.decodeIfPresent(String.self, forKey: .url).map {
                $0.hasSuffix("/") ? String($0.dropLast()) : $0
            }
            tokenURL = try container.decodeIfPresent(String.self, forKey: .tokenURL)
            caFile = try container.decodeIfPresent(String.self, forKey: .caFile)
            if let url, let problem = PushConfiguration.problem(withBaseURL: url) {
                throw container.invalid(.url, problem)
            }
            if let tokenURL, let problem = PushConfiguration.problem(withURL: tokenURL) {
                throw container.invalid(.tokenURL, problem)
            }
        }
    }

    /// APNs, for devices that enrol with platform `apns`.
    public var apns: APNs?
    /// FCM, for devices that enrol with platform `fcm`.
    public var fcm: FCM?
    /// How often one push is tried, the first time included (1–10, default 4): again after a
    /// temporary refusal, with doubling delays from one second, never after the transaction expires.
    public var attempts: Int

    private enum CodingKeys: String, CodingKey { case apns, fcm, attempts }

    /// Reads the section. Throws when it names neither `apns` nor `fcm`, or `attempts` is out of range.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        apns = try container.decodeIfPresent(APNs.self, forKey: .apns)
        fcm = try container.decodeIfPresent(FCM.self, forKey: .fcm)
        attempts = try container.decode(Int.self, forKey: .attempts, default: Self.defaultAttempts, in: 1...10)
        guard apns != nil || fcm != nil else { throw container.invalid(.apns, "name apns, fcm or both") }
    }

    /// How often a push is tried when the manifest does not say (an embedded server's too).
    public static let defaultAttempts = 4

    /// Key ids, team ids and bundle ids: what goes into a header or a claim unescaped.
    static func isIdentifier(_ text: String) -> Bool {
        (1...255).contains(text.utf8.count)
            && text.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || "0123456789.-".unicodeScalars.contains($0))
            }
    }

    /// Why `url` cannot be a base URL pushes are posted under; nil when it can.
    static func problem(withBaseURL url: String) -> String? {
        guard !url.contains("?") else { return "a base URL has no query" }
        return problem(withURL: url.hasPrefix("https://") && !url.dropFirst(8).contains("/") ? url + "/" : url)
    }

    /// Why `url` cannot be called; nil when it can.
    static func problem(withURL url: String) -> String? {
        guard url.hasPrefix("https://") else { return "expected an https URL: pushes carry credentials" }
        do {
            let checked = try OutboundURL(url)
            return checked.scheme == "https" ? nil : "expected an https URL: pushes carry credentials"
        } catch {
            return "\"\(url.prefix(128))\": \(error.reason)"
        }
    }
}
