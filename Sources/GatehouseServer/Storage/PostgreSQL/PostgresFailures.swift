import Foundation
import GatehouseProtocol
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization

// What PostgreSQL failures mean: which may be tried again, and how each is said to a person.
extension PostgresSession {
    /// Failures that say nothing about the request: the database is busy, restarting or gone
    /// (a lock or statement timeout, too many connections, an administrator's shutdown, a lost
    /// connection). The request may be tried again.
    static func isUnavailable(_ error: PSQLError) -> Bool {
        if let state = error.serverInfo?[.sqlState] {
            return ["55P03", "57014", "53300", "57P01", "57P02", "57P03", "08000", "08003", "08006"].contains(state)
        }
        return connectionLostCodes.contains(error.code)
    }

    /// postgres-nio's codes for a connection that closed or failed underneath, no server answer.
    static let connectionLostCodes: [PSQLError.Code] = [
        .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown,
    ]

    /// The connection is gone or going: the server ended the session (57P0x), or it failed
    /// underneath (08xxx, closed, reset).
    static func isConnectionFailure(_ error: PSQLError) -> Bool {
        if let state = error.serverInfo?[.sqlState] {
            return state.hasPrefix("08") || state.hasPrefix("57P")
        }
        return connectionLostCodes.contains(error.code)
    }

    /// A failure to connect that may pass by itself: nothing answered, the connection failed, or
    /// the server is not (yet) the primary; not a refused password or an unknown database.
    static func mayPass(_ error: any Error) -> Bool {
        switch error {
        case is ChannelError, is IOError, is NIOConnectionError, is PostgresServerReadOnly: true
        case let error as PSQLError:
            error.serverInfo == nil
                ? connectionLostCodes.contains(error.code) || error.underlying.map(mayPass) == true
                : isUnavailable(error)
        default: false
        }
    }

    static func isSerializationFailure(_ error: any Error) -> Bool {
        guard let state = (error as? PSQLError)?.serverInfo?[.sqlState] else { return false }
        return state == "40001" || state == "40P01"
    }

    /// PSQLError's description says nothing, by design (it may carry data); the store's own
    /// errors pass through, the database's become a 503 (busy, unreachable) or a description an
    /// operator can act on.
    static func explained(_ error: any Error) -> any Error {
        if let unavailable = error as? DatabaseUnavailable {
            let message =
                unavailable.reason == .stopping
                ? "The server is stopping; try again."
                : "The server's database is busy or unreachable; try again."
            return StoreRefusal.busy(message)
        }
        // Tables altered twice under one call (two migrations at once): the next call prepares afresh.
        if error is StalePreparedStatements {
            return StoreRefusal.busy("The server's database tables changed; try again.")
        }
        // The connection's channel failed underneath postgres-nio (reset, closed mid-write), or
        // no server of the URL's would do for a reason that passes (down, or none accepting
        // writes: a failover under way). A refusal that stays (a wrong password on every server)
        // is said as it is.
        if error is ChannelError || error is IOError || error is PostgresServerReadOnly {
            return StoreRefusal.busy("The server's database is unreachable; try again.")
        }
        if let refused = error as? PostgresServersRefused {
            guard refused.failures.allSatisfy({ mayPass($0.error) }) else {
                return PostgresSessionError(reason: reason(refused))
            }
            return StoreRefusal.busy("The server's database is unreachable; try again.")
        }
        guard let error = error as? PSQLError else { return error }
        if isSerializationFailure(error) {
            return StoreRefusal.busy("The server is busy with this account; try again.")
        }
        if isUnavailable(error) {
            return StoreRefusal.busy("The server's database is busy or unreachable; try again.")
        }
        return PostgresSessionError(reason: reason(error))
    }

    /// What went wrong, for an operator: the server's message and SQLSTATE, or (the server never
    /// reached) what failed underneath: a refused or timed-out connection, a TLS handshake.
    static func describe(_ error: any Error) -> String { "PostgreSQL: \(reason(error))" }

    /// Why the database failed, as the end of a sentence that names it (``DatabaseFailure``): the
    /// server's own message with its SQLSTATE, or what failed underneath before the server
    /// answered (nothing listening, an unknown host, TLS), in words, never a Swift description.
    static func reason(_ error: any Error) -> String {
        switch error {
        case let error as ServerDatabaseError:
            return error.description
        case let error as PostgresSessionError:
            return error.reason
        case is PostgresServerReadOnly:
            return "the server accepts no writes (a standby in recovery, or transaction_read_only is on), and the "
                + "URL asks for one that does (target_session_attrs=read-write)"
        case let error as PostgresServersRefused:
            return "no server of the URL's would do: "
                + error.failures.map { "\($0.host): \(reason($0.error))" }.joined(separator: "; ")
        case let error as PSQLError:
            if let message = error.serverInfo?[.message] {
                let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
                return "the server answered: \(message)\(state)"
            }
            switch error.code {
            case .sslUnsupported:
                return "the server does not offer TLS, which the URL requires; add sslmode=disable only if the "
                    + "database is on this host or a private network (docs/CLUSTER.md)"
            case .authMechanismRequiresPassword:
                return "the server asks for a password and the URL gives none (postgres://USER:PASSWORD@HOST/DATABASE)"
            case .unsupportedAuthMechanism:
                return "the server asks for an authentication method Gatehouse cannot use; allow scram-sha-256 "
                    + "or md5 for this user in pg_hba.conf"
            case .saslError:
                return "SCRAM authentication with the server failed"
            case .serverClosedConnection, .uncleanShutdown:
                return "the server closed the connection"
            default:
                return error.underlying.map(underneath) ?? "the PostgreSQL client failed (\(error.code))"
            }
        default:
            return underneath(error)
        }
    }

    /// A failure below PostgreSQL's protocol: connecting, resolving the host, TLS.
    private static func underneath(_ error: any Error) -> String {
        switch error {
        case let error as NIOConnectionError:
            if error.dnsAError != nil || error.dnsAAAAError != nil {
                return "the host \(error.host) is not known (its name does not resolve)"
            }
            let errnos = error.connectionErrors.compactMap { ($0.error as? IOError)?.errnoCode }
            let address = "\(error.host):\(error.port)"
            if errnos.contains(ECONNREFUSED) {
                return "nothing accepts connections at \(address) (is PostgreSQL running and listening there?)"
            }
            if let code = errnos.first {
                return "cannot connect to \(address): \(String(cString: strerror(code)).lowercased())"
            }
            return "cannot connect to \(address)"
        case ChannelError.connectTimeout(let limit):
            return "no answer from the server within \(limit.nanoseconds / 1_000_000_000) s"
        case let error as IOError:
            return "the connection failed: \(String(cString: strerror(error.errnoCode)).lowercased())"
        case let error as NIOSSLError:
            return "the TLS handshake with the server failed (\(tlsReason(error))); check its certificate, or "
                + "that it offers TLS at all"
        default:
            return "an unexpected failure (\(String(reflecting: type(of: error))))"
        }
    }

    /// BoringSSL's reason for a failed handshake, e.g. CERTIFICATE_VERIFY_FAILED.
    private static func tlsReason(_ error: NIOSSLError) -> String {
        guard case .handshakeFailed(let inner) = error else { return "the TLS session failed" }
        let text = "\(inner)"
        let reasons = text.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") })
            .filter { $0.count > 3 && $0.allSatisfy { $0.isUppercase || $0 == "_" || $0.isNumber } }
        return reasons.last.map { String($0) } ?? "handshake failed"
    }
}

/// A pooled connection that was closed before its transaction began.
struct StaleConnection: Error {}

/// A database failure the server cannot do more about than tell: ``PostgresSession/reason(_:)``.
struct PostgresSessionError: Error, CustomStringConvertible {
    var reason: String
    var description: String { "PostgreSQL: \(reason)" }
}

/// A statement's results changed under its prepared plan (another instance's migration altered
/// a table it reads): the call failed, changed nothing, and runs again with statements prepared
/// afresh.
struct StalePreparedStatements: Error {}
