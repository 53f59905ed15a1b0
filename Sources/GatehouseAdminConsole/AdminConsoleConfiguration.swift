import Foundation
import GatehouseKernel
public import GatehouseServer

/// The manifest's `adminConsole` section: who may use the admin console, how they sign in, and
/// how long a console session lasts.
///
/// ```yaml
/// adminConsole:
///   loginClient: admin-console          # a client of the hosted login, redirect <server>/admin/callback
///   operators:
///     - {subject: alice@example.com, scopes: [admin:read, admin:write]}
///     - {subject: bob@example.com, scopes: [admin:read]}
///   acrValues: [urn:gatehouse:acr:passkey, urn:gatehouse:acr:phone]
/// ```
public struct AdminConsoleConfiguration: Decodable, Sendable {
    /// Someone who may sign in to the console: a user of the hosted login's directory.
    public struct Operator: Decodable, Sendable, Equatable {
        /// The hosted login's username (its `sub` for the console's client), as the login
        /// normalises it: Unicode NFC, trimmed and lowercased.
        public var subject: String
        /// What the operator may do: `admin:read` (look) and, with it, `admin:write` (act).
        public var scopes: Set<AdminScope>

        /// An operator in code.
        public init(subject: String, scopes: Set<AdminScope>) {
            self.subject = subject
            self.scopes = scopes
        }

        private enum CodingKeys: String, CodingKey { case subject, scopes }

        /// Reads `subject` and `scopes`; `admin:read` is required (an operator who may only
        /// act could not see what they act on).
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let subject = try container.decode(String.self, forKey: .subject)
            self.subject = subject.precomposedStringWithCanonicalMapping.trimmingCharacters(in: .whitespacesAndNewlines)
                .lowercased()
            guard (1...254).contains(self.subject.utf8.count) else {
                throw container.invalid(.subject, "a username of 1 to 254 characters")
            }
            let listed = try container.decode([AdminScope].self, forKey: .scopes)
            scopes = Set(listed)
            guard scopes.contains(.read) else {
                throw container.invalid(.scopes, "an operator needs admin:read (and admin:write to act)")
            }
        }
    }

    /// The hosted login's client the console signs in as (`loginClient`): listed in the login
    /// section with the redirect URI `<public URL>/admin/callback` and public subjects.
    public var loginClient: String
    /// The operators (`operators`, at least one), each subject once.
    public var operators: [Operator]
    /// The `acr` values the sign-in must produce (`acrValues`, default the passkey's and the
    /// phone's). Whichever it is, the ID token's `amr` must also say `mfa`.
    public var acrValues: [String]
    /// Seconds a console session lasts without a request (60–86400, default 900).
    public var idleTimeout: Int
    /// Seconds a console session lasts at most, however busy (300–86400, default 28800: a working day).
    public var sessionLifetime: Int
    /// Seconds since the operator proved who they are at the login, at most, for the sign-in to
    /// count (the request's `max_age`, 30–3600, default 300); the login is asked to sign the
    /// operator in again each time (`prompt=login`).
    public var maxAuthenticationAge: Int
    /// Events on one page of the audit trail (`auditPageSize`, 5–500, default 50).
    public var auditPageSize: Int

    /// The `acr` of a passkey sign-in at the hosted login.
    public static let passkeyACR = "urn:gatehouse:acr:passkey"
    /// The `acr` of a sign-in approved on an enrolled phone.
    public static let phoneACR = "urn:gatehouse:acr:phone"

    private enum CodingKeys: String, CodingKey {
        case loginClient, operators, acrValues, idleTimeout, sessionLifetime, maxAuthenticationAge, auditPageSize
    }

    /// A configuration in code, with the defaults of the manifest's.
    public init(
        loginClient: String,
        operators: [Operator],
        acrValues: [String] = [passkeyACR, phoneACR],
        idleTimeout: Int = 900,
        sessionLifetime: Int = 28800,
        maxAuthenticationAge: Int = 300,
        auditPageSize: Int = 50
    ) {
        self.loginClient = loginClient
        self.operators = operators
        self.acrValues = acrValues
        self.idleTimeout = idleTimeout
        self.sessionLifetime = sessionLifetime
        self.maxAuthenticationAge = maxAuthenticationAge
        self.auditPageSize = auditPageSize
    }

    /// Reads the section; throws when `loginClient` or `operators` is missing, a subject is
    /// listed twice, an `acr` value is not printable ASCII, or a number is out of its range.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        loginClient = try container.decode(String.self, forKey: .loginClient)
        guard !loginClient.isEmpty else { throw container.invalid(.loginClient, "name a client of the login section") }
        operators = try container.decode([Operator].self, forKey: .operators)
        guard !operators.isEmpty else { throw container.invalid(.operators, "list at least one operator") }
        guard Set(operators.map(\.subject)).count == operators.count else {
            throw container.invalid(.operators, "each operator's subject must be listed once")
        }
        acrValues = try container.decode([String].self, forKey: .acrValues, default: [Self.passkeyACR, Self.phoneACR])
        guard (1...8).contains(acrValues.count),
            acrValues.allSatisfy({
                (1...128).contains($0.utf8.count) && $0.utf8.allSatisfy { (0x21...0x7E).contains($0) }
            })
        else { throw container.invalid(.acrValues, "list 1 to 8 acr values of printable ASCII without spaces") }
        idleTimeout = try container.decode(Int.self, forKey: .idleTimeout, default: 900, in: 60...86400)
        sessionLifetime = try container.decode(Int.self, forKey: .sessionLifetime, default: 28800, in: 300...86400)
        maxAuthenticationAge = try container.decode(
            Int.self,
            forKey: .maxAuthenticationAge,
            default: 300,
            in: 30...3600
        )
        auditPageSize = try container.decode(Int.self, forKey: .auditPageSize, default: 50, in: 5...500)
    }

    /// The operator `subject` names, if any.
    public func `operator`(_ subject: String) -> Operator? {
        operators.first { $0.subject == subject }
    }
}
