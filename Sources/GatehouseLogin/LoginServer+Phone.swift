import Foundation
import GatehouseKernel
import GatehouseProtocol
import GatehouseQRCode
public import GatehouseServer
import Logging
import Synchronization

// Signing in with an enrolled phone: "approve on your phone" (a push with number matching to the
// user's devices) and "scan with your phone" (a QR code on the page, the XignIn way). The page
// waits for the token server's mobile authentication transaction and moves on by itself once
// the phone approved (a script of this site polls; without scripts, a button does the same).

extension LoginServer: PhoneSignInExtension, AdminServiceExtension {
    /// Start "approve on your phone" (form: authorization, csrf, username).
    public static let phonePath = "/login/phone"
    /// Start "scan with your phone" (form: authorization, csrf).
    public static let qrPath = "/login/qr"
    /// Where the waiting page asks how its approval stands (`?authorization=ID`; the page's cookie).
    public static let phoneStatusPath = "/login/phone/status"
    /// Where the waiting page goes once approved (form: authorization, csrf).
    public static let phoneCompletePath = "/login/phone/complete"
    /// The script the login's pages use (polling, passkeys); this site's own, no other.
    public static let scriptPath = "/login/assets/login.js"

    /// `acr` of a sign-in approved on an enrolled phone (the device's key, and the method its
    /// type asks: a tap with number matching, the PIN, a biometric).
    static let phoneACR = "urn:gatehouse:acr:phone"

    /// The token server's mobile authentication, once the server is built.
    public func mounted(with phoneSignIn: PhoneSignIn) {
        phone.withLock { $0 = phoneSignIn }
    }

    /// The token server's operators' side, whose audit trail records passkeys added and removed.
    public func mounted(with admin: AdminService) {
        self.admin.withLock { $0 = admin }
    }

    func phoneSignIn() throws -> PhoneSignIn {
        guard let mounted = phone.withLock({ $0 }) else {
            throw LoginError("Signing in with a phone is not available here.")
        }
        return mounted
    }

    // MARK: - Starting

    func startPushSignIn(_ request: WireRequest) async throws -> WireResponse {
        // Each push names a username, as a password does: counted with the password checks, per
        // client address, before anything is read.
        if let refusal = try await passwordCheckLimited(request) { return refusal }
        let (fields, authorization, client) = try await submittedForm(request)
        let id = fields["authorization"] ?? ""
        let csrf = fields["csrf"] ?? ""
        guard allowedMethods(client, authorization).contains(.push), let type = configuration.phone?.pushType else {
            throw LoginError("\(client.name) does not take sign-in on a phone.")
        }
        guard let typed = fields["username"], !typed.isEmpty, typed.utf8.count <= 254 else {
            return loginPage(
                client,
                id: id,
                csrf: csrf,
                authorization,
                status: 400,
                error: "Enter your e-mail address."
            )
        }
        let username = LoginStore.normalized(typed)
        // 429 with the page again, and when to try (RFC 6585 §4).
        func tooManyPushes(waitingUntil: Double? = nil, retryAfter: Int? = nil) -> WireResponse {
            let seconds = retryAfter ?? max(1, Int(((waitingUntil ?? now) - now).rounded(.up)))
            var response = loginPage(
                client,
                id: id,
                csrf: csrf,
                authorization,
                status: 429,
                error: waitingUntil == nil
                    ? "Too many sign-in requests for this account; try again in \(seconds) seconds."
                    : "A sign-in request is waiting on your phone already: answer it there, or try again in "
                        + "\(seconds) seconds.",
                username: typed
            )
            response.headers["Retry-After"] = String(seconds)
            return response
        }
        // Push fatigue: a burst per user, then one a minute, and one waiting at a time; the same
        // for a username without a phone, so the page tells nobody which accounts exist.
        if let waiting = try await store.waitingPush(username: username, now: now) {
            let stillPending =
                waiting.kind == "decoy"
                ? true : (try await phoneSignIn().verdict(waiting.transactionID))?.status == .pending
            if stillPending {
                return tooManyPushes(waitingUntil: waiting.expiresAt)
            }
        }
        if let seconds = pushLimiter.take(username, now: now) {
            return tooManyPushes(retryAfter: Int(seconds.rounded(.up)))
        }
        let record: LoginStore.PhoneSignInRecord
        do {
            let started = try await phoneSignIn().push(
                to: username,
                identityProviders: directoryIdentityProviders.sorted(),
                type: type,
                message: signInMessage(client, request)
            )
            record = .init(
                kind: "push",
                transactionID: started.transactionID,
                username: username,
                number: started.number,
                expiresAt: started.expiresAt
            )
            logger.info("Phone sign-in pushed", metadata: ["client": "\(client.id)"])
        } catch PhoneSignIn.Refusal.noEnrolledDevice {
            // As long as a real push would wait.
            let lifetime = try phoneSignIn().timeToLive(type: type) ?? 120
            record = .init(
                kind: "decoy",
                transactionID: Data.random(count: 24).base64URLEncodedString,
                username: username,
                number: Int.random(in: 10...99),
                expiresAt: now + Double(lifetime)
            )
        } catch PhoneSignIn.Refusal.alreadyPending(let until) {
            return tooManyPushes(waitingUntil: until)
        }
        // One decoy waits at a time, as the token server lets one push wait: concurrent pushes
        // for a username without a phone are refused as they are for one with a phone.
        guard try await store.pushWaits(record, username: username, now: now) else {
            let waiting = try await store.waitingPush(username: username, now: now)
            return tooManyPushes(waitingUntil: waiting?.expiresAt ?? record.expiresAt)
        }
        try await store.startPhoneSignIn(record, authorization: id, now: now)
        return waitingPage(client, id: id, csrf: csrf, authorization, record: record, qrCode: nil)
    }

    func startQRSignIn(_ request: WireRequest) async throws -> WireResponse {
        // Each QR code is a transaction: counted per address before anything is stored.
        if let refusal = limited(request, by: qrLimiter) { return refusal }
        let (fields, authorization, client) = try await submittedForm(request)
        let id = fields["authorization"] ?? ""
        let csrf = fields["csrf"] ?? ""
        guard allowedMethods(client, authorization).contains(.qr), let type = configuration.phone?.qrType else {
            throw LoginError("\(client.name) does not take sign-in by QR code.")
        }
        let started = try await phoneSignIn().qrCode(type: type, message: signInMessage(client, request))
        guard let otp = started.otp else { throw LoginError("The QR code could not be made.") }
        let record = LoginStore.PhoneSignInRecord(
            kind: "qr",
            transactionID: started.transactionID,
            username: nil,
            number: started.number,
            expiresAt: started.expiresAt
        )
        try await store.startPhoneSignIn(record, authorization: id, now: now)
        let svg = try QRCode(text: otp, errorCorrection: .medium).svg(moduleSize: 5, title: "Sign-in QR code")
        return waitingPage(client, id: id, csrf: csrf, authorization, record: record, qrCode: (svg, otp))
    }

    /// What the phone shows: the client, and the address the sign-in comes from, so a user shown
    /// someone else's QR code (or pushed while not signing in) can tell it is not theirs.
    private func signInMessage(_ client: LoginConfiguration.Client, _ request: WireRequest) -> String {
        let from = request.clientAddress.map { " from \($0.prefix(45))" } ?? ""
        return String("Sign in to \(client.name)\(from)?".prefix(MobileAuthConfiguration.maxMessageLength))
    }

    /// The page that waits for the phone: the number to type, or the QR code to scan.
    private func waitingPage(
        _ client: LoginConfiguration.Client,
        id: String,
        csrf: String,
        _ authorization: LoginStore.AuthorizationRequest,
        record: LoginStore.PhoneSignInRecord,
        qrCode: (svg: String, code: String)?,
        error: String? = nil
    ) -> WireResponse {
        var values: [String: Any] = [
            "client": client.name, "authorization": id, "csrf": csrf, "action": Self.phoneCompletePath,
            "status": Self.phoneStatusPath + "?authorization=" + id, "script": Self.scriptPath,
            "seconds": max(1, Int(record.expiresAt - now)),
        ]
        if let qrCode {
            values["qr"] = ["svg": qrCode.svg, "code": qrCode.code]
        } else if let number = record.number {
            values["number"] = String(number)
        }
        if let error { values["error"] = error }
        return page(
            200,
            qrCode == nil ? "Approve on your phone" : "Scan with your phone",
            template: "phone",
            values,
            formTarget: origin(of: authorization.redirectURI),
            scripts: true
        )
    }

    // MARK: - Waiting

    /// `GET /login/phone/status?authorization=ID`: how the page's approval stands, as JSON
    /// (`pending`, `approved`, `denied`, `expired`). Only the browser holding the page's cookie may ask.
    func phoneStatus(_ request: WireRequest) async throws -> WireResponse {
        guard let query = FormFields(queryOf: request.path), let id = query["authorization"],
            (1...64).contains(id.utf8.count), let csrf = cookie(Self.cookieName(id), in: request),
            try await store.authorization(id, csrf: csrf, now: now) != nil
        else { return json(404, ["error": "not_found", "error_description": "No sign-in waits here."]) }
        guard let record = try await store.phoneSignIn(authorization: id) else {
            return json(404, ["error": "not_found", "error_description": "No phone sign-in waits here."])
        }
        return json(200, ["status": try await status(of: record).rawValue])
    }

    private func status(of record: LoginStore.PhoneSignInRecord) async throws -> MobileAuthTransactionStatus {
        if record.kind == "decoy" { return record.expiresAt > now ? .pending : .expired }
        return try await phoneSignIn().verdict(record.transactionID)?.status ?? .expired
    }

    func completePhoneSignIn(_ request: WireRequest) async throws -> WireResponse {
        let (fields, authorization, client) = try await submittedForm(request)
        let id = fields["authorization"] ?? ""
        let csrf = fields["csrf"] ?? ""
        guard let record = try await store.phoneSignIn(authorization: id) else {
            throw LoginError("No phone sign-in waits on this page. Start again in the app.")
        }
        let verdict =
            record.kind == "decoy" ? nil : try await phoneSignIn().verdict(record.transactionID)
        let status = try await record.kind == "decoy" ? status(of: record) : verdict?.status ?? .expired
        switch status {
        case .pending:
            return loginPage(
                client,
                id: id,
                csrf: csrf,
                authorization,
                status: 409,
                error: "Not approved yet: answer the request on your phone, then continue.",
                username: record.username ?? ""
            )
        case .denied, .expired:
            _ = try await store.takePhoneSignIn(authorization: id)
            return loginPage(
                client,
                id: id,
                csrf: csrf,
                authorization,
                status: 401,
                error: status == .denied ? "The sign-in was denied on the phone." : "The request expired; try again.",
                username: record.username ?? ""
            )
        case .approved:
            break
        }
        // One completion per approval, however many tabs or requests race.
        guard try await store.takePhoneSignIn(authorization: id) != nil, let verdict,
            let subject = verdict.subject, let provider = verdict.identityProvider,
            directoryIdentityProviders.contains(provider)
        else { throw LoginError("This approval cannot sign in here. Start again in the app.") }
        let username = LoginStore.normalized(subject)
        // A push went to one user's phones; only that user can have approved it.
        if let pushed = record.username, pushed != username {
            throw LoginError("This approval cannot sign in here. Start again in the app.")
        }
        return try await signedIn(
            request,
            subject: username,
            amr: verdict.amr,
            acr: Self.phoneACR,
            client: client,
            authorization: authorization,
            id: id,
            csrf: csrf
        )
    }
}
