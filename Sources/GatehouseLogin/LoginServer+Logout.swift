import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

// RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0). The browser goes back only to a
// post-logout redirect URI registered for the client the request names, compared exactly; any
// other address is refused on a page of our own. A session ends at once when the request carries
// an ID token of that very session (id_token_hint with its sid); otherwise the user confirms on
// a page of ours, so a link on another site cannot sign anyone out.

extension LoginServer {
    func logout(_ request: WireRequest) async throws -> WireResponse {
        let fields: FormFields
        if request.method == "POST" {
            guard
                request.header("Content-Type")?.lowercased().split(separator: ";").first
                    == "application/x-www-form-urlencoded",
                request.body.count <= 16_384, let form = FormFields(body: request.body)
            else { throw LoginError("The sign-out form could not be read.") }
            fields = form
        } else {
            guard request.path.utf8.count <= 16_384 + 4096, let query = FormFields(queryOf: request.path) else {
                throw LoginError("The sign-out link is malformed.")
            }
            fields = query
        }
        let state = fields["state"]
        if let state, !(1...512).contains(state.utf8.count) {
            throw LoginError("The sign-out link's state is too long.")
        }
        var hint: IDTokenClaims?
        if let token = fields["id_token_hint"] {
            guard let claims = try? await verifiedIDToken(token) else {
                throw LoginError(
                    "The sign-out link carries an ID token this login did not issue, or whose key it no longer publishes."
                )
            }
            hint = claims
        }
        var client: LoginConfiguration.Client?
        if let id = fields["client_id"] {
            guard let named = configuration.clients.first(where: { $0.id == id }) else {
                throw LoginError("The sign-out link names no application this login knows.")
            }
            if let hint, !hint.aud.contains(named.id) {
                throw LoginError("The sign-out link's ID token was issued to another application.")
            }
            client = named
        } else if let hint {
            client = configuration.clients.first { hint.aud.contains($0.id) }
        }
        var target: String?
        if let uri = fields["post_logout_redirect_uri"] {
            // Byte for byte, as redirect URIs (LoginConfiguration.allows).
            guard let client, uri.utf8.allSatisfy({ $0 < 0x80 }),
                client.postLogoutRedirectURIs.contains(where: { $0.utf8.elementsEqual(uri.utf8) })
            else {
                throw LoginError("The sign-out link's return address is not registered for that application.")
            }
            target = uri
        }
        guard let session = try await browserSession(request), let value = cookie(Self.sessionCookie, in: request)
        else {
            return signedOut(target, state: state)
        }
        let confirmation = logoutConfirmation(for: value)
        // The hint's sid is the session's as the hint's client knows it.
        var confirmedByHint = false
        if let hint, let sid = hint.sid, let hinted = configuration.clients.first(where: { hint.aud.contains($0.id) }) {
            confirmedByHint = ConstantTime.equals(sid, try await publicSessionID(session.id, for: hinted))
        }
        let confirmedByUser =
            request.method == "POST" && fields["confirm"] == "yes"
            && fields["csrf"].map { ConstantTime.equals($0, confirmation) } == true
            && request.header("Sec-Fetch-Site")?.lowercased() != "cross-site"
        if confirmedByHint || confirmedByUser {
            try await endSession(session.id)
            return signedOut(target, state: state)
        }
        var carried: [[String: String]] = []
        for name in ["id_token_hint", "client_id", "post_logout_redirect_uri", "state"] {
            if let value = fields[name] { carried.append(["name": name, "value": value]) }
        }
        var values: [String: Any] = [
            "username": session.subject, "csrf": confirmation, "action": Self.logoutPath, "fields": carried,
        ]
        if let client { values["client"] = client.name }
        return page(200, "Sign out", template: "logout", values, formTarget: target.flatMap(origin(of:)))
    }

    /// The confirmation the sign-out form carries: a MAC under the browser's own session cookie,
    /// which another site can neither read nor guess.
    private func logoutConfirmation(for cookie: String) -> String {
        Data(
            HMAC<SHA256>.authenticationCode(
                for: Data("gatehouse logout".utf8),
                using: SymmetricKey(data: Data(cookie.utf8))
            )
        )
        .base64URLEncodedString
    }

    /// The browser is signed out: its cookie is cleared, and it goes to `target` (with `state`)
    /// or sees a page saying so.
    private func signedOut(_ target: String?, state: String?) -> WireResponse {
        var response: WireResponse
        if let target {
            response = redirect(target, state.map { [("state", $0)] } ?? [])
        } else {
            response = page(
                200,
                "Signed out",
                template: "notice",
                ["heading": "Signed out", "message": "You are signed out."]
            )
        }
        // The app-to-web session on the server's own /web/ pages ends with it: signing out here
        // signs the browser out of everything this server signed it in to.
        response.headers["Set-Cookie"] =
            sessionCookie("", maxAge: 0) + "\ngh_web=; Path=/web/; HttpOnly; SameSite=Lax; Max-Age=0"
            + (secureCookies ? "; Secure" : "")
        return response
    }

    // MARK: - Back-channel logout

    /// Delivers the logouts that are due, in the background; each is tried again with a growing
    /// pause until a day has passed.
    func deliverLogouts() {
        let store = store
        let keyRing = keyRing
        let issuer = issuer
        let clock = clock
        let deliverer = logoutDelivery
        Task {
            await deliverer.deliverDue(
                store: store,
                keyRing: keyRing,
                issuer: issuer,
                now: { clock.now.timeIntervalSince1970 }
            )
        }
    }

    /// Delivers the due back-channel logouts now and waits for them (tests, and the periodic sweep).
    public func deliverPendingLogouts() async {
        await logoutDelivery.deliverDue(store: store, keyRing: keyRing, issuer: issuer) { [clock] in
            clock.now.timeIntervalSince1970
        }
    }

    /// Back-channel logouts not yet delivered.
    public func pendingLogouts() async throws -> Int { try await store.pendingLogoutDeliveries() }
}
