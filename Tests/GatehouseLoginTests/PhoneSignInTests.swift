import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import GatehouseTesting
import Testing

@Suite("Hosted login: signing in with an enrolled phone", .serialized)
struct PhoneSignInTests {
    @Test("a push with number matching: the right number approves; the page completes with acr phone, amr swk")
    func pushApproved() async throws {
        try await withPhoneLogin { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            var tab = Tab(phone.login)
            let request = AuthRequest.web()
            #expect(await tab.open(request).status == 200)
            #expect(tab.has("sign-in") && tab.has("push") && tab.has("qr") && !tab.has("passkey"))
            let waiting = await tab.push(OP.ann)
            #expect(waiting.status == 200 && tab.html.contains("Approve on your phone"))
            let number = try #require(tab.number)
            #expect((10...99).contains(number))
            #expect(await tab.phoneStatus() == "pending")
            // Completing before the phone answered keeps the page waiting.
            var early = tab
            #expect(await early.complete().status == 409)

            let pending = try await device.waiting()
            #expect(pending.message == "Sign in to Web Shop?")
            let script = ScriptedResponder([.confirmation(.accept(number: number))])
            let result = await device.client.handlePushMobileAuthRequest(pending, delegate: script)
            #expect(result.isApproved)
            let asked = await script.received
            guard case .confirmation(let challenge)? = asked.first else {
                Issue.record("the phone was not asked to confirm: \(asked.map(\.kind))")
                return
            }
            #expect(challenge.request.numberMatching)
            #expect(await tab.phoneStatus() == "approved")
            let token = try await idToken(phone.op, await tab.complete(), request)
            #expect(token.claims.sub == OP.ann)
            #expect(token.claims.acr == ACR.phone)
            #expect(token.claims.amr == ["swk"])
            #expect(tab.jar["gh_sso"] != nil)
        }
    }

    @Test("a wrong number on the phone denies: the status says denied and the page shows the login page again")
    func wrongNumberDenies() async throws {
        try await withPhoneLogin { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            var tab = Tab(phone.login)
            _ = await tab.open(.web())
            _ = await tab.push(OP.ann)
            let number = try #require(tab.number)
            let wrong = number == 99 ? 10 : number + 1
            let result = try await device.answer([.confirmation(.accept(number: wrong))])
            #expect(!result.isApproved)
            #expect(await tab.phoneStatus() == "denied")
            let denied = await tab.complete()
            #expect(denied.status == 401 && tab.alert?.contains("denied") == true)
            #expect(tab.has("sign-in") && tab.has("push") && tab.jar["gh_sso"] == nil)
            // The approval is gone with the page's wait: completing again finds nothing.
            var again = tab
            #expect(await again.complete().status == 400)
        }
    }

    @Test("the phone's deny shows the login page with the denial; the status answers denied")
    func deniedOnThePhone() async throws {
        try await withPhoneLogin { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            var tab = Tab(phone.login)
            _ = await tab.open(.web())
            _ = await tab.push(OP.ann)
            let result = try await device.answer([.confirmation(.deny(.notRecognised))])
            guard case .denied = result else {
                Issue.record("the phone's answer was not recorded as a denial: \(result)")
                return
            }
            #expect(await tab.phoneStatus() == "denied")
            #expect(await tab.complete().status == 401)
            #expect(tab.alert == "The sign-in was denied on the phone.")
            #expect(tab.has("sign-in") && tab.jar["gh_sso"] == nil)
        }
    }

    @Test("a push type asking the PIN: number, then PIN; amr swk pin mfa")
    func pushWithPIN() async throws {
        try await withPhoneLogin(pushType: "login-pin") { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            var tab = Tab(phone.login)
            let request = AuthRequest.web()
            _ = await tab.open(request)
            _ = await tab.push(OP.ann)
            let number = try #require(tab.number)
            let script = ScriptedResponder([.confirmation(.accept(number: number)), .pin(PhoneLogin.pin)])
            let result = await device.client.handlePushMobileAuthRequest(try await device.waiting(), delegate: script)
            #expect(result.isApproved)
            #expect(await script.receivedKinds == ["confirmation", "pin"])
            let token = try await idToken(phone.op, await tab.complete(), request)
            #expect(token.claims.acr == ACR.phone && token.claims.amr == ["swk", "pin", "mfa"])
            #expect(token.claims.sub == OP.ann)
        }
    }

    @Test("a QR code on the page: whoever's phone scans and approves it is signed in; the code works once")
    func qrCode() async throws {
        try await withPhoneLogin { phone in
            let device = try await phone.device("bob-phone", of: OP.bob)
            var tab = Tab(phone.login)
            let request = AuthRequest.web()
            _ = await tab.open(request)
            let page = await tab.qrCode()
            #expect(page.status == 200 && tab.html.contains("Scan with your phone"))
            #expect(tab.html.contains("<svg") && tab.has("qr-code") && tab.number == nil)
            let otp = try #require(tab.text(of: "otp"))
            #expect(device.client.canHandleOTPMobileAuthRequest(otp: otp))
            #expect(await tab.phoneStatus() == "pending")
            #expect(await device.scan(otp, [.confirmation(.accept)]).isApproved)
            #expect(await tab.phoneStatus() == "approved")
            let token = try await idToken(phone.op, await tab.complete(), request)
            #expect(token.claims.sub == OP.bob && token.claims.acr == ACR.phone && token.claims.amr == ["swk"])
            // Scanned again: the transaction was claimed.
            #expect(!(await device.scan(otp, [.confirmation(.accept)]).isApproved))
        }
    }

    @Test("the status needs the page's cookie (404 without) and answers pending, approved, denied and expired")
    func status() async throws {
        try await withPhoneLogin { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            var tab = Tab(phone.login)
            _ = await tab.open(.web())
            _ = await tab.qrCode()
            #expect(await tab.phoneStatus() == "pending")
            let id = FormFields.encode([("authorization", tab.hidden["authorization"] ?? "")])
            let anonymous = await tab.fetch(LoginServer.phoneStatusPath + "?" + id, withCookies: false)
            #expect(anonymous.status == 404 && jsonObject(anonymous)["status"] == nil)
            // Another browser's cookie does not open this page's status.
            var other = Tab(phone.login)
            _ = await other.open(.web())
            let borrowed = await other.fetch(LoginServer.phoneStatusPath + "?" + id)
            #expect(borrowed.status == 404)
            // A page with no phone sign-in started.
            #expect(await other.phoneStatus() == nil)
            #expect(await tab.fetch(LoginServer.phoneStatusPath + "?authorization=unknown").status == 404)

            // Denied, then expired.
            _ = await other.qrCode()
            let otp = try #require(other.text(of: "otp"))
            #expect(!(await device.scan(otp, [.confirmation(.deny(.notAccepted))]).isApproved))
            #expect(await other.phoneStatus() == "denied")
            phone.clock.advance(by: 121)
            #expect(await tab.phoneStatus() == "expired")
            #expect(await tab.complete().status == 401 && tab.alert?.contains("expired") == true)
        }
    }

    @Test("two completions of one approval at once: exactly one code")
    func completionRace() async throws {
        try await withPhoneLogin { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            for _ in 0..<3 {
                var tab = Tab(phone.login)
                let request = AuthRequest.web()
                _ = await tab.open(request)
                _ = await tab.push(OP.ann)
                let number = try #require(tab.number)
                #expect(try await device.answer([.confirmation(.accept(number: number))]).isApproved)
                let completion = tab.formRequest(LoginServer.phoneCompletePath, tab.pageForm)
                async let first = phone.login.handle(completion)
                async let second = phone.login.handle(completion)
                let answers = await [first, second]
                let codes = answers.compactMap { redirectQuery($0)["code"] }
                #expect(codes.count == 1, "\(answers.map(\.status))")
                #expect(answers.map(\.status).sorted() == [303, 400])
                if let winner = answers.first(where: { $0.status == 303 }) {
                    let token = try await idToken(phone.op, winner, request)
                    #expect(token.claims.acr == ACR.phone)
                }
            }
        }
    }

    @Test("an unknown user, or one without a phone, gets a decoy: the same waiting page, never approved")
    func decoy() async throws {
        try await withPhoneLogin { phone in
            _ = try await phone.device("ann-phone", of: OP.ann)
            var real = Tab(phone.login)
            _ = await real.open(.web())
            let realPage = await real.push(OP.ann)
            for username in ["nobody@example.com", OP.bob] {
                var tab = Tab(phone.login)
                _ = await tab.open(.web())
                let page = await tab.push(username)
                #expect(page.status == realPage.status)
                #expect(page.headers == realPage.headers)
                let number = try #require(tab.number)
                #expect((10...99).contains(number))
                #expect(Self.shape(tab.html) == Self.shape(real.html), "\(username)")
                #expect(await tab.phoneStatus() == "pending")
                // Waiting "on the phone" like a real push: a second push is refused the same way.
                var second = Tab(phone.login)
                _ = await second.open(.web())
                #expect(await second.push(username).status == 429)
                var early = tab
                #expect(await early.complete().status == 409)
            }
            // Nobody can approve a decoy: it expires like an unanswered push.
            var decoyTab = Tab(phone.login)
            _ = await decoyTab.open(.web())
            _ = await decoyTab.push("carol@example.com")
            phone.clock.advance(by: 121)
            #expect(await decoyTab.phoneStatus() == "expired")
            #expect(await real.phoneStatus() == "expired")
            #expect(await decoyTab.complete().status == 401 && decoyTab.jar["gh_sso"] == nil)
        }
    }

    /// The page with what differs between two waits (ids, tokens, the number, the seconds) blanked.
    static func shape(_ html: String) -> String {
        html.replacing(#/value="[^"]*"/#, with: "value=\"\"")
            .replacing(#/authorization=[A-Za-z0-9_-]+/#, with: "authorization=")
            .replacing(#/>[0-9]{2}</#, with: "><")
            .replacing(#/at most [0-9]+ seconds/#, with: "at most seconds")
    }

    @Test("push fatigue: one waiting push per user (429), then the per-user burst (429)")
    func pushFatigue() async throws {
        try await withPhoneLogin(pushesPerUser: 3) { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            var first = Tab(phone.login)
            _ = await first.open(.web())
            _ = await first.push(OP.ann)
            var second = Tab(phone.login)
            _ = await second.open(.web())
            let refused = await second.push(OP.ann)
            #expect(refused.status == 429 && second.alert?.contains("waiting on your phone already") == true)
            #expect(try await device.client.pendingPushMobileAuthRequests().count == 1)
            // Answered, the next push may go: up to the burst.
            try await device.answer([.confirmation(.deny(.notAccepted))])
            #expect(await second.push(OP.ann).status == 200)
            try await device.answer([.confirmation(.deny(.notAccepted))])
            var third = Tab(phone.login)
            _ = await third.open(.web())
            #expect(await third.push(OP.ann).status == 200)
            try await device.answer([.confirmation(.deny(.notAccepted))])
            var fourth = Tab(phone.login)
            _ = await fourth.open(.web())
            let burst = await fourth.push(OP.ann)
            #expect(burst.status == 429 && fourth.alert?.contains("Too many sign-in requests") == true)
            #expect(try await device.client.pendingPushMobileAuthRequests().isEmpty)
            // Other users are not held back; a minute later one more push may go.
            #expect(await fourth.push(OP.bob).status == 200)
            phone.clock.advance(by: 61)
            var later = Tab(phone.login)
            _ = await later.open(.web())
            #expect(await later.push(OP.ann).status == 200)
        }
    }

    @Test("QR codes are limited per address (429)")
    func qrCodesPerAddress() async throws {
        try await withPhoneLogin(qrCodesPerMinute: 2) { phone in
            var tab = Tab(phone.login, address: "203.0.113.50")
            _ = await tab.open(.web())
            let form = tab.pageForm
            for _ in 0..<2 { #expect(await tab.post(LoginServer.qrPath, form).status == 200) }
            let limited = await tab.post(LoginServer.qrPath, form)
            #expect(limited.status == 429 && limited.headers["Retry-After"] != nil)
            var elsewhere = Tab(phone.login, address: "198.51.100.50")
            _ = await elsewhere.open(.web())
            #expect(await elsewhere.qrCode().status == 200)
        }
    }

    @Test("a push, then a QR code on the same page: another page's push for that username is still 429, user or not")
    func pushThenQRCode() async throws {
        try await withPhoneLogin { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            var answers: [String] = []
            for username in [OP.ann, OP.bob, "nobody@example.com"] {
                var tab = Tab(phone.login)
                _ = await tab.open(.web())
                #expect(await tab.push(username).status == 200)
                // The page moves on to a QR code (or back to the push): the push still waits.
                #expect(await tab.qrCode().status == 200 && tab.has("qr-code"))
                var other = Tab(phone.login)
                _ = await other.open(.web())
                let refused = await other.push(username)
                #expect(refused.status == 429, "\(username)")
                #expect(other.alert?.hasPrefix("A sign-in request is waiting on your phone already") == true)
                answers.append("\(refused.status) \(refused.headers["Retry-After"] ?? "none") \(other.alert ?? "")")
            }
            #expect(Set(answers).count == 1, "\(answers)")
            #expect(try await device.client.pendingPushMobileAuthRequests().count == 1)
        }
    }

    @Test("eight pushes at once for one user: exactly one goes to the phone, the others are 429; an unknown user alike")
    func concurrentPushes() async throws {
        try await withPhoneLogin(pushesPerUser: 8) { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            for username in [OP.ann, "nobody@example.com"] {
                var requests: [WireRequest] = []
                for _ in 0..<8 {
                    var tab = Tab(phone.login)
                    _ = await tab.open(.web())
                    requests.append(tab.formRequest(LoginServer.phonePath, tab.pageForm + [("username", username)]))
                }
                let login = phone.login
                let statuses = await withTaskGroup(of: Int.self) { group in
                    for request in requests { group.addTask { await login.handle(request).status } }
                    return await group.reduce(into: [Int]()) { $0.append($1) }
                }
                #expect(statuses.sorted() == [200] + Array(repeating: 429, count: 7), "\(username): \(statuses)")
            }
            #expect(try await device.client.pendingPushMobileAuthRequests().count == 1)
        }
    }

    @Test("a push names a username as a password does: both count per client address (429)")
    func pushesCountWithPasswords() async throws {
        try await withPhoneLogin(passwordChecksPerMinute: 3) { phone in
            var tab = Tab(phone.login, address: "203.0.113.60")
            _ = await tab.open(.web())
            let form = tab.pageForm
            let wrong = await tab.post(LoginServer.authorizePath, form + [("username", OP.ann), ("password", "wrong")])
            #expect(wrong.status == 401)
            for username in ["carol@example.com", "dave@example.com"] {
                #expect(await tab.post(LoginServer.phonePath, form + [("username", username)]).status == 200)
            }
            let limited = await tab.post(LoginServer.phonePath, form + [("username", "erin@example.com")])
            #expect(limited.status == 429 && limited.headers["Retry-After"] != nil, "\(limited.status)")
            #expect(tab.html.contains("Too many sign-in attempts from your address"))
            let password = await tab.post(
                LoginServer.authorizePath,
                form + [("username", OP.ann), ("password", OP.password)]
            )
            #expect(password.status == 429)
            var elsewhere = Tab(phone.login, address: "198.51.100.60")
            _ = await elsewhere.open(.web())
            #expect(await elsewhere.push("erin@example.com").status == 200)
        }
    }

    @Test("a decoy waits as long as the push type's time to live, as a real push does")
    func decoyLifetime() async throws {
        try await withPhoneLogin(pushTimeToLive: 300) { phone in
            _ = try await phone.device("ann-phone", of: OP.ann)
            var real = Tab(phone.login)
            _ = await real.open(.web())
            _ = await real.push(OP.ann)
            var decoy = Tab(phone.login)
            _ = await decoy.open(.web())
            _ = await decoy.push("nobody@example.com")
            #expect(real.html.contains("at most 300 seconds"))
            #expect(decoy.text(of: "phone-state") == real.text(of: "phone-state"))
            phone.clock.advance(by: 200)
            for username in [OP.ann, "nobody@example.com"] {
                var tab = Tab(phone.login)
                _ = await tab.open(.web())
                let refused = await tab.push(username)
                #expect(refused.status == 429 && refused.headers["Retry-After"] == "100", "\(username)")
            }
            #expect(await real.phoneStatus() == "pending")
            #expect(await decoy.phoneStatus() == "pending")
            phone.clock.advance(by: 101)
            #expect(await real.phoneStatus() == "expired")
            #expect(await decoy.phoneStatus() == "expired")
        }
    }

    @Test("with an enrolled phone, a password does not add the first passkey; signing in with the phone does")
    func phoneBeforePasskeys() async throws {
        try await withPhoneLogin(passkeys: true) { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            var ann = try await PasskeysPage.signIn(phone.login, as: OP.ann)
            #expect(!ann.mayManage && ann.tab.has("passkey-form") && ann.tab.html.contains("No passkeys yet."))
            let key = try SoftwareAuthenticator(.p256)
            var ceremony = Ceremony(challenge: try await ann.signInChallenge())
            PhoneLogin.passkeyCeremony(&ceremony)
            let planted = await ann.add(try key.register(ceremony).json)
            #expect(planted.status == 403 && ann.tab.alert?.contains("sign in with your phone") == true)
            #expect(ann.tab.html.contains("No passkeys yet.") && !ann.mayManage)
            let admin = phone.server.server.admin
            let passkeyEvents = { try await admin.auditEvents(AuditQuery(event: "passkey_added")).events }
            #expect(try await passkeyEvents().isEmpty, "a refused passkey left a trace of being added")
            // Bob has no phone: his password adds his first passkey, and the trail says so.
            var bob = try await PasskeysPage.signIn(phone.login, as: OP.bob)
            #expect(bob.mayManage)
            try await bob.register(try SoftwareAuthenticator(.p256), PhoneLogin.passkeyCeremony)
            let bobAdded = try await passkeyEvents()
            #expect(bobAdded.count == 1 && bobAdded.first?.subject == OP.bob && bobAdded.first?.actor == "user")
            #expect(bobAdded.first?.detail["session_acr"] == "urn:gatehouse:acr:password", "\(bobAdded)")

            // Ann signs in with her phone in the same browser: the page lets her add one now.
            let request = AuthRequest.web().with("acr_values", ACR.phone)
            #expect(await ann.tab.open(request).status == 200)
            #expect(await ann.tab.push(OP.ann).status == 200)
            let number = try #require(ann.tab.number)
            #expect(try await device.answer([.confirmation(.accept(number: number))]).isApproved)
            let token = try await idToken(phone.op, await ann.tab.complete(), request)
            #expect(token.claims.acr == ACR.phone)
            #expect(await ann.tab.get(LoginServer.passkeysPath).status == 200)
            #expect(ann.mayManage && ann.tab.html.contains("No passkeys yet."))
            try await ann.register(key, PhoneLogin.passkeyCeremony)
            #expect(try await passkeyEvents().first?.detail["session_acr"] == ACR.phone)

            var signIn = try await PasskeySignIn.open(phone.login, rpID: "id.example")
            let passkey = try await signIn.signIn(key, userHandle: ann.userHandle, PhoneLogin.passkeyCeremony)
            let passkeyToken = try await idToken(phone.op, passkey, signIn.request)
            #expect(passkeyToken.claims.sub == OP.ann && passkeyToken.claims.acr == ACR.passkey)
        }
    }

    @Test(
        "the passkeys page of a password session with a phone links to the phone; approved there, it comes back with acr phone and adds a passkey"
    )
    func confirmWithThePhone() async throws {
        try await withPhoneLogin(passkeys: true) { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            // Bob has no phone: his password manages his passkeys, and no link is offered.
            let bob = try await PasskeysPage.signIn(phone.login, as: OP.bob)
            #expect(bob.mayManage && !bob.tab.has("phone-link"))

            var ann = try await PasskeysPage.signIn(phone.login, as: OP.ann)
            #expect(!ann.mayManage && ann.tab.has("passkey-form"))
            #expect(ann.tab.text(of: "phone-link") == "Confirm with your phone")
            let link = try #require(ann.tab.phoneLink, "\(ann.tab.html)")
            let state = try Self.checkAccountLink(link)

            // The login page for the login's own client offers the phone only.
            #expect(await ann.tab.get(link).status == 200, "\(ann.tab.alert ?? ann.tab.html)")
            #expect(ann.tab.has("push") && ann.tab.has("qr"))
            #expect(!ann.tab.has("sign-in") && !ann.tab.has("passkey") && !ann.tab.has("password"))
            #expect(await ann.tab.push(OP.ann).status == 200)
            let number = try #require(ann.tab.number)
            #expect(try await device.answer([.confirmation(.accept(number: number))]).isApproved)
            let back = try Self.backOnPasskeysPage(await ann.tab.complete(), state: state)

            // The browser follows the redirect: signed in with the phone, the page manages.
            #expect(await ann.tab.get(back).status == 200)
            #expect(ann.tab.html.contains("Signed in as <strong>\(OP.ann)</strong>"))
            #expect(ann.mayManage && !ann.tab.has("phone-link") && ann.tab.html.contains("No passkeys yet."))
            let key = try SoftwareAuthenticator(.p256)
            try await ann.register(key, PhoneLogin.passkeyCeremony)
            // The session is the phone's: a client asking for acr phone gets a code at once.
            let stepUp = AuthRequest.web().with("acr_values", ACR.phone)
            let token = try await idToken(phone.op, await ann.tab.open(stepUp), stepUp)
            #expect(token.claims.sub == OP.ann && token.claims.acr == ACR.phone && token.claims.amr == ["swk"])
            // The passkey added signs her in.
            var signIn = try await PasskeySignIn.open(phone.login, rpID: "id.example")
            let passkey = try await signIn.signIn(key, userHandle: ann.userHandle, PhoneLogin.passkeyCeremony)
            let passkeyToken = try await idToken(phone.op, passkey, signIn.request)
            #expect(passkeyToken.claims.sub == OP.ann && passkeyToken.claims.acr == ACR.passkey)
        }
    }

    @Test("the passkeys page without a session offers the phone too: a scanned QR code brings the user back, managing")
    func signInWithThePhone() async throws {
        try await withPhoneLogin(passkeys: true) { phone in
            let device = try await phone.device("bob-phone", of: OP.bob)
            var tab = Tab(phone.login)
            #expect(await tab.get(LoginServer.passkeysPath).status == 200)
            #expect(tab.has("password") && tab.text(of: "phone-link") == "Sign in with your phone")
            let link = try #require(tab.phoneLink, "\(tab.html)")
            let state = try Self.checkAccountLink(link)
            #expect(await tab.get(link).status == 200)
            #expect(tab.has("qr") && !tab.has("sign-in") && !tab.has("password"))
            #expect(await tab.qrCode().status == 200)
            let otp = try #require(tab.text(of: "otp"))
            #expect(await device.scan(otp, [.confirmation(.accept)]).isApproved)
            let back = try Self.backOnPasskeysPage(await tab.complete(), state: state)
            #expect(tab.jar["gh_sso"] != nil)
            var page = PasskeysPage(tab: tab)
            #expect(await page.tab.get(back).status == 200)
            #expect(page.tab.html.contains("Signed in as <strong>\(OP.bob)</strong>") && page.mayManage)
            try await page.register(try SoftwareAuthenticator(.ed25519), PhoneLogin.passkeyCeremony)
        }
        // A login without phone sign-in has no link to offer.
        try await withPasskeyLogin { op in
            var tab = Tab(op.login)
            #expect(await tab.get(LoginServer.passkeysPath).status == 200)
            #expect(tab.has("password") && !tab.has("phone-link"))
        }
    }

    @Test("the login's own client @account: its codes are redeemed at the token endpoint by nobody")
    func accountClientCodes() async throws {
        try await withPhoneLogin(passkeys: true) { phone in
            // A request for @account made by hand, its verifier known: signed in with the password.
            let request = AuthRequest(clientID: "@account", redirectURI: OP.issuer + "/passkeys")
            var tab = Tab(phone.login)
            #expect(await tab.open(request).status == 200, "\(tab.alert ?? tab.html)")
            let answer = await tab.post(
                LoginServer.authorizePath,
                tab.pageForm + [("username", OP.ann), ("password", OP.password)]
            )
            _ = try Self.backOnPasskeysPage(answer, state: request.state)
            let code = try #require(redirectQuery(answer)["code"])
            let form = [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI),
                ("code_verifier", request.verifier),
            ]
            for auth in [ClientAuth.none("@account"), .post("@account", "any-secret-0123456789")] {
                let refused = await phone.op.token(form, auth: auth)
                #expect(refused.status == 401 && refused.error == "invalid_client", "\(refused.text)")
                #expect(refused["access_token"] == nil && refused["id_token"] == nil)
            }
            // Another client's credentials do not redeem it either: the code is not theirs.
            let web = await phone.op.token(form, auth: defaultAuth(OP.web))
            #expect(web.status == 400 && web.error == "invalid_grant", "\(web.text)")
        }
    }

    @Test("a manifest cannot name a client @…: login clients and mobile-auth API clients are refused")
    func clientIDsStartingWithAt() throws {
        for id in ["@x", "@account"] {
            let login = ConfigValue.object([
                "clients": .list([
                    .object(["id": .string("web"), "redirectURIs": .list([.string(OP.webRedirect)])]),
                    .object(["id": .string(id), "redirectURIs": .list([.string(OP.webRedirect + "/at")])]),
                ])
            ])
            #expect(Self.refusal(LoginConfiguration.self, login) == "clients[1].id: a client id cannot start with @")
            let mobileAuth = ConfigValue.object([
                "apiClients": .list([.object(["id": .string(id), "secret": .string("portal-secret-0123456789")])]),
                "types": .list([.object(["name": .string("login"), "method": .string("confirmation")])]),
            ])
            #expect(
                Self.refusal(MobileAuthConfiguration.self, mobileAuth)
                    == "apiClients[0].id: an API client id cannot start with @"
            )
        }
        // The same without the @: accepted.
        let login = ConfigValue.object([
            "clients": .list([.object(["id": .string("x"), "redirectURIs": .list([.string(OP.webRedirect)])])])
        ])
        #expect(Self.refusal(LoginConfiguration.self, login) == nil)
        let mobileAuth = ConfigValue.object([
            "apiClients": .list([.object(["id": .string("x"), "secret": .string("portal-secret-0123456789")])]),
            "types": .list([.object(["name": .string("login"), "method": .string("confirmation")])]),
        ])
        #expect(Self.refusal(MobileAuthConfiguration.self, mobileAuth) == nil)
    }

    /// Why `value` is not a `type`; nil when it decodes.
    static func refusal<T: Decodable>(_ type: T.Type, _ value: ConfigValue) -> String? {
        do {
            _ = try ConfigurationDecoder().decode(type, from: value)
            return nil
        } catch {
            return error.description
        }
    }

    /// Checks the passkeys page's phone link: the login page for @account, back to the passkeys
    /// page, asking for the phone's acr and a fresh sign-in; its state.
    static func checkAccountLink(_ link: String) throws -> String {
        #expect(link.hasPrefix(LoginServer.authorizePath + "?"))
        let query = try #require(FormFields(queryOf: link))
        #expect(query["client_id"] == "@account" && query["redirect_uri"] == OP.issuer + "/passkeys")
        #expect(query["acr_values"] == ACR.phone && query["prompt"] == "login")
        #expect(query["response_type"] == "code" && query["code_challenge_method"] == "S256")
        return try #require(query["state"])
    }

    /// Checks that `response` redirects to the passkeys page with a code and `state`; the path
    /// the browser opens.
    static func backOnPasskeysPage(_ response: WireResponse, state: String) throws -> String {
        let location = response.headers["Location"] ?? ""
        try #require(
            response.status == 303 && location.hasPrefix(OP.issuer + "/passkeys?"),
            "\(response.status) \(location) \(String(decoding: response.body, as: UTF8.self).prefix(600))"
        )
        let query = redirectQuery(response)
        #expect(query["code"] != nil && query["state"] == state && query["iss"] == OP.issuer)
        return String(location.dropFirst(OP.publicURL.count))
    }
}

extension Tab {
    /// Where the page's `#phone-link` goes, as the browser reads its `href`.
    fileprivate var phoneLink: String? {
        html.firstMatch(of: #/id="phone-link" href="([^"]*)"/#).map {
            String($0.output.1).replacingOccurrences(of: "&amp;", with: "&")
        }
    }
}
