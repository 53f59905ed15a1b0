import Foundation
public import GatehouseKernel
import GatehouseOutbound

/// The manifest's `server.mobileAuth` section: who may start mobile authentications, which types
/// there are, and how devices enrol. Without it the server offers no mobile authentication.
public struct MobileAuthConfiguration: Decodable, Sendable {
    /// How many devices of one user may be enrolled.
    public enum EnrolmentMode: String, Decodable, Sendable {
        /// One device; a second enrolment is refused (`userAlreadyEnrolled`).
        case single
        /// One device; a new enrolment replaces the old one, which learns it was disenrolled.
        case override
        /// Every enrolled device of the user is asked; the first answer counts.
        case multiple
    }

    /// A confidential API client (a portal) that starts transactions, with HTTP Basic credentials.
    public struct APIClient: Decodable, Sendable {
        /// The client's id: its HTTP Basic user name. Unique among the API clients; not starting
        /// with `@`, which names the server's own users of mobile authentication (`@login`).
        public var id: String
        /// At least 16 characters; also the key of the HMAC that signs its callbacks.
        public var secret: String
        /// Callback URIs must start with one of these; without any, callbacks are refused. Each is
        /// an `OutboundURL.Prefix`: compared by scheme, host, port and whole path segments.
        public var callbackPrefixes: [String]
        private var prefixes: [OutboundURL.Prefix] = []

        private enum CodingKeys: String, CodingKey { case id, secret, callbackPrefixes }

        /// Reads `id`, `secret` and `callbackPrefixes` (default: none). Throws when the secret is
        /// shorter than 16 characters or a prefix is not a URL the server may call.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            guard !id.hasPrefix("@") else { throw container.invalid(.id, "an API client id cannot start with @") }
            secret = try container.decode(String.self, forKey: .secret)
            guard secret.utf8.count >= 16 else { throw container.invalid(.secret, "use at least 16 characters") }
            callbackPrefixes = try container.decode([String].self, forKey: .callbackPrefixes, default: [])
            for prefix in callbackPrefixes {
                do {
                    prefixes.append(try OutboundURL.Prefix(prefix))
                } catch {
                    throw container.invalid(.callbackPrefixes, "\"\(prefix)\": \(error.reason)")
                }
            }
        }

        /// Whether `uri` is one this client may be called back at.
        public func allowsCallback(to uri: String) -> Bool {
            (try? callbackTarget(uri)) != nil
        }

        /// `uri` checked as a URL to call and against the prefixes; throws why not.
        func callbackTarget(_ uri: String) throws(OutboundURL.Refusal) -> OutboundURL {
            let url = try OutboundURL(uri)
            guard prefixes.contains(where: { $0.allows(url) }) else {
                throw OutboundURL.Refusal("not one of the API client's callback prefixes")
            }
            return url
        }
    }

    /// How a transaction reaches the device.
    public enum Delivery: String, Decodable, Sendable {
        /// The server pushes it to the user's enrolled devices.
        case push
        /// The portal shows a single-use code (a QR code); the device that scans it is asked. The
        /// seed SDK's OTP mobile authentication, and the hosted login's "scan with your phone".
        case otp
    }

    /// A business use of mobile authentication (`login`, `payment`), named by the portal.
    public struct TransactionType: Decodable, Sendable {
        /// The name the portal starts a transaction with. Unique among the types.
        public var name: String
        /// How the user answers on the device: `confirmation`, `pin`, `biometric` or `custom`.
        public var method: MobileAuthMethod
        /// How the transaction reaches the device: `push` (the default) or `otp`.
        public var delivery: Delivery
        /// The manifest id of the authenticator for `biometric` and `custom`.
        public var authenticator: String?
        /// Seconds the device has to answer (10–3600, default 120).
        public var timeToLive: Int
        /// The push message when the portal sends none.
        public var defaultMessage: String?
        /// The portal shows a number the user must type on the device.
        public var numberMatching: Bool
        /// The device signs what it approves; the portal gets the signature and its check.
        public var transactionSigning: Bool
        /// A new transaction for the same user and type ends older pending ones.
        public var supersedesPending: Bool

        private enum CodingKeys: String, CodingKey {
            case name, method, delivery, authenticator, timeToLive, defaultMessage, numberMatching, transactionSigning,
                supersedesPending
        }

        /// Reads the type; `name` and `method` are required. Throws on a value out of range, a
        /// `defaultMessage` over ``MobileAuthConfiguration/maxMessageLength`` characters, or an
        /// `authenticator` missing for `biometric` and `custom` or given for `confirmation` and `pin`.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            method = try container.decode(MobileAuthMethod.self, forKey: .method)
            delivery = try container.decode(Delivery.self, forKey: .delivery, default: .push)
            authenticator = try container.decodeIfPresent(String.self, forKey: .authenticator)
            timeToLive = try container.decode(Int.self, forKey: .timeToLive, default: 120, in: 10...3600)
            defaultMessage = try container.decodeIfPresent(String.self, forKey: .defaultMessage)
            numberMatching = try container.decode(Bool.self, forKey: .numberMatching, default: false)
            transactionSigning = try container.decode(Bool.self, forKey: .transactionSigning, default: false)
            supersedesPending = try container.decode(Bool.self, forKey: .supersedesPending, default: true)
            if let message = defaultMessage, message.count > MobileAuthConfiguration.maxMessageLength {
                throw container.invalid(
                    .defaultMessage,
                    "at most \(MobileAuthConfiguration.maxMessageLength) characters"
                )
            }
            switch (method, authenticator) {
            case (.biometric, nil), (.custom, nil):
                throw container.invalid(.authenticator, "a \(method.rawValue) type names its authenticator")
            case (.confirmation, .some), (.pin, .some):
                throw container.invalid(.authenticator, "a \(method.rawValue) type takes no authenticator")
            default: break
            }
        }
    }

    /// The longest push message: what an APNs alert shows in full.
    public static let maxMessageLength = 155

    /// How many devices a user may enrol (`enrolment`, default `single`).
    public var enrolment: EnrolmentMode
    /// The portals that may start transactions (`apiClients`, at least one).
    public var apiClients: [APIClient]
    /// The transaction types the portals may start (`types`, at least one).
    public var types: [TransactionType]
    /// How often a callback is tried (1–10, default 5), with doubling delays from one second.
    public var callbackAttempts: Int
    /// The push services pushes go through (`push`): what `gatehouse serve` sends with. Absent:
    /// the pushes the host plugs in, or only the events channel and the pending list.
    public var push: PushConfiguration?

    private enum CodingKeys: String, CodingKey { case enrolment, apiClients, types, callbackAttempts, push }

    /// Reads the section. Throws on a value out of range, when `apiClients` or `types` is missing
    /// or empty, or when two clients share an id or two types a name.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        enrolment = try container.decode(EnrolmentMode.self, forKey: .enrolment, default: .single)
        apiClients = try container.decode([APIClient].self, forKey: .apiClients)
        types = try container.decode([TransactionType].self, forKey: .types)
        callbackAttempts = try container.decode(Int.self, forKey: .callbackAttempts, default: 5, in: 1...10)
        push = try container.decodeIfPresent(PushConfiguration.self, forKey: .push)
        guard !apiClients.isEmpty else { throw container.invalid(.apiClients, "list at least one API client") }
        guard !types.isEmpty else { throw container.invalid(.types, "list at least one type") }
        guard Set(types.map(\.name)).count == types.count else {
            throw container.invalid(.types, "each type name must be unique")
        }
        guard Set(apiClients.map(\.id)).count == apiClients.count else {
            throw container.invalid(.apiClients, "each API client id must be unique")
        }
    }
}
