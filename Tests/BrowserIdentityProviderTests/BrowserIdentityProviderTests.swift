import BrowserIdentityProvider
import Crypto
import Foundation
import GatehouseKernel
import GatehouseTesting
import Synchronization
import Testing

/// A login in memory: the "browser" asks it for a code at the authorization URL; redemption checks
/// client, redirect, single use and the PKCE verifier (S256), as a real login must.
private final class MemoryLogin: BrowserLoginService {
    struct Issued {
        var clientID, redirectURI, challenge, subject: String
        var used: Bool
    }
    let codes = Mutex<[String: Issued]>([:])

    func issue(for url: URL, subject: String = "ann@example.com") -> (code: String, state: String)? {
        guard let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems else { return nil }
        let query = Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
        guard query["code_challenge_method"] == "S256", let challenge = query["code_challenge"],
            let state = query["state"],
            let client = query["client_id"], let redirect = query["redirect_uri"]
        else { return nil }
        let code = UUID().uuidString
        codes.withLock {
            $0[code] = Issued(
                clientID: client,
                redirectURI: redirect,
                challenge: challenge,
                subject: subject,
                used: false
            )
        }
        return (code, state)
    }

    func redeem(code: String, clientID: String, redirectURI: String, verifier: String) async throws -> String {
        try codes.withLock { codes in
            guard var issued = codes[code] else { throw CancellationError() }
            guard !issued.used else { throw BrowserLoginReplay(subject: issued.subject) }
            issued.used = true
            codes[code] = issued
            let computed = Data(SHA256.hash(data: Data(verifier.utf8))).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            guard issued.clientID == clientID, issued.redirectURI == redirectURI, computed == issued.challenge else {
                throw CancellationError()
            }
            return issued.subject
        }
    }
}

/// The app's side: opens the URL in the "browser" and returns the redirect `answer` makes of it.
private actor Browser: ChallengeResponder {
    let answer: @Sendable (URL, URL) -> BrowserRegistrationResponse
    private(set) var opened: [URL] = []
    init(_ answer: @escaping @Sendable (URL, URL) -> BrowserRegistrationResponse) { self.answer = answer }

    func browserRegistration(_ challenge: BrowserRegistrationChallenge) -> BrowserRegistrationResponse {
        opened.append(challenge.url)
        return answer(challenge.url, challenge.redirectURI)
    }
    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .cancel }
    func pin(_ challenge: PinChallenge) -> PinResponse { .cancel }
    func biometric(_ challenge: BiometricChallenge) -> BiometricResponse { .cancel }
    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) -> CustomAuthenticatorResponse { .cancel }
    func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse { .cancel }
}

private func harness(_ login: MemoryLogin) throws -> IdentityProviderHarness {
    var environment = PluginEnvironment.testing()
    environment.services[BrowserLoginServiceKey.self, named: "login"] = login
    return try IdentityProviderHarness(
        PluginHarness.identityProvider(
            BrowserIdentityProviderPlugin.self,
            config: ["authorizationURL": "https://login.example/login/authorize", "login": "login"],
            environment: environment
        )
    )
}

private func redirect(_ base: URL, _ query: String) -> BrowserRegistrationResponse {
    .redirect(URL(string: base.absoluteString + "?" + query)!)
}

@Suite("Browser identity provider")
struct BrowserIdentityProviderTests {
    @Test("the app opens an S256 authorization URL; the code and the state come back; the user is named")
    func registers() async throws {
        let login = MemoryLogin()
        let idp = try harness(login)
        let browser = Browser { url, back in
            guard let (code, state) = login.issue(for: url) else { return .cancel }
            return redirect(back, "code=\(code)&state=\(state)")
        }
        _ = try await idp.register(responder: browser)
        #expect(await idp.identity?.subject == "ann@example.com")
        let opened = try #require(await browser.opened.first)
        let query = try #require(URLComponents(url: opened, resolvingAgainstBaseURL: false)?.queryItems)
        let names = Set(query.map(\.name))
        #expect(
            names == [
                "response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge",
                "code_challenge_method",
            ]
        )
        #expect(opened.absoluteString.hasPrefix("https://login.example/login/authorize?"))
        #expect(query.first { $0.name == "redirect_uri" }?.value == "http://127.0.0.1:53180/callback")
        // The verifier never leaves the device before the code comes back, and never in the URL.
        #expect(query.first { $0.name == "code_challenge" }?.value?.count == 43)
    }

    @Test("the app listens on a port the system gave it (RFC 8252 §7.3): the code is redeemed for that redirect URI")
    func ephemeralLoopbackPort() async throws {
        let login = MemoryLogin()
        let idp = try harness(login)
        final class Ephemeral: ChallengeResponder {
            let login: MemoryLogin
            let redirected = Mutex<String?>(nil)
            init(_ login: MemoryLogin) { self.login = login }
            func browserRegistration(_ challenge: BrowserRegistrationChallenge) -> BrowserRegistrationResponse {
                let listener = URL(string: "http://127.0.0.1:41999/callback")!
                guard challenge.allowsAnyLoopbackPort, let url = challenge.url(redirectingTo: listener),
                    challenge.url(redirectingTo: URL(string: "http://127.0.0.1:41999/other")!) == nil,
                    challenge.url(redirectingTo: URL(string: "http://localhost:41999/callback")!) == nil,
                    let (code, state) = login.issue(for: url)
                else { return .cancel }
                redirected.withLock { $0 = login.codes.withLock { $0[code]?.redirectURI } }
                return .redirect(URL(string: "http://127.0.0.1:41999/callback?code=\(code)&state=\(state)")!)
            }
            func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .cancel }
            func pin(_ challenge: PinChallenge) -> PinResponse { .cancel }
            func biometric(_ challenge: BiometricChallenge) -> BiometricResponse { .cancel }
            func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) -> CustomAuthenticatorResponse {
                .cancel
            }
            func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse { .cancel }
        }
        let app = Ephemeral(login)
        _ = try await idp.register(responder: app)
        #expect(app.redirected.withLock { $0 } == "http://127.0.0.1:41999/callback")
        // MemoryLogin redeems only for the redirect URI the code was issued to: the listener's.
        #expect(await idp.identity?.subject == "ann@example.com")
    }

    @Test("the server half redeems for a loopback redirect on another port only; another host or path is refused")
    func hostRedirectCheck() async throws {
        let login = MemoryLogin()
        let host = BrowserIdentityProviderHost(
            descriptor: IdentityProviderDescriptor(id: "web", type: "idp.browser", name: "Web"),
            authorizationURL: URL(string: "https://login.example/login/authorize")!,
            clientID: "gatehouse",
            redirectURI: "http://127.0.0.1:53180/callback",
            scope: "openid",
            login: login
        )
        func message(_ fields: [String: String]) throws -> Data { try JSONSerialization.data(withJSONObject: fields) }
        let verifier = String(repeating: "v", count: 43)
        let challenge = Data(SHA256.hash(data: Data(verifier.utf8))).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        for (used, accepted) in [
            ("https://evil.example/callback", false), ("http://127.0.0.1:41999/other", false),
            ("http://localhost:41999/callback", false), ("http://127.0.0.1:41999/callback", true),
        ] {
            let start = try await host.handle(
                RegistrationStepRequest(
                    message: try message([
                        "step": "start", "redirectURI": "http://127.0.0.1:53180/callback", "codeChallenge": challenge,
                    ]),
                    scopes: [],
                    now: Date()
                )
            )
            guard case .challenge(let payload, let session) = start else {
                Issue.record("no challenge")
                return
            }
            let address = try #require(
                (try JSONSerialization.jsonObject(with: payload) as? [String: String])?["authorizationURL"]
            )
            var components = try #require(URLComponents(string: address))
            components.queryItems = components.queryItems?.map {
                $0.name == "redirect_uri" ? URLQueryItem(name: $0.name, value: used) : $0
            }
            let authorization = try #require(components.url)
            let (code, state) = try #require(login.issue(for: authorization))
            let finish = RegistrationStepRequest(
                message: try message([
                    "step": "finish", "redirectURI": used, "code": code, "state": state, "codeVerifier": verifier,
                ]),
                session: session,
                scopes: [],
                now: Date()
            )
            do {
                let outcome = try await host.handle(finish)
                guard case .registered(let identity) = outcome else {
                    Issue.record("\(used): \(outcome)")
                    continue
                }
                #expect(accepted && identity.subject == "ann@example.com", "\(used)")
            } catch let error as GenericError {
                #expect(!accepted && error.code == .requestInvalid, "\(used)")
            }
            // A refused redirect redeems nothing.
            #expect(login.codes.withLock { $0[code]?.used } == accepted, "\(used)")
        }
    }

    @Test("a wrong state, a redirect elsewhere, an error or a cancel end the registration; nothing is redeemed")
    func refusals() async throws {
        let login = MemoryLogin()
        let cases: [(String, @Sendable (URL, URL) -> BrowserRegistrationResponse, String)] = [
            (
                "state", { url, back in redirect(back, "code=\(login.issue(for: url)!.code)&state=other") },
                "invalidState"
            ),
            ("no state", { url, back in redirect(back, "code=\(login.issue(for: url)!.code)") }, "invalidState"),
            (
                "elsewhere",
                { url, _ in
                    .redirect(URL(string: "http://127.0.0.1:9/evil?code=x&state=\(login.issue(for: url)!.state)")!)
                }, "invalidState"
            ),
            (
                "another loopback host",
                { url, _ in
                    .redirect(
                        URL(string: "http://localhost:53180/callback?code=x&state=\(login.issue(for: url)!.state)")!
                    )
                }, "invalidState"
            ),
            ("denied", { _, back in redirect(back, "error=access_denied") }, "actionCancelled"),
            (
                "error", { _, back in redirect(back, "error=server_error&error_description=down") },
                "externalIdentityProviderFailure"
            ),
            ("cancel", { _, _ in .cancel }, "actionCancelled"),
        ]
        for (name, answer, expected) in cases {
            let idp = try harness(login)
            do {
                _ = try await idp.register(responder: Browser(answer))
                Issue.record("\(name): registered")
            } catch let error as any DomainError {
                #expect(error.codeName == expected, "\(name)")
            }
            #expect(await idp.identity == nil)
        }
        #expect(login.codes.withLock { $0.values.allSatisfy { !$0.used } })
    }

    @Test("a code is taken once: a second redemption fails and asks to revoke what the first issued")
    func replay() async throws {
        let login = MemoryLogin()
        let captured = Mutex<String?>(nil)
        let first = try harness(login)
        _ = try await first.register(
            responder: Browser { url, back in
                let (code, state) = login.issue(for: url)!
                captured.withLock { $0 = code }
                return redirect(back, "code=\(code)&state=\(state)")
            }
        )
        // An attacker who saw the redirect replays its code in a registration of their own.
        let second = try harness(login)
        do {
            _ = try await second.register(
                responder: Browser { url, back in
                    let state = URLComponents(url: url, resolvingAgainstBaseURL: false)!.queryItems!.first {
                        $0.name == "state"
                    }!.value!
                    return redirect(back, "code=\(captured.withLock { $0 }!)&state=\(state)")
                }
            )
            Issue.record("a replayed code registered")
        } catch let error as RegistrationError {
            #expect(error.code == .externalIdentityProviderFailure)
        }
        #expect(await second.identity == nil)
        // The login says the code was used before: the server is asked to revoke what it issued.
        #expect(await second.revokedSubjects == ["ann@example.com"])
        // Exactly what the first use issued: the grant it reported with the identity.
        let firstGrant = try #require(await first.identity?.grant)
        #expect(await second.revokedGrants == [firstGrant])
    }

    @Test("configuration: the authorization URL is required; the host must provide the login")
    func configuration() {
        #expect(
            PluginHarness.configurationProblem(BrowserIdentityProviderPlugin.self, config: [:])?.contains(
                "authorizationURL"
            )
                == true
        )
        #expect(
            PluginHarness.configurationProblem(
                BrowserIdentityProviderPlugin.self,
                config: ["authorizationURL": "ftp://login.example/authorize"]
            )?.contains("expected an http or https URL") == true
        )
    }
}

@Suite("Browser identity provider conformance")
struct BrowserIdentityProviderConformanceTests {
    @Test("passes the identity provider conformance suite: the login, then a code the login never issued")
    func conformance() async throws {
        let login = MemoryLogin()
        let report = try await IdentityProviderConformance(
            BrowserIdentityProviderPlugin.self,
            config: ["authorizationURL": "https://login.example/login/authorize", "login": "login"],
            services: PluginServices().setting(BrowserLoginServiceKey.self, named: "login", to: login),
            register: .responder {
                Browser { url, back in
                    guard let (code, state) = login.issue(for: url) else { return .cancel }
                    return redirect(back, "code=\(code)&state=\(state)")
                }
            },
            refused: .responder {
                Browser { url, back in
                    let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
                    let state = query.first { $0.name == "state" }?.value ?? ""
                    return redirect(back, "code=forged&state=\(state)")
                }
            }
        ).run()
        // The state refuses a replay before the login sees its code: that path is `replay()`'s above.
        #expect(report.skipped.count == 1 && report.skipped[0].hasPrefix("a replay it recognises"), "\(report)")
    }
}
