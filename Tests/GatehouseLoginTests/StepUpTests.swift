import Foundation
import GatehouseKernel
import GatehouseLogin
import GatehouseOpenID
import GatehouseProtocol
import GatehouseTesting
import Testing

@Suite("Hosted login: acr_values and step-up", .serialized)
struct StepUpTests {
    @Test("a password session does not satisfy acr phone: the page offers only the phone, the password is refused")
    func stepUpToPhone() async throws {
        try await withPhoneLogin { phone in
            let device = try await phone.device("ann-phone", of: OP.ann)
            var tab = try await phone.passwordSession()
            let passwordSession = try #require(tab.jar["gh_sso"])
            // Without acr_values the session signs in at once.
            #expect(await tab.open(.web()).status == 303)

            let request = AuthRequest.web().with("acr_values", ACR.phone)
            let page = await tab.open(request)
            #expect(page.status == 200 && tab.html.contains("<h1>Sign in</h1>"))
            #expect(tab.has("push") && tab.has("qr"))
            #expect(!tab.has("sign-in") && !tab.has("password") && !tab.has("passkey"))
            // The password form posted anyway (an old page, a script) is refused and changes nothing.
            var stale = tab
            let password = await stale.post(
                LoginServer.authorizePath,
                tab.pageForm + [("username", OP.ann), ("password", OP.password)]
            )
            #expect(password.status == 400 && password.headers["Location"] == nil)
            #expect(stale.jar["gh_sso"] == passwordSession)

            _ = await tab.push(OP.ann)
            let number = try #require(tab.number)
            #expect(try await device.answer([.confirmation(.accept(number: number))]).isApproved)
            let token = try await idToken(phone.op, await tab.complete(), request)
            #expect(token.claims.acr == ACR.phone && token.claims.amr == ["swk"] && token.claims.sub == OP.ann)
            #expect(tab.jar["gh_sso"] != passwordSession)

            // The phone session now satisfies acr phone without a page, and a plain request too.
            let again = AuthRequest.web().with("acr_values", ACR.phone)
            let reused = try await idToken(phone.op, await tab.open(again), again)
            #expect(reused.claims.acr == ACR.phone && reused.claims.authTime == token.claims.authTime)
            // Asking for the password's acr signs in again with the password only.
            #expect(await tab.open(.web().with("acr_values", ACR.password)).status == 200)
            #expect(tab.has("sign-in") && !tab.has("push") && !tab.has("qr"))
            #expect(await tab.qrCode().status == 400)
        }
    }

    @Test("acr values no method of the client produces: a redirect with unmet_authentication_requirements")
    func unmet() async throws {
        try await withPhoneLogin { phone in
            var tab = Tab(phone.login)
            let passwordOnly = AuthRequest(
                clientID: PhoneLogin.passwordOnly,
                redirectURI: PhoneLogin.passwordOnlyRedirect
            )
            for request in [
                passwordOnly.with("acr_values", ACR.phone), passwordOnly.with("acr_values", ACR.passkey),
                AuthRequest.web().with("acr_values", "urn:example:loa:4"),
                AuthRequest.web().with("acr_values", ACR.passkey),
            ] {
                let answer = await tab.open(request)
                #expect(answer.status == 303, "\(request.query)")
                let query = redirectQuery(answer)
                #expect(answer.headers["Location"]?.hasPrefix(request.redirectURI + "?") == true)
                #expect(query["error"] == "unmet_authentication_requirements", "\(request.query)")
                #expect(query["state"] == request.state && query["iss"] == phone.login.issuer)
            }
            // One value it can meet among others is enough.
            let mixed = await tab.open(.web().with("acr_values", "urn:example:loa:4 \(ACR.phone)"))
            #expect(mixed.status == 200 && tab.has("push") && !tab.has("sign-in"))
            #expect(await tab.open(passwordOnly.with("acr_values", ACR.password)).status == 200)
            #expect(tab.has("sign-in") && !tab.has("push") && !tab.has("qr"))
        }
    }

    @Test("prompt=none with a session of another acr: login_required, not the session")
    func promptNone() async throws {
        try await withPhoneLogin { phone in
            var tab = try await phone.passwordSession()
            let insufficient = await tab.open(.web().with("prompt", "none").with("acr_values", ACR.phone))
            #expect(insufficient.status == 303 && redirectQuery(insufficient)["error"] == "login_required")
            #expect(redirectQuery(insufficient)["code"] == nil)
            let enough = AuthRequest.web().with("prompt", "none").with("acr_values", "\(ACR.phone) \(ACR.password)")
            let token = try await idToken(phone.op, await tab.open(enough), enough)
            #expect(token.claims.acr == ACR.password)
        }
    }

    @Test("discovery lists the acr values the login produces")
    func discovery() async throws {
        try await withPhoneLogin { phone in
            let response = await phone.login.handle(WireRequest(method: "GET", path: LoginServer.discoveryPath))
            let document = try JSONDecoder().decode(OpenIDProviderMetadata.self, from: response.body)
            #expect(document.acrValuesSupported == [ACR.app, ACR.password, ACR.phone])
            #expect(jsonObject(response)["acr_values_supported"] as? [String] == [ACR.app, ACR.password, ACR.phone])
        }
    }

    @Test(
        "consent for acr passkey: refused once a password sign-in on another page of the browser replaced the session"
    )
    func consentAfterAnotherSignIn() async throws {
        try await withPasskeyLogin { op in
            var ann = try await PasskeysPage.signIn(op.login, as: OP.ann)
            let key = try SoftwareAuthenticator(.p256)
            try await ann.register(key)
            let request = AuthRequest.web().with("acr_values", ACR.passkey).with("prompt", "consent")

            // Undisturbed, the consent gives the passkey's code.
            var calm = try await PasskeySignIn.open(op.login, request)
            #expect(!calm.tab.has("sign-in") && !calm.tab.has("password"))
            let asked = try await calm.signIn(key, userHandle: ann.userHandle)
            #expect(asked.status == 200 && calm.tab.html.contains("Allow Web Shop?"))
            let allowed = await calm.tab.post(LoginServer.consentPath, calm.tab.pageForm + [("decision", "allow")])
            let token = try await idToken(op, allowed, request)
            #expect(token.claims.acr == ACR.passkey && token.claims.amr == ["swk", "user", "mfa"])

            // The consent page waits while another page of the same browser signs in with the password.
            var first = try await PasskeySignIn.open(op.login, request)
            _ = try await first.signIn(key, userHandle: ann.userHandle)
            #expect(first.tab.html.contains("Allow Web Shop?"))
            let consentForm = first.tab.pageForm
            var second = Tab(op.login)
            second.jar = first.tab.jar
            let other = AuthRequest.web().with("prompt", "login")
            #expect(await second.open(other).status == 200)
            let password = await second.post(
                LoginServer.authorizePath,
                second.pageForm + [("username", OP.ann), ("password", OP.password)]
            )
            #expect(try await idToken(op, password, other).claims.acr == ACR.password)
            #expect(second.jar["gh_sso"] != nil && second.jar["gh_sso"] != first.tab.jar["gh_sso"])
            first.tab.jar = second.jar
            let refused = await first.tab.post(LoginServer.consentPath, consentForm + [("decision", "allow")])
            #expect(refused.status == 400 && refused.headers["Location"] == nil)
            #expect(first.tab.alert == "Web Shop asks for another way of signing in. Start again in the app.")
        }
    }
}
