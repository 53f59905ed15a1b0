import Foundation
import GatehouseServer

/// How the console says things: times in UTC, events and actors in plain words.
enum ConsoleText {
    /// `2026-01-05 09:30:12 UTC`.
    static func time(_ date: Date) -> String {
        let text = date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt))
        return text.replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC")
    }

    /// ``time(_:)``, or `never` for no date.
    static func time(_ date: Date?, none: String = "never") -> String {
        date.map(time) ?? none
    }

    /// A `datetime-local` field's value (`2026-01-05T09:30`, seconds optional, or a day alone)
    /// read as UTC; nil when it is none of these.
    static func parseUTC(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 32 else { return nil }
        let full: String
        switch trimmed.count {
        case 10: full = trimmed + "T00:00:00Z"
        case 16: full = trimmed + ":00Z"
        case 19: full = trimmed + "Z"
        default: return nil
        }
        return try? Date.ISO8601FormatStyle(timeZone: .gmt).parse(full)
    }

    /// A date as a `datetime-local` field shows it (`2026-01-05T09:30`), in UTC.
    static func field(_ date: Date) -> String {
        String(date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt)).prefix(16))
    }

    /// An audit event's name in plain words.
    static func event(_ name: String) -> String {
        switch AuditEvent(rawValue: name) {
        case .registration: "Registered"
        case .login: "Signed in"
        case .loginFailure: "Failed sign-in"
        case .lockout: "Locked out"
        case .authenticatorLockout: "Authenticator locked"
        case .deregistration: "Deregistered"
        case .authenticatorRegistration: "Authenticator added"
        case .authenticatorDeregistration: "Authenticator removed"
        case .pinChange: "PIN changed"
        case .pushApproved: "Push approved"
        case .pushDenied: "Push denied"
        case .refreshTokenReuse: "Refresh token used twice"
        case .credentialReplay: "Credential replayed"
        case .deviceDisenrolled: "Device disenrolled"
        case .adminRevokeSessions: "Sessions revoked by an admin"
        case .adminRemoveAuthenticator: "Authenticator removed by an admin"
        case .adminDisenrolDevice: "Device disenrolled by an admin"
        case .adminDeregisterProfile: "Profile deregistered by an admin"
        case .adminClearLockout: "Failed attempts cleared by an admin"
        case .operatorSignIn: "Operator signed in to the console"
        case .operatorSignInRefused: "Operator's sign-in refused"
        case .passkeyAdded: "Passkey added at the login"
        case .passkeyRemoved: "Passkey removed at the login"
        case .clientAuthenticationFailure: "Wrong API client secret"
        case nil: name
        }
    }

    /// How an event's row is marked: `bad` for failures and alarms, `admin` for admins' actions.
    static func tone(_ name: String) -> String {
        switch AuditEvent(rawValue: name) {
        case .loginFailure, .lockout, .authenticatorLockout, .refreshTokenReuse, .credentialReplay, .pushDenied,
            .operatorSignInRefused, .clientAuthenticationFailure:
            "bad"
        case .adminRevokeSessions, .adminRemoveAuthenticator, .adminDisenrolDevice, .adminDeregisterProfile,
            .adminClearLockout, .operatorSignIn:
            "admin"
        default: ""
        }
    }

    /// Who did it, in plain words: `alice@example.com (operator)`, `the user`.
    static func actor(_ actor: String) -> String {
        if actor.hasPrefix("operator:") { return String(actor.dropFirst("operator:".count)) + " (operator)" }
        if actor.hasPrefix("admin_client:") { return String(actor.dropFirst("admin_client:".count)) + " (admin API)" }
        switch actor {
        case "user": return "the user"
        case "server": return "the server"
        default: return actor
        }
    }

    /// An event's details as one line: `authenticator: face · reason: expired`.
    static func detail(_ detail: [String: String]) -> String {
        detail.keys.sorted().map { "\($0.replacingOccurrences(of: "_", with: " ")): \(detail[$0] ?? "")" }
            .joined(separator: " · ")
    }

    /// `1 session`, `2 sessions`.
    static func count(_ number: Int, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
    }
}
