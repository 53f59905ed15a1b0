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
        "a passkey added on the passkeys page signs in on the login page: acr passkey, amr by backup state",
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
            // The options name the registered credential, so a browser does not make a second one.
            let excluded = try await page.options().options["excludeCredentials"] as? [[String: Any]]
            #expect(excluded?.compactMap { $0["id"] as? String } == [encode(authenticator.credentialID)])

            // Another browser, not signed in: the login page's passkey button.
            for _ in 0..<2 {
                var signIn = try await PasskeySignIn.open(op.login)
                let response = try await signIn.signIn(authenticator, userHandle: page.userHandle, kind.apply)
                let token = try await idToken(op, response, signIn.request)
                #expect(token.claims.sub == OP.ann)
                #expect(token.claims.acr == ACR.passkey)
                #expect(token.claims.amr == [kind.backupEligible ? "swk" : "hwk", "user", "mfa"])
                #expect(signIn.tab.jar["gh_sso"] != nil)
            }
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
        "a credential presented with another user's handle, or none, is refused; its owner's handle signs its owner in"
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
            let mismatched: [(SoftwareAuthenticator, String?)] = [
                (bobKey, ann.userHandle), (annKey, bob.userHandle), (annKey, encode(randomChallenge())), (annKey, nil),
            ]
            for (key, handle) in mismatched {
                var signIn = try await PasskeySignIn.open(op.login)
                let refused = try await signIn.signIn(key, userHandle: handle)
                #expect(refused.status == 401 && signIn.tab.alert?.contains("not registered") == true)
            }
            var signIn = try await PasskeySignIn.open(op.login)
            let token = try await idToken(
                op,
                try await signIn.signIn(bobKey, userHandle: bob.userHandle),
                signIn.request
            )
            #expect(token.claims.sub == OP.bob && token.claims.amr == ["hwk", "user", "mfa"])
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
            var bob = try await PasskeysPage.signIn(op.login, as: OP.bob)
            #expect(await bob.remove(key.credentialID).status == 404)
            var before = try await PasskeySignIn.open(op.login)
            #expect(try await before.signIn(key, userHandle: ann.userHandle).status == 303)

            let removed = await ann.remove(key.credentialID)
            #expect(removed.status == 200 && ann.tab.html.contains("The passkey was removed."))
            #expect(ann.tab.html.contains("No passkeys yet."))
            #expect(await ann.remove(key.credentialID).status == 404)
            var after = try await PasskeySignIn.open(op.login)
            let refused = try await after.signIn(key, userHandle: ann.userHandle)
            #expect(refused.status == 401 && after.tab.jar["gh_sso"] == nil)
        }
    }

    @Test("options and sign-in need the page's cookie; registration needs the passkeys page's cookie and a session")
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

            // The page's cookie but no session: 401.
            var stranger = Tab(op.login)
            #expect(await stranger.get(LoginServer.passkeysPath).status == 200)
            let signedOut = await stranger.fetch(
                LoginServer.passkeyRegistrationOptionsPath,
                [("csrf", stranger.hidden["csrf"] ?? "")]
            )
            #expect(signedOut.status == 401 && jsonObject(signedOut)["error"] as? String == "login_required")
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
}
