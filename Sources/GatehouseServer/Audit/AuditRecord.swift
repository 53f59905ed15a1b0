public import Foundation

/// Who did what an audit event records.
public struct AdminActor: Sendable, Hashable, CustomStringConvertible {
    /// As stored in the event's `actor`: `admin_client:<id>`, `operator:<subject>`, `user`, `server`.
    public let description: String

    private init(_ description: String) { self.description = description }

    /// A client of the admin API.
    public static func client(_ id: String) -> AdminActor { AdminActor("admin_client:" + id) }
    /// An operator signed in to the admin console, by their subject at the hosted login.
    public static func consoleOperator(_ subject: String) -> AdminActor { AdminActor("operator:" + subject) }
    /// The user, through their app.
    static let user = AdminActor("user")
    /// The server itself: a lockout, a dead push token, a replayed credential.
    static let server = AdminActor("server")
}

/// What happened, as the audit trail names it.
public enum AuditEvent: String, Sendable, CaseIterable, Codable {
    case registration, login
    case loginFailure = "login_failure"
    case lockout
    case authenticatorLockout = "authenticator_lockout"
    case deregistration
    case authenticatorRegistration = "authenticator_registration"
    case authenticatorDeregistration = "authenticator_deregistration"
    case pinChange = "pin_change"
    case pushApproved = "push_approved"
    case pushDenied = "push_denied"
    case refreshTokenReuse = "refresh_token_reuse"
    case credentialReplay = "credential_replay"
    case deviceDisenrolled = "device_disenrolled"
    case adminRevokeSessions = "admin_revoke_sessions"
    case adminRemoveAuthenticator = "admin_remove_authenticator"
    case adminDisenrolDevice = "admin_disenrol_device"
    case adminDeregisterProfile = "admin_deregister_profile"
    case adminClearLockout = "admin_clear_lockout"
    case operatorSignIn = "operator_sign_in"
    case operatorSignInRefused = "operator_sign_in_refused"
    case passkeyAdded = "passkey_added"
    case passkeyRemoved = "passkey_removed"
    case clientAuthenticationFailure = "client_authentication_failure"
}

/// One event of the audit trail, as stored: never a secret, a PIN or a token.
public struct AuditRecord: Sendable, Codable, Equatable {
    /// Its place in the trail; later events have larger numbers.
    public var seq: Int64
    /// When it happened.
    public var at: Date
    /// What happened: an ``AuditEvent``'s raw value.
    public var event: String
    /// Who did it: an ``AdminActor``'s description.
    public var actor: String
    /// The user it is about, when known.
    public var identityProvider: String?
    /// The user it is about, when known.
    public var subject: String?
    /// The profile it is about, when known.
    public var profileID: String?
    /// What else is worth knowing: the authenticator, the API client, the reason.
    public var detail: [String: String]

    private enum CodingKeys: String, CodingKey {
        case seq, at, event, actor, detail
        case identityProvider = "identity_provider"
        case subject
        case profileID = "profile_id"
    }
}

/// Which events to read: every filter given must match. Newest first.
public struct AuditQuery: Sendable, Equatable {
    /// The user's identity provider.
    public var identityProvider: String?
    /// The user's subject.
    public var subject: String?
    /// The profile.
    public var profileID: String?
    /// The event's name.
    public var event: String?
    /// The actor, as stored (`operator:alice@example.com`).
    public var actor: String?
    /// At or after.
    public var since: Date?
    /// Before.
    public var until: Date?
    /// Events of a page: 1–1000.
    public var limit: Int
    /// The cursor of the page before: events older than it (its ``AuditPage/nextCursor``).
    public var before: Int64?

    /// A query; with no filter it reads the newest events.
    public init(
        identityProvider: String? = nil,
        subject: String? = nil,
        profileID: String? = nil,
        event: String? = nil,
        actor: String? = nil,
        since: Date? = nil,
        until: Date? = nil,
        limit: Int = 50,
        before: Int64? = nil
    ) {
        self.identityProvider = identityProvider
        self.subject = subject
        self.profileID = profileID
        self.event = event
        self.actor = actor
        self.since = since
        self.until = until
        self.limit = min(max(limit, 1), 1000)
        self.before = before
    }
}

/// A page of events, newest first, and where the next (older) page starts.
public struct AuditPage: Sendable, Codable, Equatable {
    /// The events, newest first.
    public var events: [AuditRecord]
    /// Pass as ``AuditQuery/before`` for the next page; nil on the last.
    public var nextCursor: Int64?

    private enum CodingKeys: String, CodingKey {
        case events
        case nextCursor = "next_cursor"
    }
}

/// An event on its way into the trail, written in the transaction of the change it records.
struct AuditEntry: Sendable {
    var event: AuditEvent
    var actor: AdminActor
    var identityProvider: String?
    var subject: String?
    var profileID: String?
    var detail: [String: String] = [:]
}
