import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging

// The authorization endpoint and the forms behind it. Until the client and its redirect URI are
// known to be registered, problems are shown on a page; after that they go back to the client
// as OAuth errors on its redirect URI (RFC 6749 §4.1.2.1).

extension LoginServer {
    func authorize(_ request: WireRequest) async throws -> WireResponse {
        // Each page stores its authorization request: anyone may open one, not without end.
        if let refusal = limited(request, by: pageLimiter) { return refusal }
        guard request.path.utf8.count <= 4096, let query = FormFields(queryOf: request.path) else {
            throw LoginError("The sign-in link is malformed.")
        }
        guard let clientID = query["client_id"], let client = pageClient(clientID)
        else { throw LoginError("The sign-in link names no application this login knows.") }
        guard let redirectURI = query["redirect_uri"], LoginConfiguration.allows(redirectURI, for: client) else {
            throw LoginError("The sign-in link's return address is not registered for \(client.name).")
        }
        let state = query["state"] ?? ""
        func refuse(_ error: String, _ description: String) -> WireResponse {
            // A state too long to accept is not echoed either.
            let echoed = (1...512).contains(state.utf8.count) ? [("state", state)] : []
            // The issuer on errors too (RFC 9207), so a client of several providers knows which refused.
            return redirect(
                redirectURI,
                [("error", error), ("error_description", description)] + echoed + [("iss", issuer)]
            )
        }
        guard query["response_type"] == "code" else {
            return refuse("unsupported_response_type", "Only response_type=code is supported.")
        }
        guard (1...512).contains(state.utf8.count) else {
            return refuse("invalid_request", "A state of 1 to 512 characters is required.")
        }
        guard query["code_challenge_method"] == "S256", let challenge = query["code_challenge"],
            PKCE.isWellFormedChallenge(challenge)
        else { return refuse("invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256.") }
        // Only scopes the client may ask for: the consent page shows them, so free text must not reach it.
        let scopes = (query["scope"] ?? "").split(separator: " ").map(String.init)
        guard scopes.count <= 16, scopes.allSatisfy(client.scopes.contains) else {
            return refuse("invalid_scope", "Allowed scopes: \(client.scopes.joined(separator: " ")).")
        }
        let openID: OpenIDParameters
        switch OpenIDParameters.read(query) {
        case .success(let parameters): openID = parameters
        case .failure(let refusal): return refuse(refusal.error, refusal.description)
        }
        let scope = scopes.joined(separator: " ")
        let authorization = LoginStore.AuthorizationRequest(
            clientID: client.id,
            redirectURI: redirectURI,
            state: state,
            codeChallenge: challenge,
            scope: scope,
            nonce: openID.nonce,
            forceConsent: openID.prompt.contains(.consent),
            acrValues: openID.acrValues
        )
        // acr_values are required here: no method this client offers produces one of them, or
        // the client signs in elsewhere (federation), and the request cannot be met.
        let federated = client.federation != nil
        if !openID.acrValues.isEmpty,
            federated ? !openID.acrValues.contains(Self.federatedACR) : allowedMethods(client, authorization).isEmpty
        {
            return refuse(
                "unmet_authentication_requirements",
                "None of the acr_values can be met for \(client.name); it offers "
                    + (federated
                        ? Self.federatedACR
                        : Set(configuration.signInMethods(for: client).map(Self.acr)).sorted().joined(separator: " "))
                    + "."
            )
        }
        // One sign-in per browser: a session that satisfies the request signs in without a page.
        var session = try await browserSession(request)
        if let current = session {
            if openID.prompt.contains(.login) { session = nil }
            // Step-up: a session signed in some other way than the client requires signs in again.
            if !openID.acrValues.isEmpty, !openID.acrValues.contains(current.acr) { session = nil }
            // max_age=0 asks for a fresh sign-in whatever the clock says (Core 1.0 §3.1.2.1).
            if let maxAge = openID.maxAge, now - current.authTime >= Double(maxAge) { session = nil }
            if let hint = openID.idTokenHint {
                // A hint for another user: the browser's session is not the one the client means.
                guard let hinted = await hintedSubject(hint, clientID: client.id) else {
                    return refuse("invalid_request", "The id_token_hint is not an ID token this provider issued.")
                }
                if try await hinted != publicSubject(current.subject, for: client) { session = nil }
            }
        }
        if let session {
            if try await isConsented(client, session.subject, authorization) {
                let (id, _) = try await store.beginAuthorization(
                    authorization,
                    expiresAt: now + Double(configuration.pageLifetime),
                    now: now
                )
                return try await finish(id, session: session, authorization)
            }
            if openID.prompt.contains(.none) {
                return refuse("consent_required", "\(client.name) needs the user's consent, and prompt=none was asked.")
            }
            let (id, csrf) = try await store.beginAuthorization(
                authorization,
                expiresAt: now + Double(configuration.pageLifetime),
                now: now
            )
            try await store.authenticated(id, subject: session.subject)
            return consentPage(client, id: id, csrf: csrf, subject: session.subject, authorization, newCookie: true)
        }
        if openID.prompt.contains(.none) {
            return refuse("login_required", "The user is not signed in, and prompt=none was asked.")
        }
        if let name = client.federation, let provider = configuration.federation.first(where: { $0.id == name }) {
            let (id, _) = try await store.beginAuthorization(
                authorization,
                expiresAt: now + Double(configuration.pageLifetime),
                now: now
            )
            return try await startFederation(provider, authorizationID: id, loginHint: openID.loginHint)
        }
        let (id, csrf) = try await store.beginAuthorization(
            authorization,
            expiresAt: now + Double(configuration.pageLifetime),
            now: now
        )
        return loginPage(
            client,
            id: id,
            csrf: csrf,
            authorization,
            status: 200,
            username: openID.loginHint ?? "",
            newCookie: true
        )
    }

    /// A 429 page when `request`'s address has used up `limiter`, else nil.
    /// The page that refuses a request past a password check's limit: this instance's, then the
    /// one all instances share (a write; each check costs a password hash anyway).
    func passwordCheckLimited(_ request: WireRequest) async throws -> WireResponse? {
        if let refusal = limited(request, by: passwordLimiter) { return refusal }
        guard let seconds = try await sharedPasswordChecks.retryAfter(forAddress: request.clientAddress, now: now)
        else { return nil }
        return limitedPage(seconds)
    }

    func limited(_ request: WireRequest, by limiter: RateLimiter) -> WireResponse? {
        guard let seconds = limiter.retryAfter(forAddress: request.clientAddress, now: now) else { return nil }
        return limitedPage(seconds)
    }

    private func limitedPage(_ seconds: Int) -> WireResponse {
        let message = "Too many sign-in attempts from your address; try again in \(seconds) seconds."
        return page(
            429,
            "Too many attempts",
            ["heading": "Too many attempts", "message": message],
            headers: ["Retry-After": String(seconds)]
        )
    }

    func signIn(_ request: WireRequest) async throws -> WireResponse {
        // Counted before anything is read: every sign-in attempt may cost a password hash.
        if let refusal = try await passwordCheckLimited(request) { return refusal }
        let (fields, authorization, client) = try await submittedForm(request)
        guard let username = fields["username"], let password = fields["password"], !username.isEmpty,
            username.utf8.count <= 254, password.utf8.count <= 1024
        else { throw LoginError("Send an e-mail address and a password.") }
        let id = fields["authorization"] ?? ""
        let csrf = fields["csrf"] ?? ""
        guard allowedMethods(client, authorization).contains(.password) else {
            throw LoginError("\(client.name) does not take a password here.")
        }
        func again(_ error: String, status: Int) -> WireResponse {
            loginPage(client, id: id, csrf: csrf, authorization, status: status, error: error, username: username)
        }
        switch try await checkPassword(username: username, password: password) {
        case .wrong(let message): return again(message, status: 401)
        case .locked(let message): return again(message, status: 403)
        case .right: break
        }
        return try await signedIn(
            request,
            subject: LoginStore.normalized(username),
            amr: ["pwd"],
            acr: Self.passwordACR,
            client: client,
            authorization: authorization,
            id: id,
            csrf: csrf
        )
    }

    /// How a password check ended.
    enum PasswordCheck {
        case right
        case wrong(String)
        case locked(String)
    }

    /// Checks `password` for `username`: counted before it is checked (so concurrent guesses
    /// never exceed the lockout), an unknown user costing as much as a wrong password.
    func checkPassword(username: String, password: String) async throws -> PasswordCheck {
        let wrong = "Wrong e-mail address or password."
        switch try await store.beginLogin(
            username,
            maxFailures: configuration.maxFailedLogins,
            lockout: Double(configuration.lockoutDuration),
            now: now
        ) {
        case .unknownUser:
            let decoy = decoyHash
            _ = try await cpuWork.run { PasswordHasher.verify(password, against: decoy) }
            return .wrong(wrong)
        case .locked(let until):
            let minutes = max(1, Int((until - now) / 60 + 0.99))
            return .locked(
                "Too many wrong passwords: this account is locked for \(minutes) more minute\(minutes == 1 ? "" : "s")."
            )
        case .check(let passwordHash):
            guard try await cpuWork.run({ PasswordHasher.verify(password, against: passwordHash) }) else {
                return .wrong(wrong)
            }
        }
        try await store.loginSucceeded(username)
        return .right
    }

    /// The user proved who they are (`amr`, `acr`): a new browser session, then the consent page
    /// or the code. A sign-in that does not give what the client's `acr_values` ask is refused.
    func signedIn(
        _ request: WireRequest,
        subject: String,
        amr: [String],
        acr: String,
        client: LoginConfiguration.Client,
        authorization: LoginStore.AuthorizationRequest,
        id: String,
        csrf: String
    ) async throws -> WireResponse {
        guard authorization.acrValues.isEmpty || authorization.acrValues.contains(acr) else {
            throw LoginError("\(client.name) asks for another way of signing in. Start again in the app.")
        }
        let (session, sessionCookie) = try await beginBrowserSession(
            replacing: request,
            subject: subject,
            amr: amr,
            acr: acr
        )
        var response: WireResponse
        if try await isConsented(client, subject, authorization) {
            response = try await finish(id, session: session, authorization)
        } else {
            try await store.authenticated(id, subject: subject)
            response = consentPage(client, id: id, csrf: csrf, subject: subject, authorization, newCookie: false)
        }
        response.headers["Set-Cookie"] = sessionCookie
        return response
    }

    /// `acr` of a sign-in with `method`.
    static func acr(_ method: LoginConfiguration.SignInMethod) -> String {
        switch method {
        case .password: passwordACR
        case .push, .qr: phoneACR
        case .passkey: passkeyACR
        }
    }

    /// Every `acr` this login can produce (discovery's `acr_values_supported`).
    static func offeredACRs(_ configuration: LoginConfiguration) -> [String] {
        var acrs = Set(LoginConfiguration.SignInMethod.allCases.filter(configuration.offers).map(acr))
        acrs.insert(appACR)
        if !configuration.federation.isEmpty { acrs.insert(federatedACR) }
        return acrs.sorted()
    }

    /// The methods the sign-in page offers for this request: the client's, and of those the ones
    /// producing an `acr` the request asks for.
    func allowedMethods(
        _ client: LoginConfiguration.Client,
        _ authorization: LoginStore.AuthorizationRequest
    ) -> [LoginConfiguration.SignInMethod] {
        configuration.signInMethods(for: client).filter {
            (authorization.acrValues.isEmpty || authorization.acrValues.contains(Self.acr($0)))
                && ($0 != .passkey || webAuthnRelyingParty != nil)
        }
    }

    /// Whether `subject` may skip the consent page: the client asks for none, or the user allowed
    /// these scopes before and the request does not ask again (prompt=consent).
    func isConsented(
        _ client: LoginConfiguration.Client,
        _ subject: String,
        _ authorization: LoginStore.AuthorizationRequest
    ) async throws -> Bool {
        // prompt=consent is honoured for every client, also one that does not ask by itself.
        guard !authorization.forceConsent else { return false }
        guard client.consent else { return true }
        return try await store.hasConsent(subject: subject, clientID: client.id, scope: authorization.scope)
    }

    /// The consent page for a waiting authorization; `newCookie` sets its CSRF cookie (when no
    /// login page set it before).
    func consentPage(
        _ client: LoginConfiguration.Client,
        id: String,
        csrf: String,
        subject: String,
        _ authorization: LoginStore.AuthorizationRequest,
        newCookie: Bool
    ) -> WireResponse {
        page(
            200,
            "Allow \(client.name)?",
            template: "consent",
            [
                "client": client.name, "username": subject, "scope": authorization.scope, "authorization": id,
                "csrf": csrf, "action": Self.consentPath,
            ],
            formTarget: origin(of: authorization.redirectURI),
            headers: newCookie ? ["Set-Cookie": csrfCookie(id: id, csrf: csrf)] : [:]
        )
    }

    func consent(_ request: WireRequest) async throws -> WireResponse {
        let (fields, authorization, client) = try await submittedForm(request)
        let id = fields["authorization"] ?? ""
        guard let (_, subject) = try await store.authorization(id, csrf: fields["csrf"] ?? "", now: now),
            let subject
        else { throw LoginError("Sign in first.") }
        switch fields["decision"] {
        case "allow":
            // The session the user signed in with on the way here, in this browser.
            guard let session = try await browserSession(request), session.subject == subject else {
                throw LoginError("Your sign-in ended meanwhile. Start again in the app.")
            }
            // The session may have changed since the page (another sign-in in this browser): it
            // must still be one the request accepts.
            guard authorization.acrValues.isEmpty || authorization.acrValues.contains(session.acr) else {
                throw LoginError("\(client.name) asks for another way of signing in. Start again in the app.")
            }
            try await store.grantConsent(
                subject: subject,
                clientID: authorization.clientID,
                scope: authorization.scope,
                now: now
            )
            return try await finish(id, session: session, authorization)
        case "deny":
            try await store.cancelAuthorization(id)
            return redirect(
                authorization.redirectURI,
                [
                    ("error", "access_denied"), ("error_description", "The user did not allow it."),
                    ("state", authorization.state), ("iss", issuer),
                ]
            )
        default: throw LoginError("Choose Allow or Deny.")
        }
    }

    /// Issues the code for `session`'s user and sends the browser back to the client, with the
    /// issuer named (RFC 9207) so a client of several providers knows which one answered.
    func finish(
        _ id: String,
        session: LoginSession,
        _ authorization: LoginStore.AuthorizationRequest
    ) async throws -> WireResponse {
        let details = GrantDetails(
            nonce: authorization.nonce,
            authTime: session.authTime,
            sessionID: session.id,
            amr: session.amr,
            acr: session.acr
        )
        guard
            let code = try await store.issueCode(
                authorization: id,
                subject: session.subject,
                details: details,
                expiresAt: now + Double(configuration.codeLifetime)
            )
        else { throw LoginError("This sign-in was already finished.") }
        logger.info(
            "Signed in",
            metadata: ["client": "\(authorization.clientID)", "amr": "\(session.amr.joined(separator: " "))"]
        )
        return redirect(
            authorization.redirectURI,
            [("code", code), ("state", authorization.state), ("iss", issuer)]
        )
    }

    /// A posted form whose CSRF token matches both its waiting authorization and its cookie.
    func submittedForm(
        _ request: WireRequest
    ) async throws -> (FormFields, LoginStore.AuthorizationRequest, LoginConfiguration.Client) {
        guard
            request.header("Content-Type")?.lowercased().split(separator: ";").first
                == "application/x-www-form-urlencoded",
            request.body.count <= 8192, let fields = FormFields(body: request.body)
        else { throw LoginError("The form could not be read; send it from the sign-in page.") }
        let expired = LoginError("This sign-in page expired or was not sent from this site. Start again in the app.")
        guard let id = fields["authorization"], let csrf = fields["csrf"], !csrf.isEmpty,
            cookie(Self.cookieName(id), in: request).map({ ConstantTime.equals($0, csrf) }) == true,
            let (authorization, _) = try await store.authorization(id, csrf: csrf, now: now),
            let client = pageClient(authorization.clientID)
        else { throw expired }
        return (fields, authorization, client)
    }

    func loginPage(
        _ client: LoginConfiguration.Client,
        id: String,
        csrf: String,
        _ authorization: LoginStore.AuthorizationRequest,
        status: Int,
        error: String? = nil,
        username: String = "",
        newCookie: Bool = false
    ) -> WireResponse {
        let redirectURI = authorization.redirectURI
        let cookie = csrfCookie(id: id, csrf: csrf)
        let methods = allowedMethods(client, authorization)
        var values: [String: Any] = [
            "client": client.name, "authorization": id, "csrf": csrf, "action": Self.authorizePath,
            "username": username,
        ]
        // Only a present error may reach the template: Mustache would print a missing one as "nil".
        if let error { values["error"] = error }
        // Mustache sections: present only when offered.
        if methods.contains(.password) { values["password"] = true }
        if methods.contains(.push) { values["push"] = ["action": Self.phonePath] }
        if methods.contains(.qr) { values["qr"] = ["action": Self.qrPath] }
        if methods.contains(.passkey) {
            values["passkey"] = ["options": Self.passkeySignInOptionsPath, "action": Self.passkeySignInPath]
            values["script"] = Self.scriptPath
        }
        if methods.contains(.password) || methods.contains(.push) { values["identifier"] = true }
        if !configuration.federation.isEmpty, acceptsFederation(authorization) {
            values["providers"] = configuration.federation.map { ["id": $0.id, "name": $0.name] }
            values["federationAction"] = Self.federationStartPath
        }
        // The form may also be sent on to an external provider's sign-in page.
        let targets = [origin(of: redirectURI)] + configuration.federation.map { origin(of: $0.issuer) }
        return page(
            status,
            "Sign in",
            template: "login",
            values,
            formTarget: targets.compactMap { $0 }.joined(separator: " "),
            scripts: methods.contains(.passkey),
            headers: newCookie ? ["Set-Cookie": cookie] : [:]
        )
    }

    /// Whether signing in through a federated provider gives what the request asks.
    func acceptsFederation(_ authorization: LoginStore.AuthorizationRequest) -> Bool {
        authorization.acrValues.isEmpty || authorization.acrValues.contains(Self.federatedACR)
    }

    /// The token travels in the form and in a cookie only this site can set (double submit),
    /// besides matching its hash on the server.
    func csrfCookie(id: String, csrf: String) -> String {
        "\(Self.cookieName(id))=\(csrf); Path=/login/; HttpOnly; SameSite=Strict; Max-Age=\(configuration.pageLifetime)"
            + (secureCookies ? "; Secure" : "")
    }

    static func cookieName(_ id: String) -> String {
        "gh_csrf_"
            + String(id.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }.prefix(32))
    }

    func cookie(_ name: String, in request: WireRequest) -> String? {
        for pair in (request.header("Cookie") ?? "").split(separator: ";") {
            let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == name { return String(parts[1]) }
        }
        return nil
    }

    /// `scheme://host[:port]` of `uri`, for the page's form-action policy.
    func origin(of uri: String) -> String? {
        guard let parts = URLComponents(string: uri), let scheme = parts.scheme, let host = parts.host else {
            return nil
        }
        // Foundation keeps an IPv6 literal's brackets in `host` on some platforms, not on others.
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(bracketed)" + (parts.port.map { ":\($0)" } ?? "")
    }
}
