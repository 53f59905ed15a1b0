/// A parsed configuration tree, the same whichever file format it came from.
///
/// JSON and YAML manifests both parse into this tree, and ``ConfigurationDecoder`` decodes
/// typed configuration from it, so both formats share one schema and one set of error messages.
public enum ConfigValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int)
    case number(Double)
    case string(String)
    case list([ConfigValue])
    case object([String: ConfigValue])

    /// How the value is described in "found …": strings quoted, scalars as written, containers by kind.
    public var renderedForMessage: String {
        switch self {
        case .null: "null"
        case .bool(let value): value ? "true" : "false"
        case .integer(let value): String(value)
        case .number(let value): String(value)
        case .string(let value): quoted(value)
        case .list: "a list"
        case .object: "an object"
        }
    }

    /// The value's kind, as a noun phrase: "an integer", "a list"…
    public var kindDescription: String {
        switch self {
        case .null: "null"
        case .bool: "true or false"
        case .integer: "an integer"
        case .number: "a number"
        case .string: "a string"
        case .list: "a list"
        case .object: "an object"
        }
    }
}

/// Literals, so configuration can be written inline in code and tests.
extension ConfigValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByFloatLiteral
{
    /// A string, from `"text"`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer, from `42`.
    public init(integerLiteral value: Int) { self = .integer(value) }
    /// True or false, from `true`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// A number, from `1.5`.
    public init(floatLiteral value: Double) { self = .number(value) }
    /// A list, from `[1, "two"]`.
    public init(arrayLiteral elements: ConfigValue...) { self = .list(elements) }
    /// An object, from `["key": "value"]`; of two equal keys the first is kept.
    public init(dictionaryLiteral elements: (String, ConfigValue)...) {
        self = .object(Dictionary(elements) { first, _ in first })
    }
}

/// Quotes a string for a message the way JSON would, so empty strings and spaces stay visible.
func quoted(_ text: String) -> String {
    var result = "\""
    for character in text {
        switch character {
        case "\"": result += "\\\""
        case "\\": result += "\\\\"
        case "\n": result += "\\n"
        case "\t": result += "\\t"
        default: result.append(character)
        }
    }
    return result + "\""
}

/// JSON's form of a value, so configuration can travel on the wire (the server publishes its
/// plugins' public configuration).
extension ConfigValue: Codable {
    /// Reads any JSON value: `null`, a boolean, an integer (before a number), a number, a string, a
    /// list or an object.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([ConfigValue].self) {
            self = .list(value)
        } else {
            self = .object(try container.decode([String: ConfigValue].self))
        }
    }

    /// Writes the value as JSON writes it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .list(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}
