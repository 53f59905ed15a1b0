import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import Testing

@testable import GatehouseAdminConsole

@Suite("The admin console: signing in through the hosted login, refusals, forms and actions", .serialized)
struct AdminConsoleTests {
    /// Carl's page, as the console links it.
    static let carlsPage = AdminConsole.userLink(identityProvider: "web", subject: People.carl)

    @Test(
        """
        an operator approves on the phone with its PIN: the console opens (HttpOnly, SameSite=Strict cookie under \
        /admin/, no-store, a strict CSP), and finds users by the start of an e-mail address, a profile id and an \
        installation id
        """
    )
    func signInAndSearch() async throws {
        try await withConsole { fixture in
            let annPhone = try await fixture.phone(of: People.ann)
            let carlPhone = try await fixture.phone(of: People.carl)
            var browser = try await fixture.signIn(annPhone, as: People.ann)
            #expect(browser.html.contains(#"id="operator">ann@example.com · read and write<"#), "\(browser.text)")
            let session = try #require(browser.setCookies.first { $0.hasPrefix("gh_admin_session=") })
            #expect(session.contains("; Path=/admin/; HttpOnly; SameSite=Strict; Max-Age=28800"), "\(session)")
            let started = try #require(browser.setCookies.first { $0.hasPrefix("gh_admin_signin=") })
            #expect(started.contains("; Path=/admin/; HttpOnly; SameSite=Lax; Max-Age=600"), "\(started)")
            #expect(browser.jar["gh_admin_signin"] == nil, "the sign-in's cookie is cleared once it is used")

            let home = await browser.get(AdminConsole.homePath)
            #expect(home.header("Cache-Control") == "no-store")
            #expect(
                home.header("Content-Security-Policy")
                    == "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
            )
            #expect(home.header("X-Frame-Options") == "DENY" && !browser.html.contains("<script"))

            _ = await browser.get("/admin/?q=carl%40")
            #expect(browser.html.contains("1 user found") && browser.html.contains(Self.carlsPage.escapedForHTML))
            _ = await browser.get("/admin/?q=CARL")
            #expect(browser.html.contains("1 user found"), "subjects are found as the login keeps them, lowercased")
            _ = await browser.get("/admin/?q=" + carlPhone.profile.id)
            #expect(browser.html.contains("1 user found") && browser.html.contains(People.carl))
            let detail = try #require(
                try await fixture.server.server.admin.user(identityProvider: "web", subject: People.carl)
            )
            let installation = try #require(detail.profiles.first?.installationID)
            _ = await browser.get("/admin/?" + FormFields.encode([("q", installation)]))
            #expect(browser.html.contains("1 user found") && browser.html.contains(People.carl))
            _ = await browser.get("/admin/?q=nobody")
            #expect(browser.html.contains(#"id="no-results""#))
            _ = await browser.get("/admin/?q=example.com")
            #expect(!browser.html.contains("user found"), "a prefix, not a part: \(browser.text.prefix(300))")

            // The user's page: the profile, its authenticator, session, push enrolment and events.
            let page = await browser.get(Self.carlsPage)
            #expect(page.status == 200)
            #expect(browser.html.contains(#"id="profile-\#(carlPhone.profile.id)""#))
            #expect(browser.html.contains("Enrolled without a push token since "), "\(browser.text)")
            #expect(browser.html.contains(" UTC"), "times are said in UTC")
            #expect(browser.html.contains(#"data-event="registration""#))
            #expect(browser.html.contains(#"id="deregister-profile-\#(carlPhone.profile.id)""#))
            // The PIN is every profile's fallback: no "Remove" for it.
            #expect(!browser.html.contains(#"name="action" value="remove-authenticator""#))
        }
    }

    @Test("a phone sign-in without its PIN (acr phone, amr swk) is refused: a second factor is needed; no session")
    func noSecondFactor() async throws {
        try await withConsole(pushType: "login") { fixture in
            let phone = try await fixture.phone(of: People.ann)
            let browser = try await fixture.signIn(phone, as: People.ann)
            #expect(browser.html.contains("A second factor is needed"), "\(browser.text.prefix(600))")
            #expect(browser.jar["gh_admin_session"] == nil && !browser.html.contains(#"id="operator""#))
            #expect(browser.html.contains(#"id="sign-in""#), "the refusal offers to sign in again")
            #expect(
                consoleLogs.lines.contains { $0.contains("Admin console sign-in refused") && $0.contains("no_mfa") }
            )
        }
    }

    @Test("a user of the login who is no operator signs in with two factors and is refused by name; no session")
    func notAnOperator() async throws {
        try await withConsole { fixture in
            let phone = try await fixture.phone(of: People.carl)
            let browser = try await fixture.signIn(phone, as: People.carl)
            #expect(browser.html.contains("Not an operator"), "\(browser.text.prefix(600))")
            #expect(browser.html.contains("carl@example.com signed in, but is not an operator"))
            #expect(browser.jar["gh_admin_session"] == nil)
            // The trail names the server as the one who refused, and carl as whom: never as an operator.
            let events = try await fixture.audit()
            let refused = events.filter { $0.event == "operator_sign_in_refused" }
            #expect(refused.count == 1, "\(events)")
            #expect(refused.first?.actor == "server" && refused.first?.subject == "carl@example.com")
            #expect(refused.first?.detail["reason"] == "not_an_operator")
            #expect(!events.contains { $0.actor.hasPrefix("operator:") || $0.event == "operator_sign_in" })
        }
    }

    @Test(
        """
        forms need the session's token: a forged token, another operator's token, and a post without the cookie (as \
        another site's page sends it) are refused 403, and nothing changes
        """
    )
    func formTokens() async throws {
        try await withConsole { fixture in
            let annPhone = try await fixture.phone(of: People.ann)
            let bobPhone = try await fixture.phone(of: People.bob)
            let carlPhone = try await fixture.phone(of: People.carl)
            var ann = try await fixture.signIn(annPhone, as: People.ann)
            var bob = try await fixture.signIn(bobPhone, as: People.bob)
            _ = await ann.get(Self.carlsPage)
            _ = await bob.get(Self.carlsPage)
            let annToken = try #require(ann.csrf)
            let bobToken = try #require(bob.csrf)
            #expect(annToken != bobToken)
            let profile = carlPhone.profile.id
            let fields = ann.actionFields("deregister-profile", profile: profile)

            let forged = await ann.post(AdminConsole.actionPath, [("csrf", "forged")] + fields.dropFirst())
            #expect(forged.status == 403 && ann.html.contains("Form expired"))
            let borrowed = await ann.post(AdminConsole.actionPath, [("csrf", bobToken)] + fields.dropFirst())
            #expect(borrowed.status == 403 && ann.html.contains("Form expired"))
            let crossSite = await ann.post(AdminConsole.actionPath, fields, withCookies: false)
            #expect(crossSite.status == 403 && ann.html.contains("Your console session ended"))
            let noToken = await ann.post(AdminConsole.signOutPath, [])
            #expect(noToken.status == 403)

            let detail = try await fixture.server.server.admin.user(identityProvider: "web", subject: People.carl)
            #expect(detail?.profiles.map(\.id) == [profile])
            #expect(try await fixture.audit(AuditQuery(event: "admin_deregister_profile")).isEmpty)
            // Still signed in: a refused form ends nothing.
            _ = await ann.get(AdminConsole.homePath)
            #expect(ann.html.contains(#"id="operator""#))
        }
    }

    @Test(
        """
        an operator with admin:read only sees the user's page without any action, and the confirmation and the \
        action itself are refused 403 with the session's own token
        """
    )
    func readOnlyOperator() async throws {
        try await withConsole { fixture in
            let bobPhone = try await fixture.phone(of: People.bob)
            let carlPhone = try await fixture.phone(of: People.carl)
            var bob = try await fixture.signIn(bobPhone, as: People.bob)
            #expect(bob.html.contains(#"id="operator">bob@example.com · read only<"#))
            _ = await bob.get(Self.carlsPage)
            #expect(bob.html.contains(#"id="profile-\#(carlPhone.profile.id)""#))
            #expect(!bob.html.contains(AdminConsole.confirmPath), "no action form for a read-only operator")
            let confirm = await bob.press("deregister-profile", profile: carlPhone.profile.id)
            #expect(confirm.status == 403 && bob.html.contains("Read only"), "\(bob.text.prefix(400))")
            _ = await bob.get(Self.carlsPage)
            let act = await bob.post(
                AdminConsole.actionPath,
                bob.actionFields("deregister-profile", profile: carlPhone.profile.id)
            )
            #expect(act.status == 403 && bob.html.contains("Read only"))
            let detail = try await fixture.server.server.admin.user(identityProvider: "web", subject: People.carl)
            #expect(detail?.profiles.count == 1)
            #expect(try await fixture.audit().allSatisfy { !$0.event.hasPrefix("admin_") })
        }
    }

    @Test(
        """
        actions, each after its confirmation page, as the operator: clear the failed attempts, revoke the sessions, \
        disenrol the device, deregister the profile; the phone then gets userDeregistered, and the trail names the \
        operator
        """
    )
    func actions() async throws {
        try await withConsole { fixture in
            let annPhone = try await fixture.phone(of: People.ann)
            let carlPhone = try await fixture.phone(of: People.carl)
            let profile = carlPhone.profile.id
            await #expect(throws: (any Error).self) {
                try await carlPhone.client.authenticateUser(
                    carlPhone.profile,
                    delegate: ScriptedResponder([.pin("000111"), .pin("000222"), .cancel])
                )
            }
            var ann = try await fixture.signIn(annPhone, as: People.ann)
            _ = await ann.get(Self.carlsPage)
            #expect(ann.html.contains(#"id="failures-\#(profile)">2<"#), "\(ann.text.prefix(800))")
            #expect(ann.html.contains(#"data-event="login_failure""#))

            func perform(_ action: String, expecting notice: String) async throws {
                let confirmation = await ann.press(action, profile: profile)
                #expect(confirmation.status == 200 && ann.has("confirm"), "\(action): \(ann.text.prefix(400))")
                let fields = ann.hidden.map { ($0.key, $0.value) }
                let done = await ann.post(AdminConsole.actionPath, fields)
                #expect(done.status == 303, "\(action): \(done.status) \(ann.text.prefix(400))")
                _ = try await ann.follow(done)
                #expect(ann.text.contains(notice), "\(action): \(ann.text.prefix(600))")
            }
            // A link that claims an outcome without the session's seal tells nothing.
            let forged = await ann.get(Self.carlsPage + "&done=deregister-profile&profile=\(profile)&seal=forged")
            #expect(forged.status == 200 && !ann.text.contains("Deregistered profile"), "\(ann.text.prefix(600))")
            try await perform("clear-lockout", expecting: "Cleared the failed attempts of profile \(profile).")
            #expect(ann.html.contains(#"id="failures-\#(profile)">0<"#))
            #expect(!ann.has("clear-lockout-\(profile)"), "nothing to clear any more")
            // How many were active depends on whether the SDK's own sign-out after the failed attempts
            // arrived first; that the action was taken, and said, does not.
            try await perform("revoke-sessions", expecting: "active session")
            #expect(!ann.has("revoke-sessions-\(profile)"))
            try await perform("disenrol-device", expecting: "Disenrolled the device of profile \(profile)")
            #expect(ann.text.contains("Disenrolled") && !ann.has("disenrol-device-\(profile)"))
            try await perform("deregister-profile", expecting: "Deregistered profile \(profile).")
            #expect(ann.text.contains("No profiles: the user has no registered device now."))

            await #expect {
                try await carlPhone.client.authenticateUser(
                    carlPhone.profile,
                    delegate: ScriptedResponder([.pin(People.pin)])
                )
            } throws: { ($0 as? GenericError)?.code == .userDeregistered }

            let admin = try await fixture.audit(AuditQuery(actor: "operator:\(People.ann)"))
            #expect(
                admin.map(\.event) == [
                    "admin_deregister_profile", "admin_disenrol_device", "admin_revoke_sessions", "admin_clear_lockout",
                    "operator_sign_in",
                ]
            )
            #expect(admin.dropLast().allSatisfy { $0.profileID == profile && $0.subject == People.carl })
            #expect(admin.last?.detail["acr"] == "urn:gatehouse:acr:phone", "the operator's own sign-in, and how")
            // A second try at a profile that is gone says so, with a way back.
            let again = await ann.post(
                AdminConsole.actionPath,
                ann.actionFields("deregister-profile", profile: profile)
            )
            #expect(again.status == 404 && ann.html.contains("No profile has this id."), "\(ann.text.prefix(400))")
        }
    }

    @Test(
        """
        the audit trail: newest first, a page at a time with an Older link carrying the cursor and a Newest link, \
        filtered by event, user and time (UTC); a time that is none is said
        """
    )
    func auditTrail() async throws {
        try await withConsole(consoleExtra: "  auditPageSize: 5") { fixture in
            let annPhone = try await fixture.phone(of: People.ann)
            _ = try await fixture.phone(of: People.carl)
            _ = try await fixture.phone(of: People.bob)
            var ann = try await fixture.signIn(annPhone, as: People.ann)
            let all = try await fixture.audit(AuditQuery(limit: 1000))
            #expect(all.count > 5)

            _ = await ann.get(AdminConsole.auditPath)
            let first = Self.events(ann.html)
            #expect(first == all.prefix(5).map(\.event), "\(first)")
            let older = try #require(ann.html.firstMatch(of: #/id="older" href="([^"]+)"|href="([^"]+)" id="older"/#))
            let link = String(older.output.1 ?? older.output.2 ?? "").replacingOccurrences(of: "&amp;", with: "&")
            #expect(link.contains("before="), "\(link)")
            _ = await ann.get(link)
            #expect(Self.events(ann.html) == all.dropFirst(5).prefix(5).map(\.event))
            #expect(ann.has("newest"))

            _ = await ann.get(AdminConsole.auditPath + "?event=registration&subject=carl%40example.com")
            let registrations = Self.events(ann.html)
            #expect(registrations == ["registration"], "\(registrations)")
            #expect(ann.html.contains(#"<option value="registration" selected>"#))

            _ = await ann.get(AdminConsole.auditPath + "?operator=ann%40example.com")
            #expect(Self.events(ann.html) == ["operator_sign_in"], "the operator's own sign-in, in her name")
            #expect(ann.html.contains("ann@example.com (operator)"))

            _ = await ann.get(AdminConsole.auditPath + "?until=2001-01-01T00%3A00")
            #expect(ann.has("no-events") && ann.html.contains(#"value="2001-01-01T00:00""#))
            _ = await ann.get(AdminConsole.auditPath + "?since=" + FormFields.percentEncoded(Self.field(Date() - 3600)))
            #expect(Self.events(ann.html).count == 5)
            _ = await ann.get(AdminConsole.auditPath + "?since=yesterday")
            #expect(ann.alert == "“From” is not a date and time.")
        }
    }

    @Test(
        """
        a session ends after idleTimeout without a request, after sessionLifetime however busy, and when the \
        operator signs out (its cookie then opens nothing)
        """
    )
    func sessionLifetimes() async throws {
        try await withConsole(consoleExtra: "  idleTimeout: 300\n  sessionLifetime: 600") { fixture in
            let phone = try await fixture.phone(of: People.ann)
            var idle = try await fixture.signIn(phone, as: People.ann)
            fixture.clock.advance(by: 299)
            _ = await idle.get(AdminConsole.homePath)
            #expect(idle.has("operator"), "a request within the idle time keeps the session")
            fixture.clock.advance(by: 301)
            _ = await idle.get(AdminConsole.homePath)
            #expect(idle.has("sign-in") && !idle.has("operator"), "idle too long")

            var busy = try await fixture.signIn(phone, as: People.ann)
            for _ in 0..<2 {
                fixture.clock.advance(by: 250)
                _ = await busy.get(AdminConsole.homePath)
                #expect(busy.has("operator"))
            }
            fixture.clock.advance(by: 250)
            _ = await busy.get(AdminConsole.homePath)
            #expect(busy.has("sign-in") && !busy.has("operator"), "past the session's lifetime")

            var leaving = try await fixture.signIn(phone, as: People.ann)
            let cookie = try #require(leaving.jar["gh_admin_session"])
            let out = await leaving.post(AdminConsole.signOutPath, [("csrf", leaving.csrf ?? "")])
            #expect(out.status == 200 && leaving.html.contains("You signed out of the admin console."))
            #expect(leaving.jar["gh_admin_session"] == nil)
            leaving.jar["gh_admin_session"] = cookie
            _ = await leaving.get(AdminConsole.homePath)
            #expect(leaving.has("sign-in") && !leaving.has("operator"))
        }
    }

    @Test(
        """
        a console page opened signed out offers the sign-in and comes back to it; a callback without its sign-in's \
        cookie, or a second time, is refused
        """
    )
    func signInReturnsAndCallbacks() async throws {
        try await withConsole { fixture in
            let phone = try await fixture.phone(of: People.ann)
            var stranger = Browser(server: fixture.server, baseURL: fixture.baseURL)
            let page = await stranger.get(Self.carlsPage)
            #expect(page.status == 200 && stranger.html.contains("Sign in to the admin console"))
            #expect(stranger.html.contains("You sign in at the Gatehouse login with a passkey or your phone."))
            #expect(stranger.html.contains(AdminConsole.signInPath + "?next=%2Fadmin%2Fuser"))
            let back = try await fixture.signIn(phone, as: People.ann, next: Self.carlsPage)
            #expect(back.html.contains(#"<h1 id="user">carl@example.com</h1>"#), "\(back.text.prefix(400))")
            // Only console pages: anything else leads home.
            let elsewhere = try await fixture.signIn(phone, as: People.ann, next: "https://elsewhere.example/")
            #expect(elsewhere.html.contains("Find a user"))

            let forged = await stranger.get(AdminConsole.callbackPath + "?code=abc&state=def")
            #expect(
                forged.status == 400 && stranger.html.contains("This sign-in expired or was started in another browser")
            )
        }
    }

    @Test("pages: the style sheet, 405 with Allow for a wrong method, 404 for no page, none of them cached")
    func pages() async throws {
        try await withConsole { fixture in
            var browser = Browser(server: fixture.server, baseURL: fixture.baseURL)
            let style = await browser.get(AdminConsole.stylePath)
            #expect(style.status == 200 && style.header("Content-Type") == "text/css; charset=utf-8")
            let wrong = await browser.get(AdminConsole.actionPath)
            #expect(wrong.status == 405 && wrong.header("Allow") == "POST")
            let none = await browser.get("/admin/nothing")
            #expect(none.status == 404 && none.header("Cache-Control") == "no-store")
        }
    }

    @Test(
        """
        set-up: a login client that is missing, lacks the console's redirect URI, or cannot give the acr values asked \
        is a manifest error at adminConsole.loginClient that says what to add
        """
    )
    func setUpErrors() async throws {
        try await withConsoleStorage { storage, _ in
            let environment = PluginEnvironment(logger: consoleLogs.logger)
            let base = "http://127.0.0.1:8099"
            func attempt(_ manifest: Manifest) throws -> String {
                let login = try LoginServer(manifest: manifest, storage: storage, environment: environment)
                do {
                    _ = try AdminConsole(manifest: manifest, login: login, storage: storage, environment: environment)
                    return ""
                } catch let error as ManifestError {
                    #expect(error.path == "adminConsole.loginClient")
                    return error.problem
                }
            }
            let passkeyOnly = try consoleManifest(
                baseURL: base,
                pushType: "login-pin",
                acrValues: "[urn:gatehouse:acr:passkey]"
            )
            #expect(try attempt(passkeyOnly).contains("offers no sign-in giving urn:gatehouse:acr:passkey"))
            let elsewhere = try consoleManifest(baseURL: base, pushType: "login-pin")
            let moved = try LoginServer(
                manifest: elsewhere,
                storage: storage,
                environment: environment,
                servedURL: URL(string: base)
            )
            #expect(moved.issuer == base + "/login")
            var configuration = try elsewhere.section("adminConsole", as: AdminConsoleConfiguration.self)
            configuration.loginClient = "gatehouse"
            #expect {
                try AdminConsole(configuration: configuration, login: moved, storage: storage, environment: environment)
            } throws: {
                ($0 as? AdminConsoleSetupError)?.message
                    == "the login client \"gatehouse\" needs the redirect URI \(base)/admin/callback"
            }
            configuration.loginClient = "nobody"
            #expect {
                try AdminConsole(configuration: configuration, login: moved, storage: storage, environment: environment)
            } throws: {
                ($0 as? AdminConsoleSetupError)?.message.hasPrefix("the login section has no client \"nobody\"") == true
            }
        }
    }

    /// The events a page's table lists, newest first.
    static func events(_ html: String) -> [String] {
        html.matches(of: #/data-event="([a-z_]+)"/#).map { String($0.output.1) }
    }

    /// `date` as a `datetime-local` field holds it, in UTC.
    static func field(_ date: Date) -> String {
        String(date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt)).prefix(16))
    }
}

extension Browser {
    /// Whether the page has an element with `id`.
    func has(_ id: String) -> Bool { html.contains(#"id="\#(id)""#) }
}

extension String {
    /// The text as Mustache escapes a link in HTML (`&` as `&amp;`).
    var escapedForHTML: String { replacingOccurrences(of: "&", with: "&amp;") }
}
