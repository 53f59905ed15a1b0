import GatehouseOutbound
import Testing

@Suite("Outbound URLs: every component checked, one spelling accepted")
struct OutboundURLTests {
    @Test(
        "accepted, and kept exactly as written",
        arguments: [
            "https://portal.example/callbacks", "http://127.0.0.1:9000/hook", "http://127.0.0.1:1/cb",
            "http://127.0.0.1:65535/cb", "http://[::1]:8080/cb", "http://[2001:db8::1]/cb", "http://[::ffff:10.0.0.1]/",
            "https://a-b.example/cb/42?t=1&x=%20y", "https://portal.example/", "https://portal.example/cb/",
            "https://xn--bcher-kva.example/cb", "https://portal.example/caf%C3%A9", "https://portal.example/a:b@c;d=e",
            "https://portal.example/cb?next=%2Fhome", "http://localhost:8080/cb", "http://0.0.0.0:8080/x",
        ]
    )
    func accepted(text: String) throws {
        let url = try OutboundURL(text)
        #expect(url.text == text)
        #expect(url.description == text)
    }

    @Test(
        "refused: ports, schemes, users, fragments, spellings that a later step would change",
        arguments: [
            // Ports: the one that trapped inside the HTTP client, and every other out-of-range or
            // non-canonical spelling.
            "http://127.0.0.1:65536/cb", "http://127.0.0.1:0/cb", "http://127.0.0.1:99999/cb",
            "http://127.0.0.1:4294967377/cb", "http://127.0.0.1:-1/cb", "http://127.0.0.1:080/cb",
            "http://127.0.0.1:/cb", "http://127.0.0.1:80/cb", "https://portal.example:443/", "http://127.0.0.1:8a/cb",
            // Schemes and shape.
            "", "ftp://portal.example/", "file:///etc/passwd", "gopher://127.0.0.1:70/", "HTTPS://portal.example/cb",
            "https:/portal.example/cb", "https://portal.example", "https://portal.example?x=1", "http:///cb",
            "//portal.example/cb", "not a url",
            // User, password, fragment.
            "https://user@portal.example/", "https://user:pw@portal.example/", "https://portal.example@10.0.0.1/",
            "https://portal.example/cb#frag", "https://portal.example/cb#",
            // Hosts: case, encodings, full-width and other non-ASCII, IPv4 in other spellings, labels.
            "https://PORTAL.example/cb", "https://%70ortal.example/cb", "https://ｐｏｒｔａｌ.example/cb",
            "https://bücher.example/cb", "http://0177.0.0.1/", "http://127.1/", "http://2130706433/",
            "http://0x7f.0.0.1/", "http://256.0.0.1/", "http://1.2.3.4.5/", "http://a.123/", "http://-a.example/",
            "http://a-.example/", "http://a..example/", "http://a.example./", "http://a_b.example/",
            "http://\(String(repeating: "a", count: 64)).example/",
            "http://[::1/", "http://[0:0:0:0:0:0:0:1]/", "http://[::1%25eth0]/", "http://[::1]x/", "http://[::G]/",
            "http://[::1]:65536/", "http://::1/",
            // Paths: dot segments, their encodings, encoded slashes, backslashes, empty segments.
            "https://portal.example/cb/../admin", "https://portal.example/cb/./x", "https://portal.example/cb/..",
            "https://portal.example/cb/%2e%2e/admin", "https://portal.example/cb/%2E%2E/admin",
            "https://portal.example/cb/.%2e/admin", "https://portal.example/cb/..%2fadmin",
            "https://portal.example/cb/..%2Fadmin", "https://portal.example/cb/%5Cadmin",
            // Dot segments with matrix parameters, which servlet containers read as dot segments.
            "https://portal.example/cb/..;/admin", "https://portal.example/cb/..;x=1/admin",
            "https://portal.example/cb/.;/x",
            "https://portal.example/cb\\admin",
            "https://portal.example/cb//admin", "https://portal.example//cb",
            // Spaces, controls, non-canonical or broken percent-encoding, characters no part allows.
            "https://portal.example/c b", "https://portal.example/cb\r\nX-Injected: 1", "https://portal.example/cb\t",
            "https://portal.example/cb\u{0}", "https://portal.example/a%41", "https://portal.example/a%c3%a9",
            "https://portal.example/a%00", "https://portal.example/cb?x=%0D%0A", "https://portal.example/cb?x=%zz",
            "https://portal.example/cb?x=%4", "https://portal.example/<cb>", "https://portal.example/cb?x=\"",
            "https://portal.example/cb?x={}", "https://portal.example/caf\u{E9}",
            "https://portal.example/\(String(repeating: "a", count: 2048))",
        ]
    )
    func refused(text: String) {
        #expect(throws: OutboundURL.Refusal.self) { try OutboundURL(text) }
    }

    @Test("prefixes compare whole components and path segments")
    func prefixes() throws {
        let anyPort = try OutboundURL.Prefix("http://127.0.0.1:")
        let callbacks = try OutboundURL.Prefix("https://portal.example/callbacks")
        let trailing = try OutboundURL.Prefix("https://portal.example/callbacks/")
        let host = try OutboundURL.Prefix("https://portal.example")
        for (prefix, allowed) in [
            (anyPort, "http://127.0.0.1:65535/cb"), (anyPort, "http://127.0.0.1/cb"), (anyPort, "http://127.0.0.1:1/"),
            (callbacks, "https://portal.example/callbacks"), (callbacks, "https://portal.example/callbacks/42"),
            (callbacks, "https://portal.example/callbacks/"), (callbacks, "https://portal.example/callbacks?t=1"),
            (trailing, "https://portal.example/callbacks/42"), (host, "https://portal.example/anything"),
        ] {
            #expect(prefix.allows(try OutboundURL(allowed)), "\(prefix) \(allowed)")
        }
        for (prefix, refused) in [
            (anyPort, "http://127.0.0.1.evil.com:9000/"), (anyPort, "https://127.0.0.1:9000/"),
            (anyPort, "http://127.0.0.2:9000/"), (callbacks, "https://portal.example/callbacks-evil"),
            (callbacks, "https://portal.example/callbacksx/1"), (callbacks, "https://portal.example/"),
            (callbacks, "https://portal.example.evil.net/callbacks"), (callbacks, "http://portal.example/callbacks"),
            (callbacks, "https://portal.example:8443/callbacks"), (callbacks, "https://portal.example/other/callbacks"),
            (host, "https://portal.example:8443/"),
        ] {
            #expect(!prefix.allows(try OutboundURL(refused)), "\(prefix) \(refused)")
        }
        for bad in [
            "https://portal.example/cb/../admin", "https://portal.example/cb/%2e%2e/admin",
            "https://portal.example/cb/..%2fadmin", "https://portal.example/cb?x=1", "http://127.0.0.1:65536",
            "http://127.0.0.1:65536/", "https://PORTAL.example/cb", "https://portal.example/cb#x",
            "http://user@127.0.0.1:",
            "http://127.0.0.1::", "ftp://portal.example/",
        ] {
            #expect(throws: OutboundURL.Refusal.self, "\(bad)") { try OutboundURL.Prefix(bad) }
        }
    }
}
