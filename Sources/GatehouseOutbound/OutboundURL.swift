#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An absolute `http`/`https` URL the server may call: every component checked, and only the
/// canonical spelling accepted, so the text that was checked (and stored) is the text that is
/// sent — nothing between here and the socket normalises it into something else.
///
/// Accepted, and nothing else:
/// - scheme `http` or `https`, lower case;
/// - host: a registered name of lower-case LDH labels (1–63 characters, no hyphen at either end,
///   a top label that is not all digits, 253 characters at most), a dotted-decimal IPv4 address
///   without leading zeros, or a bracketed IPv6 address in its RFC 5952 form (`[::1]`); no
///   user or password;
/// - port 1–65535 without leading zeros, and not the scheme's default (leave 80/443 out);
/// - a path that starts with `/`, of RFC 3986 path characters, with no `.`/`..` segment (nor one
///   with parameters, `..;x`, which servlet containers read as `..`) and no
///   empty segment except a trailing one (`/cb/`);
/// - optionally a query of RFC 3986 query characters; never a fragment;
/// - percent-encoding only where a character needs it: upper-case hex, never of an unreserved
///   character (so never `%2E` for a dot), of `/` or `\`, or of a control character.
///
/// Anything else — spaces, control characters, non-ASCII (full-width letters included), a
/// backslash, an upper-case host — is refused rather than repaired.
public struct OutboundURL: Sendable, Hashable, CustomStringConvertible {
    /// The URL exactly as accepted: what is stored and what is sent.
    public let text: String
    /// `http` or `https`, in lower case.
    public let scheme: String
    /// As written; an IPv6 address keeps its brackets.
    public let host: String
    /// nil: the scheme's default.
    public let port: Int?
    /// The path as written, starting with `/`; percent-escapes are kept, not decoded.
    public let path: String
    /// The query as written, without its `?`; `nil` when the URL has none.
    public let query: String?

    /// The URL's text, as accepted.
    public var description: String { text }

    /// The path's segments (`/cb/42` is `["cb", "42"]`; a trailing slash adds an empty one).
    public var pathSegments: [Substring] { Self.segments(of: path) }

    /// Why a URL was refused, in words for an error message.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// What about the URL was refused, in words.
        public var reason: String
        /// The reason, as an error message prints it.
        public var description: String { reason }
        /// A refusal for this reason.
        public init(_ reason: String) { self.reason = reason }
    }

    /// The longest URL accepted.
    public static let maxLength = 2048

    /// Accepts `text` when it is an allowed URL in its canonical spelling; throws a ``Refusal`` saying why otherwise. A
    /// URL also needs a path, at least `/`.
    public init(_ text: String) throws(Refusal) {
        let parts = try Self.split(text, allowsAnyPort: false)
        guard let path = parts.path, !path.isEmpty else {
            throw Refusal("the URL has no path: end the host (and port) with /")
        }
        self.text = text
        scheme = parts.scheme
        host = parts.host
        port = parts.port
        self.path = path
        query = parts.query
    }

    /// The start of the URLs a configuration allows, compared by parts: scheme, host and port
    /// equal, and the prefix's path segments the first segments of the URL's path. `https://a.example/cb`
    /// allows `https://a.example/cb` and `https://a.example/cb/42`, not `https://a.example/cbx`,
    /// `https://a.example.evil.net/cb` or `https://a.example:8443/cb`. A prefix ending in `host:`
    /// allows any port of that host (and the default one).
    public struct Prefix: Sendable, Hashable, CustomStringConvertible {
        /// The prefix exactly as configured.
        public let text: String
        let scheme: String
        let host: String
        let port: Int?
        let anyPort: Bool
        /// Without a trailing empty segment: `/cb/` and `/cb` allow the same URLs.
        let segments: [Substring]

        /// The prefix's text, as configured.
        public var description: String { text }

        /// Accepts a prefix: a URL of the same form without a query, whose port may be left open (`host:`); throws a
        /// ``OutboundURL/Refusal`` saying why otherwise.
        public init(_ text: String) throws(Refusal) {
            let parts = try OutboundURL.split(text, allowsAnyPort: true)
            guard parts.query == nil else { throw Refusal("a prefix takes no query") }
            self.text = text
            scheme = parts.scheme
            host = parts.host
            port = parts.port
            anyPort = parts.anyPort
            var segments = OutboundURL.segments(of: parts.path ?? "")
            if segments.last == "" { segments.removeLast() }
            self.segments = segments
        }

        /// Whether `url` starts with this prefix: same scheme, host and port, and the prefix's path segments first.
        public func allows(_ url: OutboundURL) -> Bool {
            guard url.scheme == scheme, url.host == host, anyPort || url.port == port else { return false }
            let target = url.pathSegments
            return target.count >= segments.count && zip(segments, target).allSatisfy { $0 == $1 }
        }
    }

    // MARK: - Parsing

    private struct Parts {
        var scheme: String
        var host: String
        var port: Int?
        var anyPort = false
        /// nil when nothing follows the authority.
        var path: String?
        var query: String?
    }

    private static func segments(of path: String) -> [Substring] {
        guard path.hasPrefix("/") else { return [] }
        return path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
    }

    private static func split(_ text: String, allowsAnyPort: Bool) throws(Refusal) -> Parts {
        guard !text.isEmpty else { throw Refusal("the URL is empty") }
        guard text.utf8.count <= maxLength else { throw Refusal("the URL is longer than \(maxLength) bytes") }
        // Printable ASCII only: no space, no control character (CR, LF, NUL, tab), nothing a
        // later step could fold into ASCII (full-width letters), no backslash.
        for byte in text.utf8 where byte <= 0x20 || byte >= 0x7F {
            throw Refusal("the URL holds a space, a control character or a non-ASCII character")
        }
        guard !text.utf8.contains(UInt8(ascii: "\\")) else { throw Refusal("the URL holds a backslash") }
        guard !text.utf8.contains(UInt8(ascii: "#")) else { throw Refusal("the URL has a fragment") }

        let scheme: String
        var rest: Substring
        if text.hasPrefix("https://") {
            scheme = "https"
            rest = text.dropFirst(8)
        } else if text.hasPrefix("http://") {
            scheme = "http"
            rest = text.dropFirst(7)
        } else {
            throw Refusal("the URL must start with http:// or https:// (lower case)")
        }

        var query: String?
        if let mark = rest.firstIndex(of: "?") {
            let text = rest[rest.index(after: mark)...]
            try checkCharacters(text, allowed: isQueryCharacter, part: "query", refusesEncodedSlash: false)
            query = String(text)
            rest = rest[..<mark]
        }
        let authority: Substring
        var path: String?
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            path = String(rest[slash...])
        } else {
            authority = rest
        }
        if query != nil, path == nil { throw Refusal("the URL has no path: end the host (and port) with /") }
        guard !authority.contains("@") else { throw Refusal("the URL holds a user or password") }

        var parts = Parts(scheme: scheme, host: "", path: path, query: query)
        let hostText: Substring
        let portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw Refusal("the IPv6 address has no ]") }
            hostText = authority[...close]
            let after = authority[authority.index(after: close)...]
            if after.isEmpty {
                portText = nil
            } else if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else {
                throw Refusal("the IPv6 address is followed by something other than a port")
            }
            try checkIPv6(hostText.dropFirst().dropLast())
        } else {
            if let colon = authority.firstIndex(of: ":") {
                hostText = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
            } else {
                hostText = authority
                portText = nil
            }
            try checkHost(hostText)
        }
        parts.host = String(hostText)
        if let portText {
            if portText.isEmpty, allowsAnyPort, path == nil {
                parts.anyPort = true
            } else {
                parts.port = try checkPort(portText, scheme: scheme)
            }
        }
        if let path { try checkPath(path) }
        return parts
    }

    private static func checkHost(_ host: Substring) throws(Refusal) {
        guard !host.isEmpty else { throw Refusal("the URL has no host") }
        guard host.utf8.count <= 253 else { throw Refusal("the host is longer than 253 characters") }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        // All-digit top label: only a dotted-decimal IPv4 address, four numbers without leading
        // zeros (resolvers read `0177.1` or `2130706433` as 127.0.0.1 in other spellings).
        if let top = labels.last, !top.isEmpty, top.utf8.allSatisfy(isDigit) {
            guard labels.count == 4,
                labels.allSatisfy({ label in
                    !label.isEmpty && label.utf8.count <= 3 && label.utf8.allSatisfy(isDigit)
                        && (label == "0" || !label.hasPrefix("0")) && (Int(label) ?? 256) <= 255
                })
            else { throw Refusal("the host is neither a name nor a dotted-decimal IPv4 address") }
            return
        }
        for label in labels {
            guard !label.isEmpty, label.utf8.count <= 63 else {
                throw Refusal("the host has an empty label or one longer than 63 characters")
            }
            guard label.utf8.allSatisfy({ isLowerLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-") }) else {
                throw Refusal("the host may hold only lower-case letters, digits, hyphens and dots")
            }
            guard !label.hasPrefix("-"), !label.hasSuffix("-") else {
                throw Refusal("a label of the host starts or ends with a hyphen")
            }
        }
    }

    private static func checkIPv6(_ address: Substring) throws(Refusal) {
        var bytes = in6_addr()
        guard address.utf8.count < 46,
            String(address).withCString({ inet_pton(AF_INET6, $0, &bytes) }) == 1
        else { throw Refusal("the host is not an IPv6 address") }
        // Only the one canonical spelling (lower case, zeros compressed as RFC 5952 says).
        var buffer = [CChar](repeating: 0, count: 46)
        let canonical = buffer.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, inet_ntop(AF_INET6, &bytes, base, 46) != nil else { return nil }
            return String(cString: base)
        }
        guard canonical == String(address) else {
            throw Refusal("write the IPv6 address in its canonical form: [\(canonical ?? "")]")
        }
    }

    private static func checkPort(_ text: Substring, scheme: String) throws(Refusal) -> Int {
        guard !text.isEmpty, text.utf8.count <= 5, text.utf8.allSatisfy(isDigit), !text.hasPrefix("0"),
            let port = Int(text), (1...65535).contains(port)
        else { throw Refusal("the port must be a number from 1 to 65535") }
        guard port != (scheme == "https" ? 443 : 80) else {
            throw Refusal("leave out the default port \(port) of \(scheme)")
        }
        return port
    }

    private static func checkPath(_ path: String) throws(Refusal) {
        // An encoded slash is refused here: a server that decodes before routing would see
        // other segments than the prefix check did (`/cb/..%2Fadmin`).
        try checkCharacters(
            Substring(path),
            allowed: { isPathCharacter($0) || $0 == UInt8(ascii: "/") },
            part: "path",
            refusesEncodedSlash: true
        )
        let segments = Self.segments(of: path)
        for (index, segment) in segments.enumerated() {
            // Also with matrix parameters (`..;x`): servlet containers read `..;` as `..`.
            let name = segment.prefix { $0 != ";" }
            guard name != ".", name != ".." else { throw Refusal("the path has a . or .. segment") }
            guard !segment.isEmpty || index == segments.count - 1 else {
                throw Refusal("the path has an empty segment (//)")
            }
        }
    }

    /// Checks `text` holds only `allowed` characters and well-formed, necessary percent-encodings.
    private static func checkCharacters(
        _ text: Substring,
        allowed: (UInt8) -> Bool,
        part: String,
        refusesEncodedSlash: Bool
    ) throws(Refusal) {
        var bytes = text.utf8.makeIterator()
        while let byte = bytes.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = bytes.next(), let low = bytes.next(), let value = hexValue(high, low) else {
                    throw Refusal("the \(part) has a % not followed by two hex digits")
                }
                guard !isLowerHexLetter(high), !isLowerHexLetter(low) else {
                    throw Refusal("write percent-encodings in the \(part) with upper-case hex digits")
                }
                guard !isUnreserved(value) else {
                    throw Refusal("the \(part) percent-encodes a character that needs none (%\(hex(value)))")
                }
                guard value >= 0x20, value != 0x7F else {
                    throw Refusal("the \(part) percent-encodes a control character")
                }
                guard !refusesEncodedSlash || (value != UInt8(ascii: "/") && value != UInt8(ascii: "\\")) else {
                    throw Refusal("the \(part) percent-encodes a slash or backslash")
                }
            } else if !allowed(byte) {
                throw Refusal("the \(part) holds a character it may not: \(Character(Unicode.Scalar(byte)))")
            }
        }
    }

    // MARK: - Character classes (RFC 3986 §2, §3.3, §3.4)

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
    private static func isLowerLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
    }
    private static func isLowerHexLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        isLowerLetter(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || isDigit(byte)
            || "-._~".utf8.contains(byte)
    }
    /// pchar without pct-encoded: unreserved, sub-delims, ":" and "@".
    private static func isPathCharacter(_ byte: UInt8) -> Bool {
        isUnreserved(byte) || "!$&'()*+,;=:@".utf8.contains(byte)
    }
    private static func isQueryCharacter(_ byte: UInt8) -> Bool {
        isPathCharacter(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?")
    }
    private static func hexValue(_ high: UInt8, _ low: UInt8) -> UInt8? {
        func digit(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        guard let high = digit(high), let low = digit(low) else { return nil }
        return high << 4 | low
    }
    private static func hex(_ value: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(value >> 4)], digits[Int(value & 0xF)]])
    }
}
