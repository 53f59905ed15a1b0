import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging

// Federation: signing in through an external OpenID provider. The login is that provider's
// client (code + PKCE + nonce through GatehouseOpenID's relying party: the ID token's signature
// against the provider's keys, iss, aud, exp, nonce); the provider's user becomes a Gatehouse
// subject, and the request that was waiting on the login page goes on as after a password.

extension LoginServer {
    /// Where every external provider sends the browser back.
    public static let federationCallbackPath = "/login/federation/callback"
    /// Where the login page's "Sign in with …" buttons post.
    public static let federationStartPath = "/login/federation"
    /// The cookie that binds a sign-in at an external provider to the browser that started it.
    static let federationCookie = "gh_fed"
    /// `acr` of a session from an external provider that names none.
    static let federatedACR = "urn:gatehouse:acr:federated"

    /// The relying parties of the manifest's `federation` providers, by id.
    static func makeRelyingParties(
        _ configuration: LoginConfiguration,
        issuer: String,
        clock: any WallClock
    ) throws -> [String: OpenIDRelyingParty] {
        var parties: [String: OpenIDRelyingParty] = [:]
        let base = String(issuer.dropLast("/login".count))
        for provider in configuration.federation {
            do {
                parties[provider.id] = try OpenIDRelyingParty(
                    .init(
                        issuer: provider.issuer,
                        clientID: provider.clientID,
                        clientSecret: provider.clientSecret,
                        redirectURI: base + federationCallbackPath,
                        scopes: provider.scopes,
                        clock: clock
                    )
                )
            } catch {
                throw LoginError("login.federation \(provider.id): \(error)")
            }
        }
        return parties
    }

    /// `POST /login/federation` from the login page's button: the waiting authorization goes on
    /// at the provider the button names.
    func federationButton(_ request: WireRequest) async throws -> WireResponse {
        let (fields, _, _) = try await submittedForm(request)
        guard let id = fields["authorization"], let name = fields["provider"],
            let provider = configuration.federation.first(where: { $0.id == name })
        else { throw LoginError("Choose one of the sign-in buttons.") }
        return try await startFederation(provider, authorizationID: id, loginHint: nil)
    }

    /// Sends the browser to `provider` for the waiting authorization `authorizationID`.
    func startFederation(
        _ provider: LoginConfiguration.FederatedProvider,
        authorizationID: String,
        loginHint: String?
    ) async throws -> WireResponse {
        guard let party = relyingParties[provider.id] else { throw LoginError("No such sign-in provider.") }
        let begun: OpenIDAuthorizationRequest
        do {
            begun = try await party.begin(OpenIDAuthorizationOptions(loginHint: loginHint))
        } catch {
            logger.error(
                "An external provider could not be reached",
                metadata: ["provider": "\(provider.id)", "error": "\(error)"]
            )
            return page(502, "Cannot continue", "\(provider.name) cannot be reached now; try again later.")
        }
        let browser = Data.random(count: 24).base64URLEncodedString
        try await store.beginFederation(
            state: begun.state,
            browser: browser,
            authorizationID: authorizationID,
            provider: provider.id,
            request: String(decoding: try JSONEncoder().encode(begun), as: UTF8.self),
            expiresAt: now + Double(configuration.pageLifetime),
            now: now
        )
        // Lax: the provider sends the browser back with a top-level GET from its own site.
        let cookie =
            "\(Self.federationCookie)=\(browser); Path=\(Self.federationCallbackPath); HttpOnly; SameSite=Lax; "
            + "Max-Age=\(configuration.pageLifetime)" + (secureCookies ? "; Secure" : "")
        return WireResponse(
            status: 303,
            headers: [
                "Location": begun.url, "Set-Cookie": cookie, "Cache-Control": "no-store",
                "Referrer-Policy": "no-referrer",
            ],
            body: Data()
        )
    }

    /// `GET /login/federation/callback`: the provider's answer.
    func federationCallback(_ request: WireRequest) async throws -> WireResponse {
        guard request.path.utf8.count <= 8192, let query = FormFields(queryOf: request.path),
            let state = query["state"],
            (1...256).contains(state.utf8.count)
        else { throw LoginError("The sign-in answer is malformed.") }
        guard let pending = try await store.takeFederation(state: state, now: now) else {
            throw LoginError("This sign-in expired or was finished already. Start again in the application.")
        }
        guard let browser = cookie(Self.federationCookie, in: request),
            ConstantTime.equals(LoginStore.hash(browser), pending.browserHash)
        else { throw LoginError("This sign-in was started in another browser. Start again in the application.") }
        guard let provider = configuration.federation.first(where: { $0.id == pending.provider }),
            let party = relyingParties[provider.id],
            let begun = try? JSONDecoder().decode(OpenIDAuthorizationRequest.self, from: Data(pending.request.utf8))
        else { throw LoginError("This sign-in provider is no longer offered.") }
        let signIn: OpenIDSignIn
        do {
            signIn = try await party.finish(callback: query.values, request: begun, fetchUserInfo: true)
        } catch .authorizationRefused(let error, _) {
            // The user cancelled there, or the provider refused: the application is told.
            return try await refuseWaiting(
                pending.authorizationID,
                "access_denied",
                "\(provider.name) answered \(error)."
            )
        } catch {
            logger.warning(
                "Sign-in through an external provider refused",
                metadata: ["provider": "\(provider.id)", "reason": "\(error)"]
            )
            return page(502, "Cannot continue", "Signing in with \(provider.name) failed: \(error.description)")
        }
        let email = signIn.userInfo?.email ?? signIn.claims.email
        let verified = (signIn.userInfo?.emailVerified ?? signIn.claims.emailVerified) == true && email != nil
        if provider.requireVerifiedEmail, !verified {
            logger.notice(
                "An external sign-in without a verified e-mail address refused",
                metadata: ["provider": "\(provider.id)"]
            )
            return page(
                403,
                "Cannot continue",
                "Your account at \(provider.name) has no verified e-mail address, which this sign-in requires."
            )
        }
        var proposed = "\(provider.id)|\(signIn.claims.sub)"
        if provider.linkVerifiedEmail, verified, let email, try await store.hasUser(email) {
            proposed = LoginStore.normalized(email)
        }
        let subject = try await store.federatedSubject(
            provider: provider.id,
            upstream: signIn.claims.sub,
            email: email,
            emailVerified: verified,
            proposed: proposed,
            now: now
        )
        let (session, sessionCookie) = try await beginBrowserSession(
            replacing: request,
            subject: subject,
            amr: signIn.claims.amr ?? ["fed"],
            acr: signIn.claims.acr ?? Self.federatedACR
        )
        logger.info("Signed in through an external provider", metadata: ["provider": "\(provider.id)"])
        var response: WireResponse
        if let csrf = try await store.renewCSRF(pending.authorizationID, now: now),
            let (authorization, _) = try await store.authorization(pending.authorizationID, csrf: csrf, now: now),
            let client = pageClient(authorization.clientID)
        {
            if try await isConsented(client, subject, authorization) {
                response = try await finish(pending.authorizationID, session: session, authorization)
            } else {
                try await store.authenticated(pending.authorizationID, subject: subject)
                response = consentPage(
                    client,
                    id: pending.authorizationID,
                    csrf: csrf,
                    subject: subject,
                    authorization,
                    newCookie: true
                )
            }
        } else {
            response = page(
                200,
                "Signed in",
                template: "notice",
                ["heading": "Signed in", "message": "Signed in with \(provider.name). Return to the application."]
            )
        }
        response.headers["Set-Cookie"] = [response.headers["Set-Cookie"], sessionCookie].compactMap { $0 }
            .joined(separator: "\n")
        return response
    }

    /// Ends the waiting authorization `id` with an OAuth error for its client.
    private func refuseWaiting(_ id: String, _ error: String, _ description: String) async throws -> WireResponse {
        guard let csrf = try await store.renewCSRF(id, now: now),
            let (authorization, _) = try await store.authorization(id, csrf: csrf, now: now)
        else { return page(400, "Cannot continue", description) }
        try await store.cancelAuthorization(id)
        return redirect(
            authorization.redirectURI,
            [("error", error), ("error_description", description), ("state", authorization.state), ("iss", issuer)]
        )
    }
}
