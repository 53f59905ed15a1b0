/// A CBOR item for the tests to encode (RFC 8949): the test authenticator's output, and inputs
/// the decoder must refuse.
indirect enum CBORItem {
    case unsigned(UInt64)
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORItem])
    case map([(CBORItem, CBORItem)])
    case boolean(Bool)
    case null
    /// Bytes written as they are: for encodings the decoder must refuse.
    case raw([UInt8])

    static func int(_ value: Int) -> CBORItem {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }

    /// The item's encoding: shortest arguments, definite lengths, map entries in the given order.
    var encoded: [UInt8] {
        switch self {
        case .unsigned(let value): return Self.head(0, value)
        case .negative(let value): return Self.head(1, value)
        case .bytes(let bytes): return Self.head(2, UInt64(bytes.count)) + bytes
        case .text(let text): return Self.head(3, UInt64(text.utf8.count)) + Array(text.utf8)
        case .array(let items): return Self.head(4, UInt64(items.count)) + items.flatMap(\.encoded)
        case .map(let entries):
            return Self.head(5, UInt64(entries.count)) + entries.flatMap { $0.0.encoded + $0.1.encoded }
        case .boolean(let value): return [value ? 0xF5 : 0xF4]
        case .null: return [0xF6]
        case .raw(let bytes): return bytes
        }
    }

    /// The initial byte and argument of an item of major type `major`.
    static func head(_ major: UInt8, _ argument: UInt64) -> [UInt8] {
        let type = major << 5
        switch argument {
        case 0..<24: return [type | UInt8(argument)]
        case 24...0xFF: return [type | 24, UInt8(argument)]
        case 0x100...0xFFFF: return [type | 25] + bigEndian(argument, count: 2)
        case 0x10000...0xFFFF_FFFF: return [type | 26] + bigEndian(argument, count: 4)
        default: return [type | 27] + bigEndian(argument, count: 8)
        }
    }

    static func bigEndian(_ value: UInt64, count: Int) -> [UInt8] {
        (0..<count).reversed().map { UInt8(truncatingIfNeeded: value >> (UInt64($0) * 8)) }
    }
}
