import Foundation
import GatehouseLogin
import GatehouseOpenID
import GatehouseProtocol
import GatehouseTesting
import Testing

// Seeded fuzzing of the provider's endpoints: each case starts from a well-formed request and
// mutates its parameters (empty, huge, control characters, NUL, invalid UTF-8 escapes, broken
// escapes, duplicates, look-alike characters, hostile addresses) and sometimes its method,
// content type and body. Whatever comes in: never a 5xx, never a redirect anywhere but a
// registered address, and the store unchanged where nothing may change. A failure names the
// seed and the case, so it can be replayed.

/// Mutates form fields as raw (already encoded) text.
struct ParameterFuzzer {
    var random: SeededGenerator

    init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &random) < probability }
    mutating func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &random)] }
    mutating func number(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }

    static func encode(_ text: String) -> String { String(FormFields.encode([("a", text)]).dropFirst(2)) }

    static let lookAlikes: [Character: [String]] = [
        "a": ["\u{0430}", "\u{FF41}"], "e": ["\u{0435}", "\u{FF45}"], "o": ["\u{043E}", "\u{03BF}"],
        "c": ["\u{0441}"], "p": ["\u{0440}"], "i": ["\u{0456}", "\u{0131}"], "x": ["\u{0445}"],
        "/": ["\u{FF0F}", "\u{2215}"], ":": ["\u{FF1A}"], ".": ["\u{FF0E}", "\u{3002}"], "s": ["\u{0455}"],
        "d": ["\u{0501}"], "n": ["\u{0578}"], "b": ["\u{0184}"],
    ]

    static let hostile = [
        "https://evil.example/cb", "//evil.example", "https://web.example@evil.example/cb",
        "https://web.example.evil.example/cb", "https://web.example/cb/../../evil", "https://web.example/cb#frag",
        "https://web.example/cb?x=1", "HTTPS://WEB.EXAMPLE/cb", "https://web.example/cb/", "javascript:alert(1)",
        "https://web.example/cb\r\nLocation: https://evil.example", "\\\\evil.example", "https:evil.example",
        "https://portal.example/cb", "https://spa.example/cb", "https://web.example/after", "http://127.0.0.1:1/cb",
        "https://portal.example.evil.com/bye", "https://portal.example@evil.com", "/\\evil.example", "data:,x",
        "none", "login", "consent", "none login", "0", "-1", "99999999", "1e9", "0x10", "\u{0663}", "openid",
        "openid profile email admin", "code", "token", "S256", "plain", "query", "fragment", "yes", "allow",
        "web", "portal", "spa", "WEB", "web ", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", "{}", "null", "true",
        "<script>alert(1)</script>", "\"'><img src=x>", "${jndi:ldap://x}", "%s%n", "../../etc/passwd",
    ]

    /// A new raw value in place of `raw` (whose decoded form is `decoded`); `others` are the
    /// request's other raw values.
    mutating func value(_ raw: String, decoded: String, others: [String]) -> String {
        switch number(0...17) {
        case 0: return ""
        case 1:
            return String(repeating: pick(["A", "%41", "+", "%F0%9F%98%80", "a%20"]), count: number(1000...40000))
        case 2:
            let control = pick([
                "%01", "%1F", "%7F", "%0D%0A", "%09", "%0B", "\u{01}", "\r\n", "\t", "%C2%85", "%E2%80%A8",
            ])
            return insert(control, into: raw)
        case 3: return insert(pick(["%00", "\u{0}", "%2500"]), into: raw)
        case 4:
            return insert(
                pick(["%FF", "%C3%28", "%ED%A0%80", "%F8%88%80%80%80", "%C0%AF", "%E2%82", "%80", "%FE%FF"]),
                into: raw
            )
        case 5: return insert(pick(["%", "%G1", "%4", "%%", "%zz", "%u0041", "%%41"]), into: raw)
        case 6:
            var characters = Array(decoded)
            for _ in 0..<number(1...3) where !characters.isEmpty {
                let index = number(0...(characters.count - 1))
                if let replacements = Self.lookAlikes[characters[index]] {
                    characters[index] = Character(pick(replacements))
                } else {
                    characters[index] = Character(pick(["\u{0430}", "\u{FF0F}", "\u{200B}", "\u{202E}", "\u{FEFF}"]))
                }
            }
            return Self.encode(String(characters))
        case 7:
            return String(
                repeating: pick(["s", "%73", "\u{00E9}"]),
                count: pick([511, 512, 513, 1024, 4097, 16385, 70000])
            )
        case 8: return Self.encode(pick(Self.hostile))
        case 9: return others.isEmpty ? raw : pick(others)
        case 10: return Self.encode(decoded.uppercased())
        case 11: return pick([" ", "+", "%20", "%09"]) + raw + pick(["", " ", "+", "%20"])
        case 12: return (0..<number(1...40)).map { _ in String(format: "%%%02X", number(0...255)) }.joined()
        case 13:
            // Raw printable ASCII, structure characters included (& = ? # + %).
            let alphabet = Array("abcXYZ019&=?#+%;:/@.,-_~!$'()*[]{}<>\"\\^`| ")
            return (0..<number(1...30)).map { _ in String(pick(alphabet)) }.joined()
        case 14: return raw + raw
        case 15: return Self.encode(decoded + pick(["\u{0}", "\u{FFFD}", "\u{1F600}", "\u{0301}", "\u{D7FF}"]))
        case 16: return String(raw.prefix(number(0...max(0, raw.count))))
        default: return Self.encode(pick(["ann@example.com", "bob@example.com", "Ann@Example.com ", "x", "1"]))
        }
    }

    mutating func insert(_ piece: String, into raw: String) -> String {
        guard !raw.isEmpty, chance(0.7) else { return raw + piece }
        let characters = Array(raw)
        let index = number(0...characters.count)
        return String(characters[..<index]) + piece + String(characters[index...])
    }

    /// `fields` (decoded name, value) with one to three mutations; raw encoded pairs.
    mutating func mutate(_ fields: [(String, String)]) -> [(String, String?)] {
        var raw: [(String, String?)] = fields.map { (Self.encode($0.0), Self.encode($0.1)) }
        for _ in 0..<number(1...3) {
            let index = raw.isEmpty ? 0 : number(0...(raw.count - 1))
            switch number(0...9) {
            case 0...4 where !raw.isEmpty:
                let decoded = FormFields.decode(Substring(raw[index].1 ?? "")) ?? ""
                let others = raw.enumerated().filter { $0.offset != index }.compactMap(\.element.1)
                raw[index].1 = value(raw[index].1 ?? "", decoded: decoded, others: others)
            case 5 where !raw.isEmpty:
                raw.remove(at: index)
            case 6 where !raw.isEmpty:
                // The same name twice, with the same or another value.
                let copy = raw[index]
                raw.insert((copy.0, chance(0.5) ? copy.1 : Self.encode(pick(Self.hostile))), at: number(0...raw.count))
            case 7 where !raw.isEmpty:
                // Another spelling of the name: its case, an escape that decodes to it, a space.
                let name = raw[index].0
                raw[index].0 = pick([
                    name.uppercased(), name + "%20",
                    "%" + String(format: "%02X", Int(name.utf8.first ?? 0x61)) + String(name.dropFirst()),
                    name.replacingOccurrences(of: "_", with: "%5F"), "", name + "[]", " " + name,
                ])
            case 8 where !raw.isEmpty:
                raw[index].1 = nil  // a name without "="
            default:
                raw.insert(
                    (
                        pick(["x", "", "%00", "access_token", "client_secret", "confirm", "code", "&", "%FF"]),
                        Self.encode(pick(Self.hostile))
                    ),
                    at: number(0...raw.count)
                )
            }
        }
        if chance(0.1) { raw.shuffle(using: &random) }
        return raw
    }

    static func join(_ raw: [(String, String?)]) -> String {
        raw.map { name, value in value.map { name + "=" + $0 } ?? name }.joined(separator: "&")
    }

    /// A method: usually `usual`, sometimes anything.
    mutating func method(_ usual: String) -> String {
        chance(0.85)
            ? usual
            : pick([
                "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "get", "post", "", "G\u{0}ET",
                "CONNECT",
            ])
    }

    /// A content type: usually the form's, sometimes another or none.
    mutating func contentType() -> String? {
        chance(0.8)
            ? "application/x-www-form-urlencoded"
            : pick([
                nil, "application/x-www-form-urlencoded; charset=utf-8", "APPLICATION/X-WWW-FORM-URLENCODED",
                "application/json",
                "text/plain", "multipart/form-data; boundary=x", "", "application/x-www-form-urlencoded\u{0}",
                "application/x-www-form-urlencodedx",
            ])
    }

    mutating func bytes(_ count: Int) -> Data {
        Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &random) })
    }
}

/// What the fuzz of one endpoint found.
struct FuzzFindings {
    var seed: UInt64
    var cases = 0
    var problems: [String] = []

    mutating func check(
        _ condition: Bool,
        _ what: @autoclosure () -> String,
        _ request: WireRequest,
        _ response: WireResponse
    ) {
        guard !condition else { return }
        let body = String(decoding: response.body.prefix(200), as: UTF8.self)
        problems.append(
            "seed \(seed) case \(cases): \(what()) — \(request.method) \(request.path.prefix(300)) "
                + "[\(String(decoding: request.body.prefix(300), as: UTF8.self))] → \(response.status) "
                + "\(response.headers["Location"] ?? "") \(body)"
        )
    }

    /// Checks every answer shares: no 5xx, no redirect off the registered addresses (one of them
    /// exactly, or followed by `?` and the query), no new session.
    mutating func common(_ request: WireRequest, _ response: WireResponse, allowed: [String]) {
        check(response.status < 500, "a 5xx", request, response)
        if let location = response.headers["Location"] {
            check(
                allowed.contains { location == $0 || location.hasPrefix($0 + "?") },
                "a redirect off the registered addresses",
                request,
                response
            )
            check(!location.contains("\r") && !location.contains("\n"), "a line break in Location", request, response)
        }
        if let cookie = response.headers["Set-Cookie"] {
            check(!cookie.hasPrefix("gh_sso=") || cookie.hasPrefix("gh_sso=;"), "a session cookie", request, response)
        }
    }

    func report() {
        #expect(problems.isEmpty, "\(problems.count) problems; first: \(problems.prefix(5).joined(separator: "\n"))")
    }
}

/// Runs `body` for `cases` cases: a count, not a time, so a loaded machine runs the same cases,
/// only slower.
func fuzzLoop(cases: Int, _ body: (Int) async throws -> Void) async rethrows -> Int {
    for index in 0..<cases { try await body(index) }
    return cases
}

@Suite("OpenID provider: fuzzed input", .serialized)
struct OpenIDInputTests {
    @Test("authorize: mutated requests never 5xx, redirect only to registered URIs, and make no session or token")
    func authorizeFuzz() async throws {
        try await withOpenID { op in
            var signedIn = Agent(op)
            let hint = try #require(try await signedIn.tokens(.web()).idToken)
            let session = try #require(signedIn.session)
            var fuzzer = ParameterFuzzer(seed: 0x6A7E_0001)
            var findings = FuzzFindings(seed: 0x6A7E_0001)
            let clients = [
                (OP.web, OP.webRedirect, "openid profile email"), (OP.portal, OP.portalRedirect, "openid email"),
                (OP.spa, OP.spaRedirect, "openid profile"), (OP.pairOne, OP.pairOneRedirect, "openid"),
            ]
            for withSession in [false, true] {
                let before = try await op.fingerprint()
                findings.cases += await fuzzLoop(cases: 250) { index in
                    let (client, redirect, scope) = fuzzer.pick(clients)
                    var fields = [
                        ("response_type", "code"), ("client_id", client), ("redirect_uri", redirect), ("scope", scope),
                        ("state", "state-\(index)"), ("code_challenge", PKCE.challenge(for: PKCE.makeVerifier())),
                        ("code_challenge_method", "S256"), ("nonce", "nonce-\(index)"),
                    ]
                    for (name, value) in [
                        ("prompt", fuzzer.pick(["none", "login", "consent"])), ("max_age", "600"),
                        ("login_hint", OP.ann), ("id_token_hint", hint), ("response_mode", "query"),
                    ] where fuzzer.chance(0.2) {
                        fields.append((name, value))
                    }
                    let query = ParameterFuzzer.join(fuzzer.mutate(fields))
                    var headers: [String: String] = [:]
                    if withSession {
                        headers["Cookie"] =
                            fuzzer.chance(0.9) ? "gh_sso=\(session)" : "gh_sso=\(session)x; gh_sso=\(session)"
                    }
                    var request = WireRequest(
                        method: fuzzer.method("GET"),
                        path: LoginServer.authorizePath + "?" + query,
                        headers: headers
                    )
                    if request.method == "POST", fuzzer.chance(0.5) {
                        request.setHeader("Content-Type", fuzzer.contentType())
                        request.body = fuzzer.chance(0.5) ? Data(query.utf8) : fuzzer.bytes(fuzzer.number(0...300))
                    }
                    let response = await op.send(request)
                    findings.common(request, response, allowed: OP.redirectURIs)
                    if !withSession {
                        findings.check(
                            redirectQuery(response)["code"] == nil,
                            "a code without a session",
                            request,
                            response
                        )
                    }
                    if response.status == 303, let location = response.headers["Location"], location.contains("code=") {
                        // A code goes only to the client the request names, at its registered URI.
                        let named = FormFields(queryOf: request.path)?["client_id"]
                        let expected = clients.first { $0.0 == named }?.1
                        findings.check(
                            expected.map { location.hasPrefix($0 + "?") } == true,
                            "a code to another client",
                            request,
                            response
                        )
                    }
                }
                var after = try await op.fingerprint()
                if withSession {
                    // Codes may be issued to the signed-in browser; nothing else changes.
                    after["codes"] = before["codes"]
                }
                #expect(after == before, "withSession: \(withSession)")
            }
            #expect(findings.cases >= 100)
            findings.report()
        }
    }

    @Test("the sign-in form: mutated posts never 5xx, never redirect, never start a session")
    func signInFuzz() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            _ = await browser.authorize(.web())
            let id = try #require(browser.fields["authorization"])
            let csrf = try #require(browser.fields["csrf"])
            var fuzzer = ParameterFuzzer(seed: 0x6A7E_0002)
            var findings = FuzzFindings(seed: 0x6A7E_0002)
            let before = try await op.fingerprint()
            findings.cases = await fuzzLoop(cases: 40) { _ in
                let fields = [
                    ("authorization", id), ("csrf", csrf),
                    ("username", fuzzer.pick([OP.ann, OP.bob, "nobody@example.com"])),
                    ("password", "wrong password"),
                ]
                let body = ParameterFuzzer.join(fuzzer.mutate(fields))
                var headers = ["Cookie": browser.cookieHeader]
                headers["Content-Type"] = fuzzer.contentType()
                if fuzzer.chance(0.1) {
                    headers["Cookie"] = fuzzer.pick([
                        "", "gh_csrf_\(id)=forged", browser.cookieHeader + "; " + browser.cookieHeader,
                    ])
                }
                let request = WireRequest(
                    method: fuzzer.method("POST"),
                    path: LoginServer.authorizePath,
                    headers: headers,
                    body: fuzzer.chance(0.9) ? Data(body.utf8) : fuzzer.bytes(fuzzer.number(0...500))
                )
                let response = await op.send(request)
                findings.common(request, response, allowed: [])
                findings.check(
                    response.headers["Location"] == nil || request.method != "POST",
                    "a redirect",
                    request,
                    response
                )
            }
            #expect(try await op.fingerprint() == before)
            #expect(findings.cases >= 30)
            findings.report()
        }
    }

    @Test("logout: mutated requests never 5xx, return only to registered addresses, end no session")
    func logoutFuzz() async throws {
        try await withOpenID { op in
            var ann = Agent(op)
            _ = try await ann.tokens(.web())
            var bob = Agent(op)
            let bobHint = try #require(try await bob.tokens(.web(), as: OP.bob).idToken)
            let session = try #require(ann.session)
            var fuzzer = ParameterFuzzer(seed: 0x6A7E_0003)
            var findings = FuzzFindings(seed: 0x6A7E_0003)
            let before = try await op.fingerprint()
            findings.cases = await fuzzLoop(cases: 300) { index in
                var fields = [("post_logout_redirect_uri", fuzzer.pick(OP.postLogoutURIs)), ("state", "s-\(index)")]
                let registeredFor = fields[0].1 == OP.webAfter ? OP.web : OP.portal
                if fuzzer.chance(0.6) { fields.append(("client_id", registeredFor)) }
                if fuzzer.chance(0.5) { fields.append(("id_token_hint", bobHint)) }
                if fuzzer.chance(0.3) {
                    fields += [("confirm", "yes"), ("csrf", Data.random(count: 32).base64URLEncodedString)]
                }
                let raw = ParameterFuzzer.join(fuzzer.mutate(fields))
                let method = fuzzer.method(fuzzer.pick(["GET", "POST"]))
                var headers = [
                    "Cookie": fuzzer.chance(0.9)
                        ? "gh_sso=\(session)"
                        : fuzzer.pick([
                            "", "gh_sso=", "gh_sso=\(session); gh_sso=x",
                            "gh_sso=\(String(repeating: "x", count: 200))",
                        ])
                ]
                if fuzzer.chance(0.2) {
                    headers["Sec-Fetch-Site"] = fuzzer.pick(["cross-site", "same-origin", "none", "\u{0}"])
                }
                var request = WireRequest(method: method, path: LoginServer.logoutPath, headers: headers)
                if method == "POST" {
                    request.setHeader("Content-Type", fuzzer.contentType())
                    request.body = fuzzer.chance(0.9) ? Data(raw.utf8) : fuzzer.bytes(fuzzer.number(0...500))
                } else {
                    request.path += "?" + raw
                }
                let response = await op.send(request)
                findings.common(request, response, allowed: OP.postLogoutURIs)
            }
            #expect(try await op.fingerprint() == before)
            #expect(try await op.login.pendingLogouts() == 0)
            #expect(findings.cases >= 100)
            findings.report()
            // Ann is still signed in.
            let silent = await ann.authorize(.spa().with("prompt", "none"))
            #expect(redirectQuery(silent)["code"] != nil)
        }
    }

    @Test("token endpoint: mutated requests never 5xx, always an OAuth JSON error, change nothing")
    func tokenFuzz() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            _ = try await browser.tokens(.web())
            var fuzzer = ParameterFuzzer(seed: 0x6A7E_0004)
            var findings = FuzzFindings(seed: 0x6A7E_0004)
            let before = try await op.fingerprint()
            let basic = "Basic " + Data("\(OP.web):\(OP.webSecret)".utf8).base64EncodedString()
            findings.cases = await fuzzLoop(cases: 300) { _ in
                var fields = [
                    ("grant_type", fuzzer.pick(["authorization_code", "refresh_token"])),
                    ("code", Data.random(count: 32).base64URLEncodedString), ("redirect_uri", OP.webRedirect),
                    ("code_verifier", PKCE.makeVerifier()),
                    ("refresh_token", Data.random(count: 32).base64URLEncodedString),
                    ("scope", "openid"),
                ]
                var headers: [String: String] = [:]
                switch fuzzer.number(0...3) {
                case 0: headers["Authorization"] = basic
                case 1: fields += [("client_id", OP.web), ("client_secret", OP.webSecret)]
                case 2: fields.append(("client_id", OP.spa))
                default:
                    headers["Authorization"] = fuzzer.pick([
                        "Basic", "Basic ", "Basic \u{0}", "basic " + String(basic.dropFirst(6)), "Bearer x",
                        basic + basic,
                        "Basic " + Data("web".utf8).base64EncodedString(),
                        "Basic " + Data([0xFF, 0x3A, 0xFE]).base64EncodedString(),
                        "Basic " + String(repeating: "A", count: 5000),
                        "Basic " + Data("%ZZ:%00".utf8).base64EncodedString(),
                    ])
                }
                let raw = ParameterFuzzer.join(fuzzer.mutate(fields))
                headers["Content-Type"] = fuzzer.contentType()
                let request = WireRequest(
                    method: fuzzer.method("POST"),
                    path: LoginServer.tokenPath + (fuzzer.chance(0.1) ? "?" + raw : ""),
                    headers: headers,
                    body: fuzzer.chance(0.9) ? Data(raw.utf8) : fuzzer.bytes(fuzzer.number(0...500))
                )
                let response = await op.send(request)
                findings.common(request, response, allowed: [])
                findings.check(response.headers["Location"] == nil, "a redirect", request, response)
                if request.method == "POST" {
                    findings.check(response.status != 200, "tokens without a grant", request, response)
                    let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]
                    findings.check(json?["error"] is String, "not an OAuth error", request, response)
                    findings.check(response.headers["Cache-Control"] == "no-store", "cacheable", request, response)
                }
            }
            #expect(try await op.fingerprint() == before)
            #expect(findings.cases >= 100)
            findings.report()
        }
    }

    @Test("userinfo: mutated bearer headers never 5xx, answer only the exact token's claims, change nothing")
    func userinfoFuzz() async throws {
        try await withOpenID { op in
            var browser = Agent(op)
            let tokens = try await browser.tokens(.web(scope: "openid email"))
            var fuzzer = ParameterFuzzer(seed: 0x6A7E_0005)
            var findings = FuzzFindings(seed: 0x6A7E_0005)
            let before = try await op.fingerprint()
            findings.cases = await fuzzLoop(cases: 300) { _ in
                let raw = fuzzer.mutate([("Bearer", tokens.access)])
                let token = raw.first?.1.flatMap { FormFields.decode(Substring($0)) } ?? raw.first?.1 ?? ""
                let scheme =
                    fuzzer.chance(0.8)
                    ? "Bearer" : fuzzer.pick(["bearer", "BEARER", "Basic", "", "Bearer\t", "Bearer:", "DPoP"])
                var header = scheme + " " + token
                if fuzzer.chance(0.1) {
                    header = fuzzer.pick([
                        "", " ", "Bearer", "Bearer \(tokens.access), Bearer x", String(repeating: "B", count: 3000),
                    ])
                }
                var request = WireRequest(
                    method: fuzzer.method(fuzzer.pick(["GET", "POST"])),
                    path: LoginServer.userinfoPath + (fuzzer.chance(0.2) ? "?access_token=\(tokens.access)" : ""),
                    headers: fuzzer.chance(0.95) ? ["Authorization": header] : [:]
                )
                if request.method == "POST", fuzzer.chance(0.3) {
                    request.setHeader("Content-Type", fuzzer.contentType())
                    request.body = Data("access_token=\(tokens.access)".utf8)
                }
                let response = await op.send(request)
                findings.common(request, response, allowed: [])
                findings.check(response.headers["Location"] == nil, "a redirect", request, response)
                if response.status == 200 {
                    let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]
                    findings.check(json?["sub"] as? String == OP.ann, "another user's claims", request, response)
                    let sent = request.header("Authorization") ?? ""
                    findings.check(
                        sent.lowercased().hasPrefix("bearer ")
                            && sent.dropFirst(7).trimmingCharacters(in: .whitespaces) == tokens.access,
                        "claims for a token that is not the exact one",
                        request,
                        response
                    )
                }
            }
            #expect(try await op.fingerprint() == before)
            #expect(findings.cases >= 100)
            findings.report()
        }
    }
}
