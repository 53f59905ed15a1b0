/// The paths of the token server's endpoints.
public enum Endpoint {
    /// Liveness: the process answers.
    public static let health = "/health"
    /// Readiness: the process answers and its database does.
    public static let ready = "/ready"
    /// The server's metrics in the Prometheus text format (served by `gatehouse serve`).
    public static let metrics = "/metrics"
    /// `GET`: what the server offers, its identity providers and authenticators.
    public static let configuration = "/v1/configuration"
    /// `POST`: an app installation registers its key and gets a client id.
    public static let clients = "/v1/clients"
    /// `POST`: start registering a user through an identity provider.
    public static let registration = "/v1/registration"
    /// `POST`: start authenticating a profile with the PIN or another authenticator.
    public static let authentication = "/v1/authentication"
    /// `POST` with the session's access token: start a flow that checks the current PIN, then enrols a new one.
    public static let changePin = "/v1/pin/change"
    /// The prefix of a flow's path, `/v1/flows/{flowID}`; ``flow(_:)`` builds one.
    public static let flowPrefix = "/v1/flows/"
    /// `POST`: the token endpoint (RFC 6749), for the grants of ``GrantType``.
    public static let token = "/v1/token"
    /// `POST`: revoke an access or refresh token (RFC 7009).
    public static let revoke = "/v1/revoke"
    /// `POST` with HTTP Basic: a resource server asks what an access token is (RFC 7662).
    public static let introspect = "/v1/introspect"
    /// App-to-web single sign-on: a one-time login token for a web address.
    public static let webLogin = "/v1/web-login"
    /// Where the browser redeems the login token (it lands on the target, signed in).
    public static let webSignIn = "/web/sign-in"
    /// The page the server hosts for a web session: who is signed in.
    public static let webSession = "/web/session"
    /// `GET`: the authorization server metadata (RFC 8414).
    public static let metadata = "/.well-known/oauth-authorization-server"
    /// `POST`: deregister a profile, revoking all its tokens.
    public static let deregister = "/v1/deregister"
    /// `GET` with an access token: the example protected resource.
    public static let profileResource = "/v1/resource/profile"
    /// `GET` with an access token: the server's authenticators, and which the profile has registered.
    public static let authenticators = "/v1/authenticators"
    /// `POST` with an access token: start a flow that registers another authenticator for the profile.
    public static let authenticatorRegistration = "/v1/authenticators/register"
    /// `POST` with an access token: deregister one of the profile's authenticators (never the PIN).
    public static let authenticatorDeregistration = "/v1/authenticators/deregister"

    /// `POST` with an access token: enrol the profile's HPKE key for mobile authentication.
    public static let mobileAuthEnrolment = "/v1/mobile-auth/enrolment"
    /// `GET` with an access token: whether the profile is enrolled, and for push.
    public static let mobileAuthStatus = "/v1/mobile-auth/status"
    /// `POST` with an access token: enrol the profile for push, after the mobile authentication enrolment.
    public static let pushEnrolment = "/v1/mobile-auth/push-enrolment"
    /// `POST` with an access token: replace the profile's push token when the push service issues a new one.
    public static let pushToken = "/v1/mobile-auth/push-token"
    /// `GET`, signed with the profile key: the profile's pending requests, for when pushes are lost.
    public static let mobileAuthPending = "/v1/mobile-auth/pending"
    /// `GET`, signed with the profile key: the profile's requests as server-sent events.
    public static let mobileAuthEvents = "/v1/mobile-auth/events"
    /// `POST`, signed with the profile key: claim the transaction of a scanned OTP (``MobileAuthOTP``).
    public static let mobileAuthOTP = "/v1/mobile-auth/otp"
    /// The prefix of a transaction's paths; ``mobileAuthTransaction(_:profile:)`` and ``mobileAuthAnswer(_:profile:)``
    /// build them.
    public static let mobileAuthTransactionPrefix = "/v1/mobile-auth/transactions/"
    /// `POST` with HTTP Basic: a portal starts a mobile authentication transaction for a user.
    public static let portalMobileAuth = "/v1/portal/mobile-auth"

    /// `GET` with an admin token (`admin:read`): find users by identity provider and subject, a
    /// subject's beginning, a profile or an installation.
    public static let adminUsers = "/v1/admin/users"
    /// `GET` with an admin token (`admin:read`): one user's profiles, devices, sessions and pending transactions.
    public static let adminUser = "/v1/admin/user"
    /// The prefix of a profile's admin paths: `DELETE …/{profileID}` deregisters it; `POST
    /// …/{profileID}/revoke-sessions`, `POST …/{profileID}/clear-lockout`, `DELETE
    /// …/{profileID}/push-enrolment`, `DELETE …/{profileID}/authenticators/{authenticator}` (`admin:write`).
    public static let adminProfilesPrefix = "/v1/admin/profiles/"
    /// `GET` with an admin token (`admin:read`): a page of the audit trail, newest first.
    public static let adminAudit = "/v1/admin/audit"
    /// `GET` with an admin token (`admin:read`): the audit trail as JSON lines, oldest first.
    public static let adminAuditExport = "/v1/admin/audit/export"

    /// The template of the endpoint `path` belongs to (`/v1/flows/{flowID}` for any flow), or
    /// nil for a path the server does not serve: a closed set, fit for metric labels.
    public static func template(of path: String) -> String? {
        if templates.contains(path) { return path }
        if path.hasPrefix(flowPrefix) { return flowPrefix + "{flowID}" }
        if path.hasPrefix(mobileAuthTransactionPrefix) {
            return mobileAuthTransactionPrefix
                + (path.hasSuffix("/answer") ? "{transactionID}/answer" : "{transactionID}")
        }
        if path.hasPrefix(portalMobileAuth + "/") { return portalMobileAuth + "/{transactionID}" }
        if path.hasPrefix(adminProfilesPrefix) {
            let rest = path.dropFirst(adminProfilesPrefix.count).split(separator: "/", omittingEmptySubsequences: false)
            switch rest.count {
            case 1: return adminProfilesPrefix + "{profileID}"
            case 2 where ["revoke-sessions", "clear-lockout", "push-enrolment"].contains(rest[1]):
                return adminProfilesPrefix + "{profileID}/" + rest[1]
            case 3 where rest[1] == "authenticators":
                return adminProfilesPrefix + "{profileID}/authenticators/{authenticator}"
            default: return adminProfilesPrefix + "{profileID}/*"
            }
        }
        return nil
    }

    private static let templates = Set(all + [metrics])

    /// The path of the flow with this id.
    public static func flow(_ id: String) -> String { flowPrefix + id }
    /// The path that fetches a transaction's sealed payload, with the profile it is for in the query.
    public static func mobileAuthTransaction(_ id: String, profile: String) -> String {
        mobileAuthTransactionPrefix + id + "?profile=" + profile
    }
    /// The path that answers a transaction, with the profile it is for in the query.
    public static func mobileAuthAnswer(_ id: String, profile: String) -> String {
        mobileAuthTransactionPrefix + id + "/answer?profile=" + profile
    }
    /// The path where a portal reads a transaction's result.
    public static func portalTransaction(_ id: String) -> String { portalMobileAuth + "/" + id }

    /// Every path the token server serves, flows as their template.
    public static let all: [String] = [
        health, ready, configuration, clients, registration, authentication, changePin, flowPrefix + "{flowID}", token,
        revoke,
        introspect, metadata, webLogin, webSignIn, webSession, deregister, profileResource, authenticators,
        authenticatorRegistration,
        authenticatorDeregistration,
        mobileAuthEnrolment, mobileAuthStatus, pushEnrolment, pushToken, mobileAuthPending, mobileAuthEvents,
        mobileAuthOTP, mobileAuthTransactionPrefix + "{transactionID}",
        mobileAuthTransactionPrefix + "{transactionID}/answer",
        portalMobileAuth, portalMobileAuth + "/{transactionID}",
        adminUsers, adminUser, adminProfilesPrefix + "{profileID}", adminProfilesPrefix + "{profileID}/revoke-sessions",
        adminProfilesPrefix + "{profileID}/clear-lockout", adminProfilesPrefix + "{profileID}/push-enrolment",
        adminProfilesPrefix + "{profileID}/authenticators/{authenticator}", adminAudit, adminAuditExport,
    ]
}
