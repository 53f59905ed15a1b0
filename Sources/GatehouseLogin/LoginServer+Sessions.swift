import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

// One sign-in per browser: the session cookie, the subject each client sees, and what ends a
// session.

extension LoginServer {
    /// The session cookie's name.
    static let sessionCookie = "gh_sso"
    /// `acr` of a password sign-in at the login (one factor).
    static let passwordACR = "urn:gatehouse:acr:password"

    /// The live session the request's cookie names.
    func browserSession(_ request: WireRequest) async throws -> LoginSession? {
        guard let value = cookie(Self.sessionCookie, in: request), (1...128).contains(value.utf8.count) else {
            return nil
        }
        return try await store.session(cookie: value, now: now)
    }

    /// Starts a session for `subject` and returns it with the `Set-Cookie` value that names it.
    /// A session the browser had before ends (its clients are told), so one browser has one.
    func beginBrowserSession(
        replacing request: WireRequest?,
        subject: String,
        amr: [String],
        acr: String
    ) async throws -> (LoginSession, String) {
        if let request, let earlier = try await browserSession(request) {
            try await endSession(earlier.id)
        }
        let (session, value) = try await store.startSession(
            subject: subject,
            amr: amr,
            acr: acr,
            expiresAt: now + Double(configuration.sessionLifetime),
            now: now
        )
        return (session, sessionCookie(value, maxAge: configuration.sessionLifetime))
    }

    /// The session cookie: sent on top-level navigations from other sites (SameSite=Lax), which
    /// is how a relying party's redirect finds the user signed in, never to scripts.
    func sessionCookie(_ value: String, maxAge: Int) -> String {
        "\(Self.sessionCookie)=\(value); Path=/login/; HttpOnly; SameSite=Lax; Max-Age=\(maxAge)"
            + (secureCookies ? "; Secure" : "")
    }

    /// Ends session `id`: its tokens are revoked and every client that took part with a
    /// back-channel logout URI is sent a logout token. Returns the clients, nil when it had ended.
    @discardableResult
    func endSession(_ id: String) async throws -> [String]? {
        let clients = configuration.clients
        let subjects = try await subjectSecrets()
        let ended = try await store.endSession(id, now: now) { subject, taking in
            taking.compactMap { clientID in
                guard let client = clients.first(where: { $0.id == clientID }), let uri = client.backchannelLogoutURI
                else { return nil }
                return LoginStore.OwedLogout(
                    clientID: clientID,
                    uri: uri,
                    subject: Self.publicSubject(subject, for: client, pairwiseSecret: subjects),
                    sessionID: Self.publicSessionID(id, for: client, pairwiseSecret: subjects)
                )
            }
        }
        guard let ended else { return nil }
        logger.info("Signed out", metadata: ["clients": "\(ended.clients.count)"])
        deliverLogouts()
        return ended.clients
    }

    // MARK: - App-to-web sign-on

    /// `acr` of a session started from the app (its device key and the app's own sign-in).
    static let appACR = "urn:gatehouse:acr:app"

    /// Starts a session for an app's user whose one-time login token the token server redeemed.
    /// An app user of an identity provider that signs in here is the same user; one of another
    /// provider is `provider|subject`. The method is the device's key (`hwk`): the token came
    /// with a proof of it.
    public func startBrowserSession(subject: String, identityProvider: String, cookies: String?) async throws -> String
    {
        let local = directoryIdentityProviders.contains(identityProvider) ? subject : "\(identityProvider)|\(subject)"
        let request = cookies.map { WireRequest(method: "GET", path: "/", headers: ["Cookie": $0]) }
        let (_, cookie) = try await beginBrowserSession(
            replacing: request,
            subject: local,
            amr: ["hwk"],
            acr: Self.appACR
        )
        return cookie
    }

    // MARK: - Subjects

    /// The secret pairwise subjects are derived with (made once, shared by every instance).
    func subjectSecrets() async throws -> Data {
        if let known = pairwiseSecret.withLock({ $0 }) { return known }
        let secret = try await store.secret("pairwise-subject")
        pairwiseSecret.withLock { $0 = secret }
        return secret
    }

    /// `subject` as `client` sees it.
    func publicSubject(_ subject: String, for client: LoginConfiguration.Client) async throws -> String {
        Self.publicSubject(subject, for: client, pairwiseSecret: try await subjectSecrets())
    }

    /// The user's subject for a public client; for a pairwise one, base64url of an HMAC of the
    /// client's sector and the subject (Core 1.0 §8.1): stable for that sector, unlinkable across.
    static func publicSubject(
        _ subject: String,
        for client: LoginConfiguration.Client,
        pairwiseSecret: Data
    ) -> String {
        switch client.subjectType {
        case .public: return subject
        case .pairwise:
            let mac = HMAC<SHA256>.authenticationCode(
                for: Data("\(client.sector)\u{0}\(subject)".utf8),
                using: SymmetricKey(data: pairwiseSecret)
            )
            return Data(mac).base64URLEncodedString
        }
    }

    /// Session id `sid` as `client` sees it: a pairwise client gets one of its own (an HMAC of its
    /// sector and the session id), so two sectors cannot link their users through it either.
    func publicSessionID(_ sid: String, for client: LoginConfiguration.Client) async throws -> String {
        Self.publicSessionID(sid, for: client, pairwiseSecret: try await subjectSecrets())
    }

    static func publicSessionID(_ sid: String, for client: LoginConfiguration.Client, pairwiseSecret: Data) -> String {
        guard client.subjectType == .pairwise else { return sid }
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data("sid\u{0}\(client.sector)\u{0}\(sid)".utf8),
            using: SymmetricKey(data: pairwiseSecret)
        )
        return Data(mac).prefix(18).base64URLEncodedString
    }

    /// The subject (as `clientID` sees it) of an ID token this provider signed for that client;
    /// nil when it is not one (its expiry does not matter: a hint may be old).
    func hintedSubject(_ token: String, clientID: String) async -> String? {
        guard let claims = try? await verifiedIDToken(token), claims.aud.contains(clientID) else { return nil }
        return claims.sub
    }
}
