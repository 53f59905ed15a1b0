import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

// Signing in at the hosted login, the console session, its forms' tokens, and signing out.

extension AdminConsole {
    /// A signed-in operator on a request: the session, the operator as configured now, and the
    /// token the session's forms carry.
    struct SignedIn {
        var session: AdminConsoleStore.Session
        var `operator`: AdminConsoleConfiguration.Operator
        var csrf: String

        var subject: String { session.subject }
        var mayWrite: Bool { `operator`.scopes.contains(.write) }
    }

    /// A sign-in under way, as kept in the store: the relying party's request and the console
    /// page to open afterwards.
    private struct PendingSignIn: Codable {
        var request: OpenIDAuthorizationRequest
        var next: String
    }

    // MARK: - Signing in

    func beginSignIn(_ request: WireRequest) async throws -> WireResponse {
        if let seconds = signInLimiter.retryAfter(forAddress: request.clientAddress, now: now) {
            return message(
                429,
                "Too many sign-ins",
                "Too many sign-ins from your address; try again in \(seconds) seconds.",
                headers: ["Retry-After": String(seconds)]
            )
        }
        let next = Self.consolePath(FormFields(queryOf: request.path)?["next"]) ?? Self.homePath
        let authorization: OpenIDAuthorizationRequest
        do {
            authorization = try await relyingParty.begin(
                OpenIDAuthorizationOptions(
                    prompt: "login",
                    maxAge: configuration.maxAuthenticationAge,
                    additionalParameters: ["acr_values": configuration.acrValues.joined(separator: " ")]
                )
            )
        } catch {
            logger.error("The admin console cannot reach the login", metadata: ["error": "\(error)"])
            throw ConsoleProblem(
                503,
                "The login cannot be reached",
                "The console could not reach the Gatehouse login to sign you in. Try again in a minute."
            )
        }
        let pending = String(
            decoding: try JSONEncoder().encode(PendingSignIn(request: authorization, next: next)),
            as: UTF8.self
        )
        let cookie = try await store.beginSignIn(pending, expiresAt: now + Self.signInLifetime, now: now)
        // Lax: the login sends the browser back with a top-level navigation.
        return redirect(
            authorization.url,
            cookies: [setCookie(Self.signInCookie, cookie, maxAge: Int(Self.signInLifetime), sameSite: "Lax")]
        )
    }

    func finishSignIn(_ request: WireRequest) async throws -> WireResponse {
        let clear = setCookie(Self.signInCookie, "", maxAge: 0, sameSite: "Lax")
        func refuse(_ status: Int, _ heading: String, _ text: String) -> WireResponse {
            var response = message(status, heading, text, signIn: true)
            response.headers["Set-Cookie"] = clear
            return response
        }
        guard let value = cookie(Self.signInCookie, in: request), (1...128).contains(value.utf8.count),
            let stored = try await store.takeSignIn(cookie: value, now: now),
            let pending = try? JSONDecoder().decode(PendingSignIn.self, from: Data(stored.utf8))
        else {
            return refuse(
                400,
                "Sign in again",
                "This sign-in expired or was started in another browser. Start again from the console."
            )
        }
        guard request.path.utf8.count <= 8192, let query = FormFields(queryOf: request.path) else {
            return refuse(400, "Sign in again", "The login's answer could not be read.")
        }
        let signIn: OpenIDSignIn
        do {
            signIn = try await relyingParty.finish(callback: query.values, request: pending.request)
        } catch .authorizationRefused(let error, _) {
            logger.notice("Admin console sign-in refused at the login", metadata: ["error": "\(error)"])
            switch error {
            case "unmet_authentication_requirements":
                let (heading, text) = OperatorCheck.explanation(
                    .methodNotAccepted(acr: nil),
                    configuration: configuration
                )
                return refuse(403, heading, text)
            case "access_denied":
                return refuse(403, "Sign-in cancelled", "The sign-in was cancelled at the login.")
            default:
                return refuse(400, "Sign-in refused", "The login refused the sign-in. Start again from the console.")
            }
        } catch {
            logger.warning("Admin console sign-in failed", metadata: ["error": "\(error)"])
            return refuse(400, "Sign-in failed", "The sign-in could not be checked. Start again from the console.")
        }
        let claims = signIn.claims
        switch OperatorCheck.check(subject: claims.sub, acr: claims.acr, amr: claims.amr, configuration: configuration)
        {
        case .failure(let refusal):
            logger.notice("Admin console sign-in refused", metadata: ["reason": "\(Self.reasonLabel(refusal))"])
            // The ID token was verified: its subject is who tried, worth a line in the trail.
            try await admin().recordRefusedOperatorSignIn(
                claims.sub,
                acr: claims.acr,
                reason: Self.reasonLabel(refusal)
            )
            let (heading, text) = OperatorCheck.explanation(refusal, configuration: configuration)
            return refuse(403, heading, text)
        case .success(let found):
            let admin = try admin()
            let cookie = try await store.startSession(
                subject: found.subject,
                acr: claims.acr ?? "",
                amr: claims.amr ?? [],
                expiresAt: now + Double(configuration.sessionLifetime),
                idleTimeout: Double(configuration.idleTimeout),
                now: now
            ) { db in try admin.recordOperatorSignIn(found.subject, acr: claims.acr, in: db) }
            admin.operatorSignedIn(found.subject)
            logger.info(
                "Operator signed in to the admin console",
                metadata: ["acr": "\(claims.acr ?? "")", "write": "\(found.scopes.contains(.write))"]
            )
            return redirect(
                pending.next,
                cookies: [setCookie(Self.sessionCookie, cookie, maxAge: configuration.sessionLifetime), clear]
            )
        }
    }

    /// A refusal's name in the log (never the subject: an e-mail address).
    static func reasonLabel(_ refusal: OperatorCheck.Refusal) -> String {
        switch refusal {
        case .methodNotAccepted: "acr"
        case .noSecondFactor: "no_mfa"
        case .notAnOperator: "not_an_operator"
        }
    }

    /// `path` when it is a page of the console's (where a sign-in may lead), else nil.
    static func consolePath(_ path: String?) -> String? {
        guard let path, path.hasPrefix(homePath), path.utf8.count <= 2048, !path.contains("//"),
            !path.contains("\\"), path.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }),
            !path.hasPrefix(signInPath), !path.hasPrefix(callbackPath)
        else { return nil }
        return path
    }

    // MARK: - Sessions

    /// The operator the request's session cookie names, if any, still an operator: their session
    /// starts its idle time again.
    func signedIn(_ request: WireRequest) async throws -> SignedIn? {
        guard let value = cookie(Self.sessionCookie, in: request), (1...128).contains(value.utf8.count),
            let session = try await store.touchSession(
                cookie: value,
                idleTimeout: Double(configuration.idleTimeout),
                now: now
            )
        else { return nil }
        // Taken off the manifest's list since: the session ends.
        guard let found = configuration.operator(session.subject) else {
            try await store.endSession(cookie: value)
            return nil
        }
        return SignedIn(session: session, operator: found, csrf: try await formToken(for: session))
    }

    /// The page asking to sign in, which leads back to the page `request` asked for.
    func signInPage(for request: WireRequest) -> WireResponse {
        let next = Self.consolePath(request.path) ?? Self.homePath
        let link = Self.signInPath + (next == Self.homePath ? "" : "?" + FormFields.encode([("next", next)]))
        return page(
            200,
            "Sign in",
            template: "signIn",
            ["signIn": link, "methods": OperatorCheck.methods(configuration.acrValues)]
        )
    }

    /// A posted form of a signed-in operator whose token is the session's. Anything else is a
    /// 403: the session ended, or the form was not sent from the console.
    func postedForm(_ request: WireRequest) async throws -> (SignedIn, FormFields) {
        guard
            request.header("Content-Type")?.lowercased().split(separator: ";").first
                == "application/x-www-form-urlencoded",
            request.body.count <= 8192, let fields = FormFields(body: request.body)
        else { throw ConsoleProblem(400, "Cannot continue", "The form could not be read; send it from the console.") }
        guard let signedIn = try await signedIn(request) else {
            throw ConsoleProblem(403, "Signed out", "Your console session ended. Sign in again.", signIn: true)
        }
        guard let sent = fields["csrf"], ConstantTime.equals(sent, signedIn.csrf) else {
            logger.notice("Admin console form refused: its token is not the session's")
            throw ConsoleProblem(
                403,
                "Form expired",
                "This form expired or was not sent from the console. Open the page again and retry.",
                back: (Self.homePath, "Find a user")
            )
        }
        return (signedIn, fields)
    }

    /// The session's forms' token: an HMAC of the session's id hash under the console's secret,
    /// so it changes with every session and only this server can make it.
    func formToken(for session: AdminConsoleStore.Session) async throws -> String {
        Data(HMAC<SHA256>.authenticationCode(for: session.idHash, using: try await formsKey()))
            .base64URLEncodedString
    }

    /// The seal of an action's outcome (`done=…&profile=…`) for the session that made it: the
    /// user page says "done" only for an outcome it sealed, so a link cannot tell an operator
    /// of a change nobody made.
    func outcomeSeal(_ outcome: String, for session: AdminConsoleStore.Session) async throws -> String {
        Data(HMAC<SHA256>.authenticationCode(for: session.idHash + Data(outcome.utf8), using: try await formsKey()))
            .base64URLEncodedString
    }

    private func formsKey() async throws -> SymmetricKey {
        if let known = formKey.withLock({ $0 }) { return known }
        let key = SymmetricKey(data: try await store.secret("forms"))
        formKey.withLock { $0 = key }
        return key
    }

    /// The header of a signed-in page: navigation (`active` marks the current one), the operator
    /// and the sign-out form.
    func chrome(_ signedIn: SignedIn, active: String) -> [String: Any] {
        [
            "subject": signedIn.subject, "access": signedIn.mayWrite ? "read and write" : "read only",
            "csrf": signedIn.csrf, "searchActive": active == "search", "auditActive": active == "audit",
        ]
    }

    // MARK: - Signing out

    func signOut(_ request: WireRequest) async throws -> WireResponse {
        _ = try await postedForm(request)
        if let value = cookie(Self.sessionCookie, in: request) { try await store.endSession(cookie: value) }
        return message(
            200,
            "Signed out",
            "You signed out of the admin console.",
            signIn: true,
            headers: ["Set-Cookie": setCookie(Self.sessionCookie, "", maxAge: 0)]
        )
    }
}
