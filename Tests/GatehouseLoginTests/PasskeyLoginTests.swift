import Crypto
import Foundation
import GatehouseKernel
import GatehouseLogin
import GatehouseOpenID
import GatehouseProtocol
import GatehouseTesting
import Testing

/// The authenticators the ceremonies run with: key, attestation and backup eligibility.
enum PasskeyKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case es256None = "ES256, attestation none, device-bound"
    case eddsaPackedSelf = "EdDSA, packed self attestation, device-bound"
    case es256PackedSelfSynced = "ES256, packed self attestation, synced"
    case rs256NoneSynced = "RS256, attestation none, synced"

    var description: String { rawValue }

    var key: TestKey.Kind {
        switch self {
        case .es256None, .es256PackedSelfSynced: .p256
        case .eddsaPackedSelf: .ed25519
        case .rs256NoneSynced: .rsa
        }
    }

    var backupEligible: Bool { self == .es256PackedSelfSynced || self == .rs256NoneSynced }

    /// Whether the sign-in's amr says `hwk`: a device-bound key whose authenticator attested it
    /// (packed); any other is `swk`.
    var hardwareKey: Bool { self == .eddsaPackedSelf }

    /// The ceremony as this authenticator runs it.
    func apply(_ ceremony: inout Ceremony) {
        ceremony.backupEligible = backupEligible
        ceremony.backedUp = backupEligible
        if self == .eddsaPackedSelf || self == .es256PackedSelfSynced { ceremony.format = .packedSelf }
    }
}

@Suite("Hosted login: passkeys", .serialized)
struct PasskeyLoginTests {
    @Test(
        "a passkey added on the passkeys page signs in on the login page: acr passkey, amr by attestation and backup state",
        arguments: PasskeyKind.allCases
    )
    func registerAndSignIn(kind: PasskeyKind) async throws {
        try await withPasskeyLogin { op in
            var page = try await PasskeysPage.signIn(op.login, as: OP.ann)
            #expect(page.tab.html.contains("No passkeys yet."))
            let (challenge, options) = try await page.options()
            #expect((options["rp"] as? [String: Any])?["id"] as? String == Ceremony.rpID)
            #expect((options["user"] as? [String: Any])?["name"] as? String == OP.ann)
            let authenticator = try SoftwareAuthenticator(kind.key)
            var ceremony = Ceremony(challenge: challenge)
            kind.apply(&ceremony)
            let added = await page.add(try authenticator.register(ceremony).json, name: "My key")
            #expect(added.status == 200 && page.tab.html.contains("was added"), "\(page.tab.alert ?? "")")
            #expect(page.tab.html.contains("<strong>My key</strong>"))
            #expect(page.tab.html.contains("· synced") == kind.backupEligible)

            // Another browser, not signed in: the login page's passkey button.
            var passkeyTab: Tab?
            for _ in 0..<2 {
                var signIn = try await PasskeySignIn.open(op.login)
                let response = try await signIn.signIn(authenticator, userHandle: page.userHandle, kind.apply)
                let token = try await idToken(op, response, signIn.request)
                #expect(token.claims.sub == OP.ann)
                #expect(token.claims.acr == ACR.passkey)
                #expect(token.claims.amr == [kind.hardwareKey ? "hwk" : "swk", "user", "mfa"])
                #expect(signIn.tab.jar["gh_sso"] != nil)
                passkeyTab = signIn.tab
            }
            // Signed in with the passkey, the passkeys page lets the user add another; the options
            // name the registered credential, so a browser does not make a second one.
            var signedIn = PasskeysPage(tab: try #require(passkeyTab))
            #expect(await signedIn.tab.get(LoginServer.passkeysPath).status == 200)
            #expect(signedIn.mayManage && signedIn.hasRemoveButtons)
            let excluded = try await signedIn.options().options["excludeCredentials"] as? [[String: Any]]
            #expect(excluded?.compactMap { $0["id"] as? String } == [encode(authenticator.credentialID)])
            #expect(signedIn.userHandle == page.userHandle)
            // The page shows when it was last used.
            let again = try await PasskeysPage.signIn(op.login, as: OP.ann)
            #expect(again.tab.html.contains("last used"))
        }
    }

    @Test("an assertion is checked against the challenge once: a refused try spends it, a replay finds none")
    func challengeTakenOnce() async throws {
        try await withPasskeyLogin { op in
            var page = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.p256)
            try await page.register(key)

            var signIn = try await PasskeySignIn.open(op.login)
            let challenge = try await signIn.challenge()
            var genuine = try key.assert(Ceremony(challenge: challenge))
            genuine.userHandle = page.userHandle.flatMap { Data(base64URLEncoded: $0) }.map(Array.init)
            // Another origin's assertion for the same challenge: refused, and the challenge is spent.
            var phished = Ceremony(challenge: challenge)
            phished.origin = "http://localhost:8081"
            var wrongOrigin = try key.assert(phished)
            wrongOrigin.userHandle = genuine.userHandle
            let refused = await signIn.send(wrongOrigin.json)
            #expect(refused.status == 401 && signIn.tab.alert?.contains("could not sign you in") == true)
            #expect(await signIn.send(genuine.json).status == 401)

            // A fresh challenge signs in; the same assertion again (another page, another challenge) does not.
            let response = try await signIn.signIn(key, userHandle: page.userHandle)
            let token = try await idToken(op, response, signIn.request)
            #expect(token.claims.acr == ACR.passkey)
            var replay = try await PasskeySignIn.open(op.login)
            _ = try await replay.challenge()
            var used = try key.assert(Ceremony(challenge: challenge))
            used.userHandle = genuine.userHandle
            #expect(await replay.send(used.json).status == 401)
            #expect(await replay.send(genuine.json).status == 401)
            #expect(replay.tab.jar["gh_sso"] == nil)
        }
    }

    @Test("an assertion whose counter did not increase is refused, and changes nothing")
    func counterMustIncrease() async throws {
        try await withPasskeyLogin { op in
            var page = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.p256, counter: 40)
            try await page.register(key)
            var signIn = try await PasskeySignIn.open(op.login)
            #expect(try await signIn.signIn(key, userHandle: page.userHandle).status == 303)
            // A cloned key: the counter the server saw last, then a lower one.
            for count in [key.counter, key.counter - 1] {
                var clone = try await PasskeySignIn.open(op.login)
                let refused = try await clone.signIn(key, userHandle: page.userHandle) { $0.signCount = count }
                #expect(refused.status == 401, "counter \(count)")
                #expect(clone.tab.jar["gh_sso"] == nil)
            }
            var next = try await PasskeySignIn.open(op.login)
            #expect(try await next.signIn(key, userHandle: page.userHandle).status == 303)
        }
    }

    @Test(
        "a credential presented with another user's handle, or none, or not registered, is refused alike; its owner's handle signs its owner in"
    )
    func userHandleMustMatch() async throws {
        try await withPasskeyLogin { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let annKey = try SoftwareAuthenticator(.p256)
            try await ann.register(annKey)
            var bob = try await PasskeysPage.signIn(op.login, as: OP.bob)
            let bobKey = try SoftwareAuthenticator(.ed25519)
            try await bob.register(bobKey)
            #expect(ann.userHandle != nil && bob.userHandle != nil && ann.userHandle != bob.userHandle)

            // The login page names no user before the ceremony: the passkey must name its owner
            // (WebAuthn §7.2 step 6), so an assertion without a user handle is refused too.
            // Every refusal says the same, so the page tells nobody which credentials are registered.
            let unregistered = try SoftwareAuthenticator(.p256)
            let mismatched: [(SoftwareAuthenticator, String?)] = [
                (bobKey, ann.userHandle), (annKey, bob.userHandle), (annKey, encode(randomChallenge())), (annKey, nil),
                (unregistered, ann.userHandle), (unregistered, nil),
            ]
            for (key, handle) in mismatched {
                var signIn = try await PasskeySignIn.open(op.login)
                let refused = try await signIn.signIn(key, userHandle: handle)
                #expect(refused.status == 401 && signIn.tab.alert == "The passkey could not sign you in. Try again.")
                #expect(signIn.tab.jar["gh_sso"] == nil)
            }
            var signIn = try await PasskeySignIn.open(op.login)
            let token = try await idToken(
                op,
                try await signIn.signIn(bobKey, userHandle: bob.userHandle),
                signIn.request
            )
            // Attestation none: nothing shows the key is in hardware.
            #expect(token.claims.sub == OP.bob && token.claims.amr == ["swk", "user", "mfa"])
        }
    }

    @Test("a ceremony for another origin or RP id is refused, at registration and at sign-in")
    func wrongOrigin() async throws {
        try await withPasskeyLogin { op in
            var page = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.p256)
            var phished = Ceremony(challenge: try await page.options().challenge)
            phished.origin = "https://login.example"
            #expect(await page.add(try key.register(phished).json).status == 400)
            #expect(page.tab.html.contains("No passkeys yet."))
            try await page.register(key)
            for change: (inout Ceremony) -> Void in [
                { $0.origin = "http://127.0.0.1:8080" }, { $0.origin = "http://localhost" },
                { $0.rpID = "example.com" },
            ] {
                var signIn = try await PasskeySignIn.open(op.login)
                #expect(try await signIn.signIn(key, userHandle: page.userHandle, change).status == 401)
            }
        }
    }

    @Test("a credential id registered once cannot be registered again, by its user or anyone else (409)")
    func registeredTwice() async throws {
        try await withPasskeyLogin { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.p256)
            try await ann.register(key)
            // Adding another needs the passkey first (the password was her first factor).
            try await ann.confirm(key)
            let again = await ann.add(try key.register(Ceremony(challenge: try await ann.options().challenge)).json)
            #expect(again.status == 409 && ann.tab.alert == "This passkey is registered already.")
            var bob = try await PasskeysPage.signIn(op.login, as: OP.bob)
            let taken = await bob.add(try key.register(Ceremony(challenge: try await bob.options().challenge)).json)
            #expect(taken.status == 409)
            #expect(bob.tab.html.contains("No passkeys yet."))
            // It still signs in its first owner only.
            var signIn = try await PasskeySignIn.open(op.login)
            let token = try await idToken(op, try await signIn.signIn(key, userHandle: ann.userHandle), signIn.request)
            #expect(token.claims.sub == OP.ann)
        }
    }

    @Test("a removed passkey no longer signs in; another user cannot remove it")
    func removed() async throws {
        try await withPasskeyLogin { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.p256)
            try await ann.register(key)
            // Bob may manage his (none yet), but ann's is not his.
            var bob = try await PasskeysPage.signIn(op.login, as: OP.bob)
            #expect(bob.mayManage)
            #expect(await bob.remove(key.credentialID).status == 404)
            var before = try await PasskeySignIn.open(op.login)
            #expect(try await before.signIn(key, userHandle: ann.userHandle).status == 303)

            try await ann.confirm(key)
            let removed = await ann.remove(key.credentialID)
            #expect(removed.status == 200 && ann.tab.html.contains("The passkey was removed."))
            #expect(ann.tab.html.contains("No passkeys yet."))
            #expect(await ann.remove(key.credentialID).status == 404)
            var after = try await PasskeySignIn.open(op.login)
            let refused = try await after.signIn(key, userHandle: ann.userHandle)
            #expect(refused.status == 401 && after.tab.jar["gh_sso"] == nil)
        }
    }

    @Test(
        "options and sign-in need the page's cookie; registration needs the passkeys page's cookie and a session that may"
    )
    func csrfAndSession() async throws {
        try await withPasskeyLogin { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.p256)
            try await ann.register(key)

            // The login page's forms, posted by another site's page (no cookie), or with a wrong token.
            var signIn = try await PasskeySignIn.open(op.login)
            let noCookie = await signIn.tab.fetch(
                LoginServer.passkeySignInOptionsPath,
                signIn.tab.pageForm,
                withCookies: false
            )
            #expect(noCookie.status == 400 && jsonObject(noCookie)["publicKey"] == nil)
            let wrongToken = [("authorization", signIn.tab.hidden["authorization"] ?? ""), ("csrf", "not-the-token")]
            #expect(await signIn.tab.fetch(LoginServer.passkeySignInOptionsPath, wrongToken).status == 400)
            let challenge = try await signIn.challenge()
            var assertion = try key.assert(Ceremony(challenge: challenge))
            assertion.userHandle = ann.userHandle.flatMap { Data(base64URLEncoded: $0) }.map(Array.init)
            let credential = ("credential", String(decoding: assertion.json, as: UTF8.self))
            let forged = await signIn.tab.fetch(
                LoginServer.passkeySignInPath,
                signIn.tab.pageForm + [credential],
                withCookies: false
            )
            #expect(forged.status == 400 && forged.headers["Set-Cookie"] == nil)
            #expect(await signIn.tab.fetch(LoginServer.passkeySignInPath, wrongToken + [credential]).status == 400)

            // The passkeys page's forms without its cookie.
            try await ann.confirm(key)
            let csrf = ann.tab.hidden["csrf"] ?? ""
            let options = await ann.tab.fetch(
                LoginServer.passkeyRegistrationOptionsPath,
                [("csrf", csrf)],
                withCookies: false
            )
            #expect(options.status == 400)
            let other = try SoftwareAuthenticator(.p256)
            let challengeNow = try await ann.options().challenge
            let registration = try other.register(Ceremony(challenge: challengeNow)).json
            let noCookieAdd = await ann.tab.fetch(
                LoginServer.passkeysPath,
                [("csrf", csrf), ("name", "Forged"), ("credential", String(decoding: registration, as: UTF8.self))],
                withCookies: false
            )
            #expect(noCookieAdd.status == 400)
            #expect(await ann.tab.get(LoginServer.passkeysPath).status == 200 && !ann.tab.html.contains("Forged"))

            // The page's cookie but no session: the options are a sign-in's (no user to register),
            // and a registration posted anyway is the page's password sign-in without a password.
            var stranger = PasskeysPage(tab: Tab(op.login))
            #expect(await stranger.tab.get(LoginServer.passkeysPath).status == 200)
            _ = try await stranger.signInChallenge()
            let signedOut = await stranger.add(try other.register(Ceremony(challenge: challengeNow)).json)
            #expect(signedOut.status == 400 && stranger.tab.jar["gh_sso"] == nil)
            #expect(await ann.tab.get(LoginServer.passkeysPath).status == 200)
            #expect(ann.tab.html.components(separatedBy: #"name="remove""#).count == 2)
        }
    }

    @Test("passkey attempts are limited per address (429), the options and the assertions alike")
    func rateLimited() async throws {
        try await withPasskeyLogin(attemptsPerMinute: 3) { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.p256)
            try await ann.register(key)
            var signIn = try await PasskeySignIn.open(op.login, address: "203.0.113.7")
            for _ in 0..<3 { _ = try await signIn.challenge() }
            let limited = await signIn.tab.fetch(LoginServer.passkeySignInOptionsPath, signIn.tab.pageForm)
            #expect(limited.status == 429 && limited.headers["Retry-After"] != nil)
            #expect(jsonObject(limited)["error"] as? String == "slow_down")
            var assertion = try key.assert(Ceremony(challenge: randomChallenge()))
            assertion.userHandle = ann.userHandle.flatMap { Data(base64URLEncoded: $0) }.map(Array.init)
            #expect(await signIn.send(assertion.json).status == 429)
            // Another address is not limited; the first one is again a minute later.
            var elsewhere = try await PasskeySignIn.open(op.login, address: "198.51.100.20")
            #expect(try await elsewhere.signIn(key, userHandle: ann.userHandle).status == 303)
            op.clock.advance(by: 61)
            var later = try await PasskeySignIn.open(op.login, address: "203.0.113.7")
            #expect(try await later.signIn(key, userHandle: ann.userHandle).status == 303)
        }
    }

    @Test("on an IP address passkeys are not offered: no button, every passkey endpoint refuses, no acr")
    func notOnAnIPAddress() async throws {
        try await withPasskeyLogin(publicURL: "http://127.0.0.1:8080") { op in
            var tab = Tab(op.login)
            #expect(await tab.open(.web()).status == 200)
            #expect(tab.has("sign-in") && !tab.has("passkey") && !tab.html.contains("<script"))
            #expect(await tab.fetch(LoginServer.passkeySignInOptionsPath, tab.pageForm).status == 400)
            #expect(await tab.fetch(LoginServer.passkeySignInPath, tab.pageForm + [("credential", "{}")]).status == 400)
            var fresh = Tab(op.login)
            #expect(await fresh.get(LoginServer.passkeysPath).status == 400)
            var stepUp = Tab(op.login)
            let unmet = await stepUp.open(.web().with("acr_values", ACR.passkey))
            #expect(redirectQuery(unmet)["error"] == "unmet_authentication_requirements")
            let discovery = await op.send(WireRequest(method: "GET", path: LoginServer.discoveryPath))
            let document = try JSONDecoder().decode(OpenIDProviderMetadata.self, from: discovery.body)
            #expect(document.acrValuesSupported == [ACR.app, ACR.password])
        }
        try await withPasskeyLogin { op in
            let discovery = await op.send(WireRequest(method: "GET", path: LoginServer.discoveryPath))
            let document = try JSONDecoder().decode(OpenIDProviderMetadata.self, from: discovery.body)
            #expect(document.acrValuesSupported == [ACR.app, ACR.passkey, ACR.password])
        }
    }

    @Test(
        "a password adds the first passkey only: a second, or removing one, is 403 until a passkey confirms on the page"
    )
    func passwordAddsTheFirstOnly() async throws {
        try await withPasskeyLogin { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            #expect(ann.mayManage && !ann.tab.has("passkey-form"))
            // Another tab of hers asks for registration options while she has no passkey yet.
            var early = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let earlyChallenge = try await early.options().challenge
            let first = try SoftwareAuthenticator(.p256)
            try await ann.register(first, name: "First")
            // Once added, the page no longer offers what the password may not do.
            #expect(!ann.mayManage && !ann.hasRemoveButtons && ann.tab.has("passkey-form"))
            #expect(ann.tab.html.contains(#"data-options="\#(LoginServer.passkeyRegistrationOptionsPath)""#))

            let second = try SoftwareAuthenticator(.ed25519)
            let late = await early.add(try second.register(Ceremony(challenge: earlyChallenge)).json, name: "Second")
            #expect(late.status == 403 && early.tab.alert?.hasPrefix("Confirm with one of your passkeys") == true)
            var page = try await PasskeysPage.signIn(op.login, as: OP.ann)
            #expect(page.tab.html.contains("<strong>First</strong>") && !page.mayManage && !page.hasRemoveButtons)
            // The options are a sign-in's now; a registration over them, and a removal, are refused.
            let signInChallenge = try await page.signInChallenge()
            let planted = await page.add(try second.register(Ceremony(challenge: signInChallenge)).json, name: "Second")
            #expect(planted.status == 403 && page.tab.alert?.hasPrefix("Confirm with one of your passkeys") == true)
            #expect(!page.mayManage && page.tab.has("passkey-form"))
            let removal = await page.remove(first.credentialID)
            #expect(removal.status == 403 && page.tab.html.contains("<strong>First</strong>"))
            #expect(!page.tab.html.contains("<strong>Second</strong>"))
            var stillFirst = try await PasskeySignIn.open(op.login)
            #expect(try await stillFirst.signIn(first, userHandle: ann.userHandle).status == 303)

            // Confirming with the passkey on the page: a passkey session, and the page manages.
            let passwordSession = page.tab.jar["gh_sso"]
            page.userHandle = ann.userHandle
            try await page.confirm(first)
            #expect(page.hasRemoveButtons && page.tab.jar["gh_sso"] != passwordSession)
            try await page.register(second, name: "Second")
            #expect(await page.remove(first.credentialID).status == 200)
            #expect(
                page.tab.html.contains("<strong>Second</strong>") && !page.tab.html.contains("<strong>First</strong>")
            )
            var removed = try await PasskeySignIn.open(op.login)
            #expect(try await removed.signIn(first, userHandle: ann.userHandle).status == 401)
            var kept = try await PasskeySignIn.open(op.login)
            let token = try await idToken(op, try await kept.signIn(second, userHandle: ann.userHandle), kept.request)
            #expect(token.claims.sub == OP.ann && token.claims.acr == ACR.passkey)

            // The page's confirmation is a passkey sign-in like the login page's: acr passkey.
            let stepUp = AuthRequest.web().with("acr_values", ACR.passkey)
            let reused = try await idToken(op, await page.tab.open(stepUp), stepUp)
            #expect(reused.claims.sub == OP.ann && reused.claims.acr == ACR.passkey)
            #expect(reused.claims.amr == ["swk", "user", "mfa"])
        }
    }

    @Test("the passkeys page signs in with a passkey without a session; its challenge serves that page only")
    func accountPageSignIn() async throws {
        try await withPasskeyLogin { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.p256)
            try await ann.register(key)
            var one = PasskeysPage(tab: Tab(op.login), userHandle: ann.userHandle)
            #expect(await one.tab.get(LoginServer.passkeysPath).status == 200)
            #expect(one.tab.has("password") && one.tab.has("passkey-form") && one.tab.has("passkey"))
            #expect(one.tab.html.contains(#"data-options="\#(LoginServer.passkeyRegistrationOptionsPath)""#))
            let challenge = try await one.signInChallenge()
            var assertion = try key.assert(Ceremony(challenge: challenge))
            assertion.userHandle = ann.userHandle.flatMap { Data(base64URLEncoded: $0) }.map(Array.init)

            // Another page (its own token) finds no challenge of its own for it.
            var other = PasskeysPage(tab: Tab(op.login), userHandle: ann.userHandle)
            _ = await other.tab.get(LoginServer.passkeysPath)
            let elsewhere = await other.sendAssertion(assertion.json)
            #expect(elsewhere.status == 401 && other.tab.alert == "The passkey could not sign you in.")
            #expect(other.tab.jar["gh_sso"] == nil)
            // Another user's handle on the right page: refused the same way.
            var wrongUser = try key.assert(Ceremony(challenge: challenge))
            wrongUser.userHandle = Array(randomChallenge().prefix(16))
            var copy = one
            let refused = await copy.sendAssertion(wrongUser.json)
            #expect(refused.status == 401 && copy.tab.alert == "The passkey could not sign you in.")
            #expect(copy.tab.jar["gh_sso"] == nil)

            // The refused try spent the challenge: a fresh one signs in, with management.
            try await one.confirm(key)
            #expect(one.tab.jar["gh_sso"] != nil && one.hasRemoveButtons)
            #expect(one.tab.html.contains("Signed in as <strong>\(OP.ann)</strong>"))
            let replay = await one.sendAssertion(assertion.json)
            #expect(replay.status == 401)
        }
    }

    @Test("the passkeys page's CSRF token is the server's: a cookie and field pair of anyone else's is refused")
    func forgedAccountToken() async throws {
        try await withPasskeyLogin { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let genuine = try #require(ann.tab.hidden["csrf"])
            let parts = genuine.split(separator: ".").map(String.init)
            try #require(parts.count == 2)
            var other = Tab(op.login)
            _ = await other.get(LoginServer.passkeysPath)
            let otherParts = (other.hidden["csrf"] ?? "").split(separator: ".").map(String.init)
            try #require(otherParts.count == 2)
            let random = encode(Array(randomChallenge().prefix(18)))
            let forgeries = [
                "attacker-chosen", random, random + "." + encode(randomChallenge()), random + "." + parts[1],
                parts[0] + "." + otherParts[1], parts[0] + ".", "." + parts[1], genuine + "." + parts[1],
            ]
            let key = try SoftwareAuthenticator(.p256)
            for forged in forgeries {
                // Planted in the cookie (by a host of the same site) and sent in the form.
                var tab = ann.tab
                tab.jar["gh_csrf_account"] = forged
                let options = await tab.fetch(LoginServer.passkeyRegistrationOptionsPath, [("csrf", forged)])
                #expect(options.status == 400 && jsonObject(options)["publicKey"] == nil, "\(forged)")
                let registration = try key.register(Ceremony(challenge: randomChallenge())).json
                let add = await tab.post(
                    LoginServer.passkeysPath,
                    [
                        ("csrf", forged), ("name", "Planted"),
                        ("credential", String(decoding: registration, as: UTF8.self)),
                    ]
                )
                #expect(add.status == 400, "\(forged)")
                var stranger = Tab(op.login)
                stranger.jar["gh_csrf_account"] = forged
                let password = await stranger.post(
                    LoginServer.passkeysPath,
                    [("csrf", forged), ("username", OP.ann), ("password", OP.password)]
                )
                #expect(password.status == 400 && stranger.jar["gh_sso"] == nil, "\(forged)")
            }
            // The genuine pair still works, and nothing was planted.
            let challenge = try await ann.options().challenge
            #expect(!challenge.isEmpty)
            #expect(await ann.tab.get(LoginServer.passkeysPath).status == 200)
            #expect(ann.tab.html.contains("No passkeys yet.") && !ann.tab.html.contains("Planted"))
        }
    }

    @Test("an Ed25519 credential whose key has small order (the all-zero point, the identity) is not added")
    func weakEd25519Key() async throws {
        try await withPasskeyLogin { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.ed25519)
            guard case .ed25519(let privateKey) = key.key else {
                Issue.record("not an Ed25519 authenticator")
                return
            }
            let genuine = Array(privateKey.publicKey.rawRepresentation)
            let weakPoints: [[UInt8]] = [[UInt8](repeating: 0, count: 32), [0x01] + [UInt8](repeating: 0, count: 31)]
            for point in weakPoints {
                var registration = try key.register(Ceremony(challenge: try await ann.options().challenge))
                // Attestation none signs nothing: the point is swapped in the authenticator data.
                let range = try #require(registration.attestationObject.firstRange(of: genuine))
                registration.attestationObject.replaceSubrange(range, with: point)
                let refused = await ann.add(registration.json, name: "Weak")
                #expect(refused.status == 400, "\(point)")
                #expect(ann.tab.alert?.contains("public key is not usable: a small-order or non-canonical") == true)
                #expect(ann.tab.html.contains("No passkeys yet.") && !ann.tab.html.contains("Weak"))
            }
            // The genuine key registers and signs in.
            try await ann.register(key)
            var signIn = try await PasskeySignIn.open(op.login)
            #expect(try await signIn.signIn(key, userHandle: ann.userHandle).status == 303)
        }
    }
}
