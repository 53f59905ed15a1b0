/// A decoded CBOR data item (RFC 8949), limited to what WebAuthn's structures use: integers, byte
/// and text strings, arrays, maps with integer or text keys, booleans, null and undefined.
enum CBOR: Sendable, Hashable {
    /// An unsigned integer (major type 0).
    case unsigned(UInt64)
    /// A negative integer −1 − n (major type 1), holding n.
    case negative(UInt64)
    /// A byte string (major type 2).
    case bytes([UInt8])
    /// A UTF-8 text string (major type 3).
    case text(String)
    /// An array (major type 4).
    case array([CBOR])
    /// A map (major type 5) in the order of the encoding, keys unique.
    case map([CBORMapEntry])
    /// `false` or `true`.
    case boolean(Bool)
    /// `null`.
    case null
    /// `undefined`.
    case undefined

    /// The integer this item is, if it is one that fits an `Int`.
    var integer: Int? {
        switch self {
        case .unsigned(let value): return value <= UInt64(Int.max) ? Int(value) : nil
        case .negative(let value): return value <= UInt64(Int.max) ? -1 - Int(value) : nil
        default: return nil
        }
    }

    /// The value for the integer key `key` if this item is a map that has it.
    subscript(key: Int) -> CBOR? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key.integer == key }?.value
    }

    /// The value for the text key `key` if this item is a map that has it.
    subscript(key: String) -> CBOR? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == .text(key) }?.value
    }
}

/// One key and value of a CBOR map.
struct CBORMapEntry: Sendable, Hashable {
    /// The key: an integer or a text string.
    var key: CBOR
    /// The value.
    var value: CBOR
}

/// A strict, bounded CBOR decoder: definite lengths only, the shortest encoding of every argument,
/// no tags and no floating-point values, map keys that are integers or text strings and unique,
/// UTF-8 checked, nesting at most ``maximumDepth`` deep. Lengths are checked against the bytes that
/// are left before anything is allocated, so no input makes it allocate more than its own size
/// (times a small factor) or recurse without bound.
struct CBORDecoder {
    /// How deeply arrays and maps may nest.
    static let maximumDepth = 16

    private let bytes: [UInt8]
    private var position: Int
    private let end: Int

    private init(bytes: [UInt8], start: Int, end: Int) {
        self.bytes = bytes
        self.position = start
        self.end = end
    }

    /// Decodes the single data item `bytes` holds; trailing bytes are refused.
    static func decode(_ bytes: some Collection<UInt8>) throws(WebAuthnError) -> CBOR {
        let array = Array(bytes)
        let (item, length) = try decodePrefix(array, from: 0)
        guard length == array.count else {
            throw .malformed("\(array.count - length) bytes after the CBOR item")
        }
        return item
    }

    /// Decodes the data item at the start of `bytes[start...]` and returns it with its encoded length.
    static func decodePrefix(_ bytes: [UInt8], from start: Int) throws(WebAuthnError) -> (CBOR, Int) {
        guard start >= 0, start <= bytes.count else { throw .malformed("CBOR item out of range") }
        var decoder = CBORDecoder(bytes: bytes, start: start, end: bytes.count)
        let item = try decoder.item(depth: 0)
        return (item, decoder.position - start)
    }

    private var remaining: Int { end - position }

    private mutating func byte() throws(WebAuthnError) -> UInt8 {
        guard position < end else { throw .malformed("CBOR ends early") }
        defer { position += 1 }
        return bytes[position]
    }

    private mutating func take(_ count: Int) throws(WebAuthnError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw .malformed("CBOR length exceeds the input") }
        defer { position += count }
        return bytes[position..<position + count]
    }

    /// The argument that follows an initial byte with additional information `info`, in its
    /// shortest form.
    private mutating func argument(_ info: UInt8) throws(WebAuthnError) -> UInt64 {
        switch info {
        case 0..<24:
            return UInt64(info)
        case 24:
            let value = UInt64(try byte())
            guard value >= 24 else { throw .malformed("CBOR argument not in its shortest form") }
            return value
        case 25, 26, 27:
            let count = 1 << Int(info - 24)
            var value: UInt64 = 0
            for byte in try take(count) { value = value << 8 | UInt64(byte) }
            guard value >> (count * 4) != 0 else { throw .malformed("CBOR argument not in its shortest form") }
            return value
        case 31:
            throw .malformed("CBOR indefinite lengths are not allowed")
        default:
            throw .malformed("CBOR additional information \(info) is reserved")
        }
    }

    /// A length argument that fits in what is left of the input, at `unit` bytes an element.
    private mutating func length(_ info: UInt8, unit: Int) throws(WebAuthnError) -> Int {
        let value = try argument(info)
        guard value <= UInt64(remaining / unit) else { throw .malformed("CBOR length exceeds the input") }
        return Int(value)
    }

    private mutating func item(depth: Int) throws(WebAuthnError) -> CBOR {
        let initial = try byte()
        let major = initial >> 5
        let info = initial & 0x1F
        switch major {
        case 0:
            return .unsigned(try argument(info))
        case 1:
            return .negative(try argument(info))
        case 2:
            let count = try length(info, unit: 1)
            return .bytes(Array(try take(count)))
        case 3:
            let count = try length(info, unit: 1)
            let utf8 = try take(count)
            guard let text = String(validating: utf8, as: UTF8.self) else {
                throw .malformed("CBOR text string is not UTF-8")
            }
            return .text(text)
        case 4:
            guard depth < Self.maximumDepth else { throw .malformed("CBOR nests too deeply") }
            let count = try length(info, unit: 1)
            var elements: [CBOR] = []
            elements.reserveCapacity(count)
            for _ in 0..<count { elements.append(try item(depth: depth + 1)) }
            return .array(elements)
        case 5:
            guard depth < Self.maximumDepth else { throw .malformed("CBOR nests too deeply") }
            let count = try length(info, unit: 2)
            var entries: [CBORMapEntry] = []
            entries.reserveCapacity(count)
            var seen: Set<CBOR> = []
            for _ in 0..<count {
                let key = try item(depth: depth + 1)
                switch key {
                case .unsigned, .negative, .text: break
                default: throw .malformed("CBOR map key is not an integer or a text string")
                }
                guard seen.insert(key).inserted else { throw .malformed("CBOR map has a duplicate key") }
                entries.append(CBORMapEntry(key: key, value: try item(depth: depth + 1)))
            }
            return .map(entries)
        case 6:
            throw .malformed("CBOR tags are not allowed")
        default:
            switch info {
            case 20: return .boolean(false)
            case 21: return .boolean(true)
            case 22: return .null
            case 23: return .undefined
            case 25, 26, 27: throw .malformed("CBOR floating-point values are not allowed")
            case 31: throw .malformed("CBOR break outside an indefinite-length item")
            default: throw .malformed("CBOR simple value \(info) is not allowed")
            }
        }
    }
}
