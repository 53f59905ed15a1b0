public import Foundation

// What the admin API and console show of users: the tables' rows as an operator reads them,
// never a secret, a key or a token.

/// How an admin finds users; at least one filter is given.
public struct UserSearch: Sendable, Equatable {
    /// The identity provider's id.
    public var identityProvider: String?
    /// The subject, exactly.
    public var subject: String?
    /// The subject's beginning, as a helpdesk types an e-mail address.
    public var subjectPrefix: String?
    /// A profile's id: the user it belongs to.
    public var profileID: String?
    /// An installation's id: the users with a profile on it.
    public var installationID: String?
    /// Users at most: 1–200.
    public var limit: Int

    /// A search; give at least one filter.
    public init(
        identityProvider: String? = nil,
        subject: String? = nil,
        subjectPrefix: String? = nil,
        profileID: String? = nil,
        installationID: String? = nil,
        limit: Int = 50
    ) {
        self.identityProvider = identityProvider
        self.subject = subject
        self.subjectPrefix = subjectPrefix
        self.profileID = profileID
        self.installationID = installationID
        self.limit = min(max(limit, 1), 200)
    }

    /// Whether a filter narrows it.
    var isNarrowed: Bool {
        [identityProvider, subject, subjectPrefix, profileID, installationID].contains { $0?.isEmpty == false }
    }
}

/// A user found: the identity provider's user, with how many profiles (devices) they have.
public struct UserSummary: Sendable, Codable, Equatable {
    /// The identity provider's id.
    public var identityProvider: String
    /// The user's subject at it.
    public var subject: String
    /// Profiles: one per app installation the user registered.
    public var profiles: Int
    /// The last token issued to any of their profiles, while it is kept.
    public var lastUsedAt: Date?

    private enum CodingKeys: String, CodingKey {
        case identityProvider = "identity_provider"
        case subject, profiles
        case lastUsedAt = "last_used_at"
    }
}

/// Everything an operator sees of one user.
public struct UserDetail: Sendable, Codable, Equatable {
    /// The identity provider's id.
    public var identityProvider: String
    /// The user's subject at it.
    public var subject: String
    /// Their profiles, newest first.
    public var profiles: [ProfileDetail]
    /// Mobile authentications waiting for their answer.
    public var pendingTransactions: [PendingTransactionSummary]

    private enum CodingKeys: String, CodingKey {
        case identityProvider = "identity_provider"
        case subject, profiles
        case pendingTransactions = "pending_transactions"
    }
}

/// One profile: the user on one app installation (a device).
public struct ProfileDetail: Sendable, Codable, Equatable {
    /// The profile's id.
    public var id: String
    /// The installation (client) it is registered on.
    public var installationID: String
    /// The installation's app.
    public var appID: String
    /// When it was registered.
    public var createdAt: Date
    /// The last token issued to it, while it is kept.
    public var lastUsedAt: Date?
    /// When the registration lapses, if it does.
    public var expiresAt: Date?
    /// Failed attempts counted towards the lockout.
    public var failures: Int
    /// Its registered authenticators, oldest first.
    public var authenticators: [AuthenticatorSummary]
    /// Its sessions (refresh-token families), newest first.
    public var sessions: [SessionSummary]
    /// Its enrolment for mobile authentication, if any.
    public var pushEnrolment: PushEnrolmentSummary?

    private enum CodingKeys: String, CodingKey {
        case id
        case installationID = "installation_id"
        case appID = "app_id"
        case createdAt = "created_at"
        case lastUsedAt = "last_used_at"
        case expiresAt = "expires_at"
        case failures, authenticators, sessions
        case pushEnrolment = "push_enrolment"
    }
}

/// An authenticator registered for a profile.
public struct AuthenticatorSummary: Sendable, Codable, Equatable {
    /// The authenticator's id in the manifest.
    public var id: String
    /// When it was registered (or its PIN last changed).
    public var createdAt: Date

    private enum CodingKeys: String, CodingKey {
        case id
        case createdAt = "created_at"
    }
}

/// A session: a refresh-token family.
public struct SessionSummary: Sendable, Codable, Equatable {
    /// The family's id.
    public var id: String
    /// When its newest token was issued.
    public var issuedAt: Date?
    /// When its newest token expires.
    public var expiresAt: Date?
    /// Whether it can still be refreshed.
    public var active: Bool

    private enum CodingKeys: String, CodingKey {
        case id
        case issuedAt = "issued_at"
        case expiresAt = "expires_at"
        case active
    }
}

/// A profile's enrolment for mobile authentication.
public struct PushEnrolmentSummary: Sendable, Codable, Equatable {
    /// `apns`, `fcm`, … when a push token is set.
    public var platform: String?
    /// Whether pushes can reach it.
    public var hasPushToken: Bool
    /// Whether it was disenrolled (by a newer device, an admin or a dead push token).
    public var disenrolled: Bool
    /// When it enrolled.
    public var createdAt: Date

    private enum CodingKeys: String, CodingKey {
        case platform
        case hasPushToken = "has_push_token"
        case disenrolled
        case createdAt = "created_at"
    }
}

/// A mobile authentication waiting for the user's answer.
public struct PendingTransactionSummary: Sendable, Codable, Equatable {
    /// The transaction's id.
    public var id: String
    /// The API client (portal) that started it.
    public var apiClient: String
    /// Its mobile-authentication type.
    public var type: String
    /// When it started.
    public var createdAt: Date
    /// When it lapses.
    public var expiresAt: Date

    private enum CodingKeys: String, CodingKey {
        case id
        case apiClient = "api_client"
        case type
        case createdAt = "created_at"
        case expiresAt = "expires_at"
    }
}

/// Why an admin action was refused.
public enum AdminError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No profile has this id.
    case profileNotFound
    /// The profile has no such authenticator.
    case authenticatorNotRegistered
    /// The PIN is every profile's fallback: deregister the profile instead.
    case pinCannotBeRemoved
    /// The profile is not enrolled for mobile authentication (or was disenrolled already).
    case notEnrolled
    /// The manifest does not let admins clear lockouts (`server.admin.allowClearingLockouts`).
    case clearingLockoutsNotAllowed
    /// A search without any filter.
    case searchNeedsAFilter

    /// What went wrong, in a sentence.
    public var description: String {
        switch self {
        case .profileNotFound: "No profile has this id."
        case .authenticatorNotRegistered: "The profile has no such authenticator."
        case .pinCannotBeRemoved:
            "The PIN is the profile's fallback and cannot be removed; deregister the profile instead."
        case .notEnrolled: "The profile is not enrolled for mobile authentication."
        case .clearingLockoutsNotAllowed:
            "This server does not let admins clear lockouts (server.admin.allowClearingLockouts is false)."
        case .searchNeedsAFilter:
            "Give at least one of identity_provider, subject, subject_prefix, profile_id, installation_id."
        }
    }
}
