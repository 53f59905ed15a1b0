import Foundation
import GatehouseKernel
import GatehouseProtocol
import GatehouseServer
import Logging

// Finding a user, their page, and the actions on their profiles: a form on the user's page, a
// confirmation page, then the change through the admin service, as the operator.

/// A change an operator makes to a profile.
enum ConsoleAction: String, CaseIterable {
    case revokeSessions = "revoke-sessions"
    case removeAuthenticator = "remove-authenticator"
    case disenrolDevice = "disenrol-device"
    case deregisterProfile = "deregister-profile"
    case clearLockout = "clear-lockout"

    /// The button on the user's page.
    var button: String {
        switch self {
        case .revokeSessions: "Revoke sessions…"
        case .removeAuthenticator: "Remove…"
        case .disenrolDevice: "Disenrol the device…"
        case .deregisterProfile: "Deregister the profile…"
        case .clearLockout: "Clear failed attempts…"
        }
    }

    /// The confirmation page's heading.
    var heading: String {
        switch self {
        case .revokeSessions: "Revoke sessions?"
        case .removeAuthenticator: "Remove the authenticator?"
        case .disenrolDevice: "Disenrol the device?"
        case .deregisterProfile: "Deregister the profile?"
        case .clearLockout: "Clear failed attempts?"
        }
    }

    /// The question the confirmation page asks.
    func question(profile: String, subject: String, authenticator: String?) -> String {
        switch self {
        case .revokeSessions: "Revoke every session of profile \(profile) of \(subject)?"
        case .removeAuthenticator:
            "Remove the authenticator \(authenticator ?? "") from profile \(profile) of \(subject)?"
        case .disenrolDevice: "Disenrol the device of profile \(profile) of \(subject) from mobile authentication?"
        case .deregisterProfile: "Deregister profile \(profile) of \(subject)?"
        case .clearLockout: "Set the failed attempts of profile \(profile) of \(subject) back to zero?"
        }
    }

    /// What follows, said before it is done.
    var consequence: String {
        switch self {
        case .revokeSessions:
            "The app on that device is signed out: its next request needs the PIN again. The profile stays."
        case .removeAuthenticator:
            "The app can no longer sign in with it; the PIN and other authenticators stay. The user may add it again."
        case .disenrolDevice:
            "The device no longer receives sign-in and payment requests; the app learns it on its next request."
        case .deregisterProfile:
            "The profile, its authenticators and sessions are removed for good. The app on that device gets the "
                + "deregistration error and must register again. Use this for a lost or stolen device."
        case .clearLockout:
            "The user gets the full number of PIN attempts again. Only do this once you know it is them."
        }
    }

    /// The confirming button.
    var confirm: String {
        switch self {
        case .revokeSessions: "Revoke sessions"
        case .removeAuthenticator: "Remove the authenticator"
        case .disenrolDevice: "Disenrol the device"
        case .deregisterProfile: "Deregister the profile"
        case .clearLockout: "Clear failed attempts"
        }
    }

    /// The notice on the user's page afterwards.
    func done(profile: String, authenticator: String?, sessions: Int?) -> String {
        switch self {
        case .revokeSessions:
            "Revoked \(ConsoleText.count(sessions ?? 0, "active session")) of profile \(profile)."
        case .removeAuthenticator: "Removed the authenticator \(authenticator ?? "") from profile \(profile)."
        case .disenrolDevice: "Disenrolled the device of profile \(profile) from mobile authentication."
        case .deregisterProfile: "Deregistered profile \(profile). The app on that device must register again."
        case .clearLockout: "Cleared the failed attempts of profile \(profile)."
        }
    }
}

extension AdminConsole {
    // MARK: - Search

    func home(_ request: WireRequest) async throws -> WireResponse {
        guard let signedIn = try await signedIn(request) else { return signInPage(for: request) }
        let text = (FormFields(queryOf: request.path)?["q"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        var values: [String: Any] = ["query": text]
        if !text.isEmpty {
            if text.utf8.count > 254
                || text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            {
                values["error"] = "Type at most 254 characters: an e-mail address, its start, or an id."
            } else {
                let users = try await search(text)
                values["searched"] = true
                values["hasResults"] = !users.isEmpty
                values["found"] = ConsoleText.count(users.count, "user") + " found"
                values["results"] = users.map { user -> [String: Any] in
                    [
                        "subject": user.subject, "identityProvider": identityProviderName(user.identityProvider),
                        "profiles": user.profiles, "lastUsed": ConsoleText.time(user.lastUsedAt),
                        "link": Self.userLink(identityProvider: user.identityProvider, subject: user.subject),
                    ]
                }
            }
        }
        return page(200, "Find a user", template: "home", values, chrome: chrome(signedIn, active: "search"))
    }

    /// The users `text` finds: subjects starting with it (as typed, and lowercased, as the login
    /// keeps usernames), and the users of the profile or installation with that exact id.
    func search(_ text: String) async throws -> [UserSummary] {
        let admin = try admin()
        var searches = [UserSearch(subjectPrefix: text)]
        if text.lowercased() != text { searches.append(UserSearch(subjectPrefix: text.lowercased())) }
        if !text.contains(" "), !text.contains("@") {
            searches += [UserSearch(profileID: text), UserSearch(installationID: text)]
        }
        var seen = Set<[String]>()
        var found: [UserSummary] = []
        for search in searches {
            for user in try await admin.findUsers(search)
            where seen.insert([user.identityProvider, user.subject]).inserted {
                found.append(user)
            }
        }
        return Array(found.prefix(50))
    }

    /// The user page's address.
    static func userLink(identityProvider: String, subject: String, _ extra: [(String, String)] = []) -> String {
        userPath + "?" + FormFields.encode([("identity_provider", identityProvider), ("subject", subject)] + extra)
    }

    // MARK: - A user

    func userPage(_ request: WireRequest) async throws -> WireResponse {
        guard let signedIn = try await signedIn(request) else { return signInPage(for: request) }
        let query = FormFields(queryOf: request.path)
        let (identityProvider, subject) = try Self.user(query)
        let admin = try admin()
        let detail = try await admin.user(identityProvider: identityProvider, subject: subject)
        let events = try await admin.auditEvents(
            AuditQuery(identityProvider: identityProvider, subject: subject, limit: 20)
        )
        var values: [String: Any] = [
            "identityProvider": identityProvider, "subject": subject, "csrf": signedIn.csrf,
            "identityProviderName": identityProviderName(identityProvider),
            "allEvents": Self.auditPath + "?"
                + FormFields.encode([("identity_provider", identityProvider), ("subject", subject)]),
        ]
        values.merge(eventRows(events.events, linkUsers: false)) { $1 }
        let profiles = detail?.profiles ?? []
        values["profileCount"] =
            profiles.isEmpty
            ? "No profiles: the user has no registered device now."
            : ConsoleText.count(profiles.count, "profile") + " (one per app installation)."
        values["profiles"] = profiles.map { profileValues($0, signedIn: signedIn, admin: admin) }
        let pending = detail?.pendingTransactions ?? []
        values["hasPending"] = !pending.isEmpty
        values["pending"] = pending.map { transaction -> [String: Any] in
            [
                "id": transaction.id, "apiClient": transaction.apiClient, "type": transaction.type,
                "created": ConsoleText.time(transaction.createdAt), "expires": ConsoleText.time(transaction.expiresAt),
            ]
        }
        if let done = query?["done"].flatMap(ConsoleAction.init(rawValue:)), let profile = query?["profile"],
            try await isSealed(query, session: signedIn.session)
        {
            values["notice"] = done.done(
                profile: profile,
                authenticator: query?["authenticator"],
                sessions: query?["sessions"].flatMap { Int($0) }
            )
        }
        return page(200, subject, template: "user", values, chrome: chrome(signedIn, active: "search"))
    }

    /// Whether the outcome fields of `query` (as `act` writes them, in its order) carry this
    /// session's seal.
    private func isSealed(_ query: FormFields?, session: AdminConsoleStore.Session) async throws -> Bool {
        guard let query, let seal = query["seal"] else { return false }
        let outcome = ["done", "profile", "sessions", "authenticator"].compactMap { name in
            query[name].map { (name, $0) }
        }
        let expected = try await outcomeSeal(FormFields.encode(outcome), for: session)
        return ConstantTime.equals(Array(seal.utf8), Array(expected.utf8))
    }

    /// The user a query or form names: `identity_provider` and `subject`.
    static func user(_ fields: FormFields?) throws -> (String, String) {
        guard let identityProvider = fields?["identity_provider"], let subject = fields?["subject"],
            (1...128).contains(identityProvider.utf8.count), (1...1024).contains(subject.utf8.count)
        else {
            throw ConsoleProblem(400, "Which user?", "Open the user from the search.", back: (homePath, "Find a user"))
        }
        return (identityProvider, subject)
    }

    /// What the user page shows of one profile, with the actions the operator may take.
    func profileValues(_ profile: ProfileDetail, signedIn: SignedIn, admin: AdminService) -> [String: Any] {
        let mayWrite = signedIn.mayWrite
        var values: [String: Any] = [
            "id": profile.id, "appID": profile.appID, "installationID": profile.installationID,
            "created": ConsoleText.time(profile.createdAt), "lastUsed": ConsoleText.time(profile.lastUsedAt),
            "failures": profile.failures, "failing": profile.failures > 0, "push": Self.push(profile.pushEnrolment),
            "hasSessions": !profile.sessions.isEmpty,
        ]
        if let expires = profile.expiresAt { values["expires"] = ConsoleText.time(expires) }
        values["authenticators"] = profile.authenticators.map { authenticator -> [String: Any] in
            [
                "id": authenticator.id, "added": ConsoleText.time(authenticator.createdAt), "profile": profile.id,
                "removable": mayWrite && !pinAuthenticators.contains(authenticator.id),
            ]
        }
        values["sessions"] = profile.sessions.map { session -> [String: Any] in
            [
                "id": String(session.id.prefix(12)), "issued": ConsoleText.time(session.issuedAt, none: "—"),
                "expires": ConsoleText.time(session.expiresAt, none: "—"), "state": session.active ? "Active" : "Ended",
            ]
        }
        guard mayWrite else { return values }
        var actions: [ConsoleAction] = []
        if profile.sessions.contains(where: \.active) { actions.append(.revokeSessions) }
        if let push = profile.pushEnrolment, !push.disenrolled { actions.append(.disenrolDevice) }
        if admin.clearsLockouts, profile.failures > 0 { actions.append(.clearLockout) }
        actions.append(.deregisterProfile)
        values["actions"] = true
        values["buttons"] = actions.map { action -> [String: Any] in
            [
                "action": action.rawValue, "label": action.button, "profile": profile.id,
                "style": action == .deregisterProfile ? "danger" : "secondary",
            ]
        }
        return values
    }

    /// A profile's push enrolment in words.
    static func push(_ enrolment: PushEnrolmentSummary?) -> String {
        guard let enrolment else { return "Not enrolled" }
        if enrolment.disenrolled { return "Disenrolled" }
        let since = " since " + ConsoleText.time(enrolment.createdAt)
        guard enrolment.hasPushToken else { return "Enrolled without a push token" + since }
        return "Enrolled" + (enrolment.platform.map { " (\($0))" } ?? "") + since
    }

    // MARK: - Actions

    /// An action's form, checked: a signed-in operator who may write, an action, a profile, the
    /// user to return to, and the authenticator when one is removed.
    struct ActionForm {
        var signedIn: SignedIn
        var action: ConsoleAction
        var profile: String
        var authenticator: String?
        var identityProvider: String
        var subject: String

        /// The user's page.
        var back: String { AdminConsole.userLink(identityProvider: identityProvider, subject: subject) }
    }

    private func actionForm(_ request: WireRequest) async throws -> ActionForm {
        let (signedIn, fields) = try await postedForm(request)
        let (identityProvider, subject) = try Self.user(fields)
        guard signedIn.mayWrite else {
            logger.notice("Admin console action refused: the operator may only read")
            throw ConsoleProblem(
                403,
                "Read only",
                "Your operator account may look but not change anything (admin:read). Ask for admin:write to act.",
                back: (Self.userLink(identityProvider: identityProvider, subject: subject), "Back to \(subject)")
            )
        }
        func printable(_ text: String?) -> String? {
            guard let text, (1...128).contains(text.utf8.count),
                text.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
            else { return nil }
            return text
        }
        guard let action = ConsoleAction(rawValue: fields["action"] ?? ""), let profile = printable(fields["profile"])
        else { throw ConsoleProblem(400, "Cannot continue", "The form names no action or profile.") }
        let authenticator = printable(fields["authenticator"])
        if action == .removeAuthenticator, authenticator == nil {
            throw ConsoleProblem(400, "Cannot continue", "The form names no authenticator.")
        }
        return ActionForm(
            signedIn: signedIn,
            action: action,
            profile: profile,
            authenticator: action == .removeAuthenticator ? authenticator : nil,
            identityProvider: identityProvider,
            subject: subject
        )
    }

    func confirmation(_ request: WireRequest) async throws -> WireResponse {
        let form = try await actionForm(request)
        let action = form.action
        var hidden: [(String, String)] = [
            ("csrf", form.signedIn.csrf), ("action", action.rawValue), ("profile", form.profile),
            ("identity_provider", form.identityProvider), ("subject", form.subject),
        ]
        if let authenticator = form.authenticator { hidden.append(("authenticator", authenticator)) }
        return page(
            200,
            action.heading,
            template: "confirm",
            [
                "heading": action.heading,
                "question": action.question(
                    profile: form.profile,
                    subject: form.subject,
                    authenticator: form.authenticator
                ),
                "consequence": action.consequence, "confirmLabel": action.confirm, "back": form.back,
                "fields": hidden.map { ["name": $0.0, "value": $0.1] },
            ],
            chrome: chrome(form.signedIn, active: "search")
        )
    }

    func act(_ request: WireRequest) async throws -> WireResponse {
        let form = try await actionForm(request)
        let admin = try admin()
        let actor = AdminActor.consoleOperator(form.signedIn.subject)
        let profile = form.profile
        var outcome: [(String, String)] = [("done", form.action.rawValue), ("profile", profile)]
        do {
            switch form.action {
            case .revokeSessions:
                let revoked = try await admin.revokeSessions(profileID: profile, by: actor)
                outcome.append(("sessions", String(revoked)))
            case .removeAuthenticator:
                let authenticator = form.authenticator ?? ""
                try await admin.removeAuthenticator(authenticator, profileID: profile, by: actor)
                outcome.append(("authenticator", authenticator))
            case .disenrolDevice: try await admin.disenrolDevice(profileID: profile, by: actor)
            case .deregisterProfile: try await admin.deregisterProfile(profileID: profile, by: actor)
            case .clearLockout: try await admin.clearLockout(profileID: profile, by: actor)
            }
        } catch let refused as AdminError {
            throw ConsoleProblem(
                Self.status(refused),
                "Not done",
                refused.description,
                back: (form.back, "Back to \(form.subject)")
            )
        }
        let sealed = FormFields.encode(outcome)
        let seal = try await outcomeSeal(sealed, for: form.signedIn.session)
        return redirect(form.back + "&" + sealed + "&" + FormFields.encode([("seal", seal)]))
    }

    /// The status of the page that says an action was refused.
    static func status(_ error: AdminError) -> Int {
        switch error {
        case .profileNotFound, .authenticatorNotRegistered: 404
        case .pinCannotBeRemoved, .notEnrolled: 409
        case .clearingLockoutsNotAllowed: 403
        case .searchNeedsAFilter: 400
        }
    }
}
