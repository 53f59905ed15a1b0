/// A strict RFC 8259 JSON parser into ``ConfigValue``.
///
/// Foundation's decoders say only "not valid JSON", accept trailing commas and let a duplicate
/// key silently win; a manifest deserves better. This parser names the line and column of the
/// problem, refuses duplicate keys and keeps integers apart from fractions. Nesting is limited so
/// hostile input cannot exhaust the stack.
struct JSONParser {
    private let bytes: [UInt8]
    private var position = 0
    private var depth = 0
    private static let maximumDepth = 64

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    static func parse(_ bytes: [UInt8]) throws(ManifestSyntaxError) -> ConfigValue {
        var parser = JSONParser(bytes)
        parser.skipWhitespace()
        if parser.position == bytes.count { return .null }
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.position == bytes.count else { throw parser.error("unexpected text after the document") }
        return value
    }

    private mutating func parseValue() throws(ManifestSyntaxError) -> ConfigValue {
        skipWhitespace()
        guard let byte = peek() else { throw error("the document ends where a value was expected") }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try parseLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try parseLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try parseLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("expected a value, found \(describe(byte))")
        }
    }

    private mutating func parseObject() throws(ManifestSyntaxError) -> ConfigValue {
        try enter()
        position += 1
        var object: [String: ConfigValue] = [:]
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw error("expected a quoted key") }
            let keyStart = position
            let key = try parseString()
            if object[key] != nil { throw error("the key \"\(key)\" appears twice", at: keyStart) }
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw error("expected ':' after the key \"\(key)\"") }
            position += 1
            object[key] = try parseValue()
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","):
                let comma = position
                position += 1
                skipWhitespace()
                if peek() == UInt8(ascii: "}") { throw error("a ',' must be followed by another key", at: comma) }
            case UInt8(ascii: "}"):
                position += 1
                depth -= 1
                return .object(object)
            default:
                throw error("expected ',' or '}' after the value of \"\(key)\"")
            }
        }
    }

    private mutating func parseArray() throws(ManifestSyntaxError) -> ConfigValue {
        try enter()
        position += 1
        var list: [ConfigValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .list(list)
        }
        while true {
            list.append(try parseValue())
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","):
                let comma = position
                position += 1
                skipWhitespace()
                if peek() == UInt8(ascii: "]") { throw error("a ',' must be followed by another value", at: comma) }
            case UInt8(ascii: "]"):
                position += 1
                depth -= 1
                return .list(list)
            default:
                throw error("expected ',' or ']' after a list element")
            }
        }
    }

    private mutating func parseString() throws(ManifestSyntaxError) -> String {
        let start = position
        position += 1
        var utf8: [UInt8] = []
        while let byte = peek() {
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: utf8, as: UTF8.self) else {
                    throw error("the text is not valid UTF-8", at: start)
                }
                return text
            case UInt8(ascii: "\\"):
                try parseEscape(into: &utf8)
            case 0..<0x20:
                throw error("a control character must be escaped inside a string", at: position - 1)
            default:
                utf8.append(byte)
            }
        }
        throw error("the string is not closed", at: start)
    }

    private mutating func parseEscape(into utf8: inout [UInt8]) throws(ManifestSyntaxError) {
        guard let escape = peek() else { throw error("the string is not closed") }
        position += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0C)
        case UInt8(ascii: "n"): utf8.append(0x0A)
        case UInt8(ascii: "r"): utf8.append(0x0D)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard peek() == UInt8(ascii: "\\"), peek(1) == UInt8(ascii: "u") else {
                    throw error("a \\u surrogate must come in a pair")
                }
                position += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw error("a \\u surrogate must come in a pair") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw error("\\u escape names no character") }
            utf8.append(contentsOf: Array(String(Character(unicode)).utf8))
        default:
            throw error("unknown escape \\\(describe(escape))", at: position - 2)
        }
    }

    private mutating func parseHex4() throws(ManifestSyntaxError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = peek(), let digit = Self.hexValue(byte) else {
                throw error("expected four hex digits after \\u")
            }
            value = value * 16 + digit
            position += 1
        }
        return value
    }

    private static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    private mutating func parseNumber() throws(ManifestSyntaxError) -> ConfigValue {
        let start = position
        var isInteger = true
        if peek() == UInt8(ascii: "-") { position += 1 }
        guard let first = peek(), Self.isDigit(first) else { throw error("expected a digit", at: position) }
        if first == UInt8(ascii: "0") {
            position += 1
            if let next = peek(), Self.isDigit(next) { throw error("a number must not start with 0", at: start) }
        } else {
            skipDigits()
        }
        if peek() == UInt8(ascii: ".") {
            isInteger = false
            position += 1
            guard let next = peek(), Self.isDigit(next) else { throw error("expected a digit after '.'") }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            isInteger = false
            position += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { position += 1 }
            guard let next = peek(), Self.isDigit(next) else { throw error("expected a digit in the exponent") }
            skipDigits()
        }
        let text = String(decoding: bytes[start..<position], as: UTF8.self)
        if isInteger, let integer = Int(text) { return .integer(integer) }
        guard let number = Double(text), number.isFinite else {
            throw error("the number \(text) is out of range", at: start)
        }
        return .number(number)
    }

    private mutating func parseLiteral(_ word: String, _ value: ConfigValue) throws(ManifestSyntaxError) -> ConfigValue
    {
        let expected = Array(word.utf8)
        guard bytes.count - position >= expected.count, Array(bytes[position..<position + expected.count]) == expected
        else {
            throw error("expected a value, found \(describe(bytes[position]))")
        }
        position += expected.count
        return value
    }

    private mutating func enter() throws(ManifestSyntaxError) {
        depth += 1
        guard depth <= Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth) levels") }
    }

    private func peek(_ offset: Int = 0) -> UInt8? {
        position + offset < bytes.count ? bytes[position + offset] : nil
    }

    private mutating func skipWhitespace() {
        while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
    }

    private mutating func skipDigits() {
        while let byte = peek(), Self.isDigit(byte) { position += 1 }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private func describe(_ byte: UInt8) -> String {
        (0x21..<0x7F).contains(byte)
            ? "'\(Character(Unicode.Scalar(byte)))'"
            : "byte 0x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16, uppercase: true)
    }

    /// An error at `offset` (by default the current position), with its line and column.
    private func error(_ problem: String, at offset: Int? = nil) -> ManifestSyntaxError {
        let end = min(offset ?? position, bytes.count)
        var line = 1
        var lineStart = 0
        for index in 0..<end where bytes[index] == 0x0A {
            line += 1
            lineStart = index + 1
        }
        let column = String(decoding: bytes[lineStart..<end], as: UTF8.self).count + 1
        return ManifestSyntaxError("line \(line), column \(column): \(problem)")
    }
}
