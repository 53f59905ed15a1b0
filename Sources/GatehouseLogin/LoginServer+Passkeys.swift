import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import GatehouseWebAuthn
import Logging
import Synchronization

// Passkeys (WebAuthn Level 2): sign-in on the login page with a discoverable credential and user
// verification, and a page where a signed-in user adds and removes theirs. The checks are
// GatehouseWebAuthn's; this file keeps challenges single-use, binds a credential to one user,
// and keeps the signature counter and backup state.

extension LoginServer {
    /// The passkey sign-in's options (POST, the sign-in page's form: authorization, csrf).
    public static let passkeySignInOptionsPath = "/login/passkey/options"
    /// Where the sign-in page posts the assertion (form: authorization, csrf, credential).
    public static let passkeySignInPath = "/login/passkey"
    /// A user's passkeys: GET shows them, POST signs in (password), adds or removes one.
    public static let passkeysPath = "/login/passkeys"
    /// The registration's options (POST, the passkeys page's form: csrf).
    public static let passkeyRegistrationOptionsPath = "/login/passkeys/options"

    /// `acr` of a passkey sign-in (a device-bound or synced key, with user verification).
    static let passkeyACR = "urn:gatehouse:acr:passkey"
    /// How long a ceremony's challenge stays open.
    static let ceremonyLifetime = 300.0
    /// The passkeys page's double-submit cookie.
    static let accountCookie = "gh_csrf_account"
    /// Seconds after signing in during which a user may add or remove passkeys: a stolen or
    /// forgotten session cannot plant a passkey of someone else's.
    static let recentSignIn = 900.0

    /// The browser's session, if the user signed in recently enough to manage passkeys.
    private func accountSession(_ request: WireRequest) async throws -> LoginSession? {
        guard let session = try await browserSession(request), now - session.authTime < Self.recentSignIn else {
            return nil
        }
        return session
    }

    /// The WebAuthn relying party: the RP id configured, else the public URL's host; the origin
    /// is the public URL's. Nil when passkeys are not configured, or the RP id would be an IP
    /// address, which browsers refuse (serve on `localhost` or a domain name instead).
    var webAuthnRelyingParty: WebAuthnRelyingParty? {
        guard let passkeys = configuration.passkeys, let origin = origin(of: issuer),
            let host = URLComponents(string: issuer)?.host?.lowercased()
        else { return nil }
        let id = passkeys.relyingPartyID ?? host
        guard !id.contains(":"), !id.allSatisfy({ $0.isNumber || $0 == "." }) else { return nil }
        return WebAuthnRelyingParty(id: id, name: passkeys.relyingPartyName, origins: [origin])
    }

    func relyingParty() throws -> WebAuthnRelyingParty {
        guard let party = webAuthnRelyingParty else {
            throw LoginError("Passkeys are not offered here: they need the login on a domain name, such as localhost.")
        }
        return party
    }

    // MARK: - Signing in

    func passkeySignInOptions(_ request: WireRequest) async throws -> WireResponse {
        let (fields, authorization, client) = try await submittedForm(request)
        guard allowedMethods(client, authorization).contains(.passkey) else {
            throw LoginError("\(client.name) does not take passkeys.")
        }
        return try await signInOptions(ceremony: fields["authorization"] ?? "", request)
    }

    /// The options of a passkey sign-in (a discoverable credential, user verification), with a
    /// challenge kept for `ceremony` (an authorization, or the passkeys page's token); counted
    /// per address.
    private func signInOptions(ceremony: String, _ request: WireRequest) async throws -> WireResponse {
        if let seconds = passkeyLimiter.retryAfter(forAddress: request.clientAddress, now: now) {
            return json(
                429,
                ["error": "slow_down", "error_description": "Too many passkey attempts."],
                headers: ["Retry-After": String(seconds)]
            )
        }
        let challenge = Data.random(count: 32)
        try await store.keepChallenge(
            challenge,
            purpose: "signin",
            subject: nil,
            authorization: ceremony,
            expiresAt: now + Self.ceremonyLifetime,
            now: now
        )
        let options = try relyingParty().requestOptions(
            challenge: Array(challenge),
            timeout: .seconds(Int(Self.ceremonyLifetime))
        )
        return json(200, ["publicKey": options])
    }

    func passkeySignIn(_ request: WireRequest) async throws -> WireResponse {
        if let refusal = limited(request, by: passkeyLimiter) { return refusal }
        let (fields, authorization, client) = try await submittedForm(request)
        let id = fields["authorization"] ?? ""
        let csrf = fields["csrf"] ?? ""
        guard allowedMethods(client, authorization).contains(.passkey) else {
            throw LoginError("\(client.name) does not take passkeys.")
        }
        func again(_ message: String) -> WireResponse {
            loginPage(client, id: id, csrf: csrf, authorization, status: 401, error: message)
        }
        guard let credential = fields["credential"], !credential.isEmpty,
            credential.utf8.count <= WebAuthnRelyingParty.maximumResponseSize
        else { return again("The browser sent no passkey. Try again.") }
        let challenges = try await store.takeChallenges(purpose: "signin", subject: nil, authorization: id, now: now)
        guard let stored = try await verifiedPasskey(credential, challenges: challenges) else {
            return again("The passkey could not sign you in. Try again.")
        }
        logger.info("Signed in with a passkey", metadata: ["client": "\(client.id)"])
        return try await signedIn(
            request,
            subject: stored.subject,
            amr: Self.passkeyAMR(stored),
            acr: Self.passkeyACR,
            client: client,
            authorization: authorization,
            id: id,
            csrf: csrf
        )
    }

    /// `amr` of a passkey sign-in (RFC 8176): `hwk` only for a device-bound key whose
    /// authenticator attested it (packed); without attestation nothing shows the key is in
    /// hardware, and a synced key is a software key by definition.
    static func passkeyAMR(_ passkey: LoginStore.Passkey) -> [String] {
        [passkey.attestationFormat == "packed" && !passkey.backupEligible ? "hwk" : "swk", "user", "mfa"]
    }

    /// The passkey an assertion (the browser's JSON) proves, checked against one of the
    /// ceremony's `challenges`; its counter and backup state are stored. Nil when anything is
    /// wrong (the reason is logged, not told).
    func verifiedPasskey(_ credential: String, challenges: [Data]) async throws -> LoginStore.Passkey? {
        let json = Array(credential.utf8)
        guard let reference = try? WebAuthnRelyingParty.assertionReference(json),
            let stored = try await store.passkey(Data(reference.credentialID))
        else { return nil }
        // No user was named before the ceremony, so the discoverable credential must name its
        // user, and that user must own it (WebAuthn §7.2 step 6).
        guard let handle = reference.userHandle,
            let owner = try await store.existingUserHandle(for: stored.subject),
            ConstantTime.equals(owner, Data(handle))
        else { return nil }
        let party = try relyingParty()
        var verified: AuthenticationResult?
        var failure: WebAuthnError?
        for challenge in challenges {
            do {
                verified = try party.verifyAuthentication(
                    json,
                    expectedChallenge: Array(challenge),
                    credential: StoredCredential(
                        id: Array(stored.credentialID),
                        publicKey: Array(stored.publicKey),
                        signCount: UInt32(clamping: stored.signCount),
                        backupEligible: stored.backupEligible
                    )
                )
                break
            } catch {
                failure = error
            }
        }
        guard let verified else {
            logger.notice(
                "Passkey sign-in refused",
                metadata: ["reason": "\(failure.map { String(describing: $0) } ?? "no open challenge")"]
            )
            return nil
        }
        // The counter moves from what was read; a racing sign-in with a copy of the key loses.
        guard
            try await store.passkeyUsed(
                stored.credentialID,
                previous: stored.signCount,
                signCount: Int64(verified.signCount),
                backedUp: verified.backedUp,
                now: now
            )
        else { return nil }
        return stored
    }

    // MARK: - The passkeys page

    func passkeysPage(_ request: WireRequest) async throws -> WireResponse {
        _ = try relyingParty()
        let csrf = try await accountToken()
        guard let session = try await accountSession(request) else {
            return accountSignInPage(csrf: csrf, status: 200)
        }
        return try await passkeysList(
            session.subject,
            csrf: csrf,
            status: 200,
            mayManage: try await mayManagePasskeys(session)
        )
    }

    private func accountSignInPage(csrf: String, status: Int, error: String? = nil) -> WireResponse {
        var values: [String: Any] = [
            "client": "your passkeys (signing in again if it was a while ago)", "authorization": "", "csrf": csrf,
            "action": Self.passkeysPath, "password": true, "identifier": true, "username": "",
            "passkey": ["options": Self.passkeyRegistrationOptionsPath, "action": Self.passkeysPath],
            "script": Self.scriptPath,
        ]
        if let link = phoneConfirmation { values["phoneLink"] = link }
        if let error { values["error"] = error }
        return page(
            status,
            "Sign in",
            template: "login",
            values,
            scripts: true,
            headers: ["Set-Cookie": accountCookie(csrf)]
        )
    }

    /// Whether the session may add or remove passkeys: one signed in with a passkey or a phone
    /// may; a password alone only while the user has neither (their first strong factor), so a
    /// stolen password cannot plant a passkey beside theirs and claim its `acr`.
    private func mayManagePasskeys(_ session: LoginSession) async throws -> Bool {
        if [Self.passkeyACR, Self.phoneACR].contains(session.acr) { return true }
        guard try await store.passkeys(of: session.subject).isEmpty else { return false }
        guard let phone = phone.withLock({ $0 }) else { return true }
        return try await !phone.hasEnrolledDevice(
            session.subject,
            identityProviders: directoryIdentityProviders.sorted()
        )
    }

    /// Where the passkeys page sends a user to confirm with their phone: the login page for the
    /// login's own client, asking for the phone's `acr`, which comes back here signed in. Nil
    /// when the login has no phone sign-in.
    private var phoneConfirmation: String? {
        guard configuration.phone != nil, phone.withLock({ $0 }) != nil else { return nil }
        // The code is never redeemed: the verifier is thrown away with it.
        let verifier = Data.random(count: 32).base64URLEncodedString
        return Self.authorizePath + "?"
            + FormFields.encode([
                ("client_id", Self.accountClientID), ("redirect_uri", accountClient.redirectURIs[0]),
                ("response_type", "code"), ("state", Data.random(count: 12).base64URLEncodedString),
                ("code_challenge", PKCE.challenge(for: verifier)), ("code_challenge_method", "S256"),
                ("acr_values", Self.phoneACR), ("prompt", "login"),
            ])
    }

    /// The account page's passkey sign-in: its challenges belong to the page's CSRF token.
    private static func accountCeremony(_ csrf: String) -> String {
        "account:" + String(csrf.prefix(24))
    }

    private func passkeysList(
        _ subject: String,
        csrf: String,
        status: Int,
        mayManage: Bool = true,
        error: String? = nil,
        notice: String? = nil
    ) async throws -> WireResponse {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        let keys = try await store.passkeys(of: subject)
        var values: [String: Any] = [
            "username": subject, "csrf": csrf, "action": Self.passkeysPath,
            "options": Self.passkeyRegistrationOptionsPath, "script": Self.scriptPath,
            "passkeys": keys.map { key -> [String: Any] in
                var entry: [String: Any] = [
                    "name": key.name, "id": key.credentialID.base64URLEncodedString,
                    "created": formatter.string(from: Date(timeIntervalSince1970: key.createdAt)),
                    "csrf": csrf, "action": Self.passkeysPath,
                ]
                if let used = key.lastUsedAt {
                    entry["used"] = formatter.string(from: Date(timeIntervalSince1970: used))
                }
                if key.backedUp { entry["synced"] = true }
                return entry
            },
        ]
        if let error { values["error"] = error }
        if let notice { values["notice"] = notice }
        // Mustache sections: the add form and remove buttons, or the passkey that confirms first.
        if mayManage {
            values["manage"] = true
        } else {
            values["confirm"] = true
            // The phone only for a user who has one.
            if let link = phoneConfirmation, let phone = phone.withLock({ $0 }),
                try await phone.hasEnrolledDevice(subject, identityProviders: directoryIdentityProviders.sorted())
            {
                values["phoneLink"] = link
            }
        }
        return page(
            status,
            "Your passkeys",
            template: "passkeys",
            values,
            scripts: true,
            headers: ["Set-Cookie": accountCookie(csrf)]
        )
    }

    /// The double-submit cookie of the passkeys page's forms (SameSite=Strict, this site only).
    private func accountCookie(_ csrf: String) -> String {
        "\(Self.accountCookie)=\(csrf); Path=/login/; HttpOnly; SameSite=Strict; Max-Age=\(configuration.pageLifetime)"
            + (secureCookies ? "; Secure" : "")
    }

    /// The passkeys page's form, its CSRF token matching the page's cookie and made by this
    /// server (a cookie another host of the site plants with a token of its own is refused).
    private func accountForm(_ request: WireRequest) async throws -> FormFields {
        guard
            request.header("Content-Type")?.lowercased().split(separator: ";").first
                == "application/x-www-form-urlencoded",
            request.body.count <= 96 * 1024, let fields = FormFields(body: request.body),
            let csrf = fields["csrf"], !csrf.isEmpty,
            cookie(Self.accountCookie, in: request).map({ ConstantTime.equals($0, csrf) }) == true,
            try await isAccountToken(csrf)
        else { throw LoginError("This page expired or was not sent from this site. Open it again.") }
        return fields
    }

    /// A token for the passkeys page's forms: a random part and its HMAC under a secret every
    /// instance shares.
    private func accountToken() async throws -> String {
        let random = Data.random(count: 18).base64URLEncodedString
        return random + "." + (try await accountTokenMAC(random))
    }

    private func isAccountToken(_ token: String) async throws -> Bool {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count == 24 else { return false }
        return ConstantTime.equals(String(parts[1]), try await accountTokenMAC(String(parts[0])))
    }

    private func accountTokenMAC(_ random: String) async throws -> String {
        let key = SymmetricKey(data: try await store.secret("account-forms"))
        return Data(HMAC<SHA256>.authenticationCode(for: Data(random.utf8), using: key)).base64URLEncodedString
    }

    func passkeyRegistrationOptions(_ request: WireRequest) async throws -> WireResponse {
        let fields = try await accountForm(request)
        // Without a session that may add one, the page signs in with a passkey instead.
        guard let session = try await accountSession(request), try await mayManagePasskeys(session) else {
            return try await signInOptions(ceremony: Self.accountCeremony(fields["csrf"] ?? ""), request)
        }
        let party = try relyingParty()
        let challenge = Data.random(count: 32)
        try await store.keepChallenge(
            challenge,
            purpose: "register",
            subject: session.subject,
            authorization: nil,
            expiresAt: now + Self.ceremonyLifetime,
            now: now
        )
        let handle = try await store.userHandle(for: session.subject)
        let options = party.creationOptions(
            user: WebAuthnUser(id: Array(handle), name: session.subject, displayName: session.subject),
            challenge: Array(challenge),
            excludeCredentials: try await store.passkeys(of: session.subject).map { Array($0.credentialID) },
            timeout: .seconds(Int(Self.ceremonyLifetime))
        )
        return json(200, ["publicKey": options])
    }

    func passkeysForm(_ request: WireRequest) async throws -> WireResponse {
        _ = try relyingParty()
        let fields = try await accountForm(request)
        let csrf = fields["csrf"] ?? ""
        let signingIn = fields["credential"] != nil && fields["name"] == nil
        guard let session = try await accountSession(request), !signingIn else {
            // Not signed in (recently), or confirming with a passkey: the page's sign-in.
            if signingIn {
                if let refusal = limited(request, by: passkeyLimiter) { return refusal }
                let challenges = try await store.takeChallenges(
                    purpose: "signin",
                    subject: nil,
                    authorization: Self.accountCeremony(csrf),
                    now: now
                )
                guard let credential = fields["credential"],
                    credential.utf8.count <= WebAuthnRelyingParty.maximumResponseSize,
                    let passkey = try await verifiedPasskey(credential, challenges: challenges)
                else { return accountSignInPage(csrf: csrf, status: 401, error: "The passkey could not sign you in.") }
                let (_, sessionCookie) = try await beginBrowserSession(
                    replacing: request,
                    subject: passkey.subject,
                    amr: Self.passkeyAMR(passkey),
                    acr: Self.passkeyACR
                )
                var response = try await passkeysList(passkey.subject, csrf: csrf, status: 200, mayManage: true)
                response.headers["Set-Cookie"] = [response.headers["Set-Cookie"], sessionCookie].compactMap { $0 }
                    .joined(separator: "\n")
                return response
            }
            if let refusal = try await passwordCheckLimited(request) { return refusal }
            guard let username = fields["username"], let password = fields["password"], !username.isEmpty,
                username.utf8.count <= 254, password.utf8.count <= 1024
            else { return accountSignInPage(csrf: csrf, status: 400, error: "Send an e-mail address and a password.") }
            switch try await checkPassword(username: username, password: password) {
            case .wrong(let message): return accountSignInPage(csrf: csrf, status: 401, error: message)
            case .locked(let message): return accountSignInPage(csrf: csrf, status: 403, error: message)
            case .right: break
            }
            let subject = LoginStore.normalized(username)
            let (session, sessionCookie) = try await beginBrowserSession(
                replacing: request,
                subject: subject,
                amr: ["pwd"],
                acr: Self.passwordACR
            )
            var response = try await passkeysList(
                subject,
                csrf: csrf,
                status: 200,
                mayManage: try await mayManagePasskeys(session)
            )
            response.headers["Set-Cookie"] = [response.headers["Set-Cookie"], sessionCookie].compactMap { $0 }
                .joined(separator: "\n")
            return response
        }
        // Changing passkeys needs a session that may (below: their first factor, or a strong one).
        guard try await mayManagePasskeys(session) else {
            return try await passkeysList(
                session.subject,
                csrf: csrf,
                status: 403,
                mayManage: false,
                error: "Confirm with one of your passkeys before changing them (or sign in with your phone)."
            )
        }
        if let removing = fields["remove"] {
            let audit = admin.withLock { $0 }
            guard let id = Data(base64URLEncoded: removing),
                try await store.removePasskey(
                    id,
                    of: session.subject,
                    alongside: { [subject = session.subject] name, db in
                        try audit?.recordPasskeyChange(
                            added: false,
                            subject: subject,
                            detail: ["name": name, "session_acr": session.acr],
                            in: db
                        )
                    }
                )
            else {
                return try await passkeysList(
                    session.subject,
                    csrf: csrf,
                    status: 404,
                    error: "There is no such passkey."
                )
            }
            logger.info("Passkey removed")
            return try await passkeysList(session.subject, csrf: csrf, status: 200, notice: "The passkey was removed.")
        }
        guard let credential = fields["credential"], !credential.isEmpty,
            credential.utf8.count <= WebAuthnRelyingParty.maximumResponseSize
        else {
            return try await passkeysList(
                session.subject,
                csrf: csrf,
                status: 400,
                error: "The browser sent no passkey."
            )
        }
        let name = (fields["name"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...64).contains(name.count),
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            return try await passkeysList(
                session.subject,
                csrf: csrf,
                status: 400,
                error: "Name the passkey (1 to 64 characters)."
            )
        }
        let party = try relyingParty()
        let challenges = try await store.takeChallenges(
            purpose: "register",
            subject: session.subject,
            authorization: nil,
            now: now
        )
        var registered: RegisteredCredential?
        var failure: WebAuthnError?
        for challenge in challenges {
            do {
                registered = try party.verifyRegistration(Array(credential.utf8), expectedChallenge: Array(challenge))
                break
            } catch {
                failure = error
            }
        }
        guard let registered else {
            let reason = failure.map { String(describing: $0) } ?? "the page waited too long; try again"
            return try await passkeysList(
                session.subject,
                csrf: csrf,
                status: 400,
                error: "The passkey was not added: \(reason)."
            )
        }
        let added = try await store.addPasskey(
            LoginStore.Passkey(
                credentialID: Data(registered.id),
                subject: session.subject,
                publicKey: Data(registered.publicKey),
                algorithm: registered.algorithm.rawValue,
                signCount: Int64(registered.signCount),
                backupEligible: registered.backupEligible,
                backedUp: registered.backedUp,
                transports: registered.transports.joined(separator: " "),
                aaguid: Data(registered.aaguid),
                attestationFormat: registered.attestationFormat.rawValue,
                name: name,
                createdAt: now,
                lastUsedAt: nil
            ),
            alongside: { [audit = admin.withLock({ $0 }), subject = session.subject, acr = session.acr] db in
                try audit?.recordPasskeyChange(
                    added: true,
                    subject: subject,
                    detail: ["name": name, "session_acr": acr, "attestation": registered.attestationFormat.rawValue],
                    in: db
                )
            }
        )
        guard added else {
            return try await passkeysList(
                session.subject,
                csrf: csrf,
                status: 409,
                error: "This passkey is registered already."
            )
        }
        logger.info(
            "Passkey added",
            metadata: [
                "algorithm": "\(registered.algorithm.rawValue)",
                "attestation": "\(registered.attestationFormat.rawValue)",
            ]
        )
        // A password session that added the first passkey may not change them any more.
        return try await passkeysList(
            session.subject,
            csrf: csrf,
            status: 200,
            mayManage: try await mayManagePasskeys(session),
            notice: "The passkey “\(name)” was added."
        )
    }
}
