/// The paths of the token server's endpoints.
public enum Endpoint {
    /// Liveness: the process answers.
    public static let health = "/health"
    /// Readiness: the process answers and its database does.
    public static let ready = "/ready"
    /// The server's metrics in the Prometheus text format (served by `gatehouse serve`).
    public static let metrics = "/metrics"
    public static let configuration = "/v1/configuration"
    public static let clients = "/v1/clients"
    public static let registration = "/v1/registration"
    public static let authentication = "/v1/authentication"
    public static let changePin = "/v1/pin/change"
    public static let flowPrefix = "/v1/flows/"
    public static let token = "/v1/token"
    public static let revoke = "/v1/revoke"
    public static let introspect = "/v1/introspect"
    /// App-to-web single sign-on: a one-time login token for a web address.
    public static let webLogin = "/v1/web-login"
    /// Where the browser redeems the login token (it lands on the target, signed in).
    public static let webSignIn = "/web/sign-in"
    /// The page the server hosts for a web session: who is signed in.
    public static let webSession = "/web/session"
    public static let metadata = "/.well-known/oauth-authorization-server"
    public static let deregister = "/v1/deregister"
    public static let profileResource = "/v1/resource/profile"
    public static let authenticators = "/v1/authenticators"
    public static let authenticatorRegistration = "/v1/authenticators/register"
    public static let authenticatorDeregistration = "/v1/authenticators/deregister"

    public static let mobileAuthEnrolment = "/v1/mobile-auth/enrolment"
    public static let mobileAuthStatus = "/v1/mobile-auth/status"
    public static let pushEnrolment = "/v1/mobile-auth/push-enrolment"
    public static let pushToken = "/v1/mobile-auth/push-token"
    public static let mobileAuthPending = "/v1/mobile-auth/pending"
    public static let mobileAuthEvents = "/v1/mobile-auth/events"
    public static let mobileAuthTransactionPrefix = "/v1/mobile-auth/transactions/"
    public static let portalMobileAuth = "/v1/portal/mobile-auth"

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
        return nil
    }

    private static let templates = Set(all + [metrics])

    public static func flow(_ id: String) -> String { flowPrefix + id }
    public static func mobileAuthTransaction(_ id: String, profile: String) -> String {
        mobileAuthTransactionPrefix + id + "?profile=" + profile
    }
    public static func mobileAuthAnswer(_ id: String, profile: String) -> String {
        mobileAuthTransactionPrefix + id + "/answer?profile=" + profile
    }
    public static func portalTransaction(_ id: String) -> String { portalMobileAuth + "/" + id }

    /// Every path the token server serves, flows as their template.
    public static let all: [String] = [
        health, ready, configuration, clients, registration, authentication, changePin, flowPrefix + "{flowID}", token,
        revoke,
        introspect, metadata, webLogin, webSignIn, webSession, deregister, profileResource, authenticators,
        authenticatorRegistration,
        authenticatorDeregistration,
        mobileAuthEnrolment, mobileAuthStatus, pushEnrolment, pushToken, mobileAuthPending, mobileAuthEvents,
        mobileAuthTransactionPrefix + "{transactionID}", mobileAuthTransactionPrefix + "{transactionID}/answer",
        portalMobileAuth, portalMobileAuth + "/{transactionID}",
    ]
}
