import Foundation
import GatehouseKernel

/// What an admin may do. An admin client is granted some of these; the admin console maps each
/// operator to some of these.
public enum AdminScope: String, Sendable, CaseIterable, Codable {
    /// Find users, read their profiles, devices, sessions and audit events.
    case read = "admin:read"
    /// Revoke sessions, remove authenticators, disenrol devices, deregister profiles, clear lockouts.
    case write = "admin:write"
}

/// The manifest's `server.admin` section: the confidential clients of the admin API, and what
/// admins may do. Without clients, the admin API answers every request 401.
public struct AdminConfiguration: Decodable, Sendable {
    /// A confidential client of the admin API: a helpdesk tool, a script, `gatehouse admin`.
    public struct Client: Decodable, Sendable {
        /// The client's id, its HTTP Basic user name: not empty, without `:`, not starting with `@`.
        public var id: String
        /// At least 16 characters; compared by digest in constant time.
        public var secret: String
        /// What its tokens may be granted.
        public var scopes: [AdminScope]
        /// Whether its tokens must be DPoP-bound (RFC 9449): the token request carries a proof,
        /// and every admin request a proof of the same key.
        public var requireDPoP: Bool

        /// A client in code; unlike decoding, the secret's length is not checked here.
        public init(id: String, secret: String, scopes: [AdminScope], requireDPoP: Bool = false) {
            self.id = id
            self.secret = secret
            self.scopes = scopes
            self.requireDPoP = requireDPoP
        }

        private enum CodingKeys: String, CodingKey { case id, secret, scopes, requireDPoP }

        /// Reads `id`, `secret`, `scopes` and `requireDPoP` (default false).
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            guard !id.isEmpty, !id.contains(":"), !id.hasPrefix("@") else {
                throw container.invalid(.id, "a non-empty id without \":\", not starting with @")
            }
            secret = try container.decode(String.self, forKey: .secret)
            guard secret.utf8.count >= 16 else { throw container.invalid(.secret, "use at least 16 characters") }
            scopes = try container.decode([AdminScope].self, forKey: .scopes)
            guard !scopes.isEmpty else { throw container.invalid(.scopes, "grant admin:read, admin:write or both") }
            requireDPoP = try container.decode(Bool.self, forKey: .requireDPoP, default: false)
        }
    }

    /// The admin API's clients.
    public var clients: [Client]
    /// Whether admins may clear a profile's count of failed attempts (a lockout not yet reached).
    public var allowClearingLockouts: Bool
    /// Seconds an admin access token lives.
    public var tokenLifetime: Int

    /// No clients, clearing lockouts allowed, tokens living 5 minutes.
    public init(clients: [Client] = [], allowClearingLockouts: Bool = true, tokenLifetime: Int = 300) {
        self.clients = clients
        self.allowClearingLockouts = allowClearingLockouts
        self.tokenLifetime = tokenLifetime
    }

    private enum CodingKeys: String, CodingKey { case clients, allowClearingLockouts, tokenLifetime }

    /// Decodes `server.admin`; throws for a repeated client id or a lifetime out of 10–3600 s.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        clients = try container.decode([Client].self, forKey: .clients, default: [])
        guard Set(clients.map(\.id)).count == clients.count else {
            throw container.invalid(.clients, "each admin client id must be unique")
        }
        allowClearingLockouts = try container.decode(Bool.self, forKey: .allowClearingLockouts, default: true)
        tokenLifetime = try container.decode(Int.self, forKey: .tokenLifetime, default: 300, in: 10...3600)
    }
}

/// The manifest's `server.audit` section: how long the audit trail keeps its events.
public struct AuditConfiguration: Decodable, Sendable {
    /// Days an event is kept; the janitor removes older ones.
    public var retentionDays: Int

    /// Events kept for `retentionDays` (default a year).
    public init(retentionDays: Int = 365) {
        self.retentionDays = retentionDays
    }

    private enum CodingKeys: String, CodingKey { case retentionDays }

    /// Decodes `server.audit`; throws for a retention out of 1–3650 days.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        retentionDays = try container.decode(Int.self, forKey: .retentionDays, default: 365, in: 1...3650)
    }
}
