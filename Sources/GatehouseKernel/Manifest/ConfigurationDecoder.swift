/// Decodes typed configuration from a ``ConfigValue`` tree, with messages a person can act on.
///
/// Beyond a standard decoder it refuses keys that the configuration type never asked for, so a
/// misspelt option fails at start-up instead of being ignored. Errors are ``ConfigurationError``s
/// that name the key path (`blacklist[2]`, `maxLength`) and say what was expected and found.
public struct ConfigurationDecoder: Sendable {
    /// Whether keys the type never asked for are ignored instead of refused (OAuth endpoints
    /// must ignore parameters they do not know, RFC 6749 §3.1).
    public var ignoresUnknownKeys: Bool

    /// Makes a decoder; it refuses unknown keys unless `ignoresUnknownKeys` is `true`.
    public init(ignoresUnknownKeys: Bool = false) { self.ignoresUnknownKeys = ignoresUnknownKeys }

    /// Decodes `type` from `value`. `codingPath` prefixes the paths in error messages.
    public func decode<T: Decodable>(_ type: T.Type, from value: ConfigValue) throws(ConfigurationError) -> T {
        try decodeReportingKeys(type, from: value).value
    }

    /// Decodes `type` from `value`, and tells which keys of the top-level object the type asked
    /// about, present or not (what it reads; a plugin's published keys must be among them).
    func decodeReportingKeys<T: Decodable>(
        _ type: T.Type,
        from value: ConfigValue
    ) throws(ConfigurationError) -> (value: T, askedKeys: Set<String>) {
        let tracker = KeyUsageTracker()
        let decoder = TreeDecoder(value: value, codingPath: [], tracker: tracker)
        let result: T
        do {
            result = try T(from: decoder)
        } catch let error as ConfigurationError {
            throw error
        } catch let error as DecodingError {
            throw ConfigurationError(error)
        } catch {
            throw ConfigurationError(path: [], problem: String(describing: error))
        }
        if !ignoresUnknownKeys, let unknown = tracker.firstUnknownKey() { throw unknown }
        return (result, tracker.askedKeys(at: []))
    }
}

/// A problem at one place in a configuration tree.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where the problem is: keys and list indices from the root of the decoded value.
    public var path: [ConfigurationPathComponent]
    /// What is wrong, e.g. `expected an integer, found "ten"`.
    public var problem: String

    /// Makes the error.
    public init(path: [ConfigurationPathComponent], problem: String) {
        self.path = path
        self.problem = problem
    }

    init(_ error: DecodingError) {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            self.init(path: context.codingPath.map(ConfigurationPathComponent.init), problem: context.debugDescription)
        case .keyNotFound(let key, let context):
            self.init(
                path: (context.codingPath + [key]).map(ConfigurationPathComponent.init),
                problem: "required key is missing"
            )
        @unknown default:
            self.init(path: [], problem: String(describing: error))
        }
    }

    /// The path as written in a message: `config.blacklist[2]`.
    public var renderedPath: String { ConfigurationPathComponent.render(path) }

    /// The path and the problem, e.g. `blacklist[2]: expected a string, found 12`; the problem
    /// alone at the root.
    public var description: String { path.isEmpty ? problem : "\(renderedPath): \(problem)" }
}

/// One step in a configuration path: an object key or a list index.
public enum ConfigurationPathComponent: Sendable, Hashable {
    case key(String)
    case index(Int)

    init(_ key: any CodingKey) {
        if let index = key.intValue, key.stringValue.hasPrefix("Index ") || key.stringValue == String(index) {
            self = .index(index)
        } else {
            self = .key(key.stringValue)
        }
    }

    static func render(_ path: [ConfigurationPathComponent]) -> String {
        var text = ""
        for component in path {
            switch component {
            case .key(let key): text += text.isEmpty ? key : ".\(key)"
            case .index(let index): text += "[\(index)]"
            }
        }
        return text
    }
}

// MARK: - Key usage

/// Records, for every object the configuration type opened as a keyed container, which keys it
/// asked about, so keys nobody asked about can be reported. Used from one decode call only.
private final class KeyUsageTracker {
    private struct Object {
        var path: [any CodingKey]
        var keys: Set<String>
        var used: Set<String> = []
    }
    private var objects: [String: Object] = [:]

    func register(path: [any CodingKey], keys: Set<String>) {
        let id = Self.id(path)
        if objects[id] == nil { objects[id] = Object(path: path, keys: keys) }
    }

    func markUsed(_ key: String, at path: [any CodingKey]) {
        objects[Self.id(path)]?.used.insert(key)
    }

    /// The keys asked about in the object at `path`.
    func askedKeys(at path: [any CodingKey]) -> Set<String> { objects[Self.id(path)]?.used ?? [] }

    func firstUnknownKey() -> ConfigurationError? {
        for id in objects.keys.sorted() {
            guard let object = objects[id] else { continue }
            let unknown = object.keys.subtracting(object.used).sorted()
            guard let first = unknown.first else { continue }
            let path = object.path.map(ConfigurationPathComponent.init) + [.key(first)]
            let expected = object.used.sorted().joined(separator: ", ")
            return ConfigurationError(
                path: path,
                problem: expected.isEmpty
                    ? "unknown key; no keys are allowed here" : "unknown key; expected one of: \(expected)"
            )
        }
        return nil
    }

    private static func id(_ path: [any CodingKey]) -> String {
        ConfigurationPathComponent.render(path.map(ConfigurationPathComponent.init))
    }
}

// MARK: - Decoder

private struct IndexKey: CodingKey {
    let intValue: Int?
    let stringValue: String
    init(_ index: Int) {
        self.intValue = index
        self.stringValue = "Index \(index)"
    }
    init?(intValue: Int) { self.init(intValue) }
    init?(stringValue: String) { nil }
}

private struct TreeDecoder: Decoder {
    let value: ConfigValue
    let codingPath: [any CodingKey]
    let tracker: KeyUsageTracker
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else {
            throw mismatch(expected: "an object", path: codingPath, found: value)
        }
        tracker.register(path: codingPath, keys: Set(object.keys))
        return KeyedDecodingContainer(KeyedTreeContainer<Key>(object: object, codingPath: codingPath, tracker: tracker))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .list(let list) = value else {
            throw mismatch(expected: "a list", path: codingPath, found: value)
        }
        return UnkeyedTreeContainer(list: list, codingPath: codingPath, tracker: tracker)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleTreeContainer(value: value, codingPath: codingPath, tracker: tracker)
    }
}

private func mismatch(expected: String, path: [any CodingKey], found: ConfigValue) -> DecodingError {
    DecodingError.typeMismatch(
        Any.self,
        DecodingError.Context(
            codingPath: path,
            debugDescription: "expected \(expected), found \(found.renderedForMessage)"
        )
    )
}

/// Decodes one scalar or nested value; shared by the three container kinds.
private func decodeValue<T: Decodable>(
    _ type: T.Type,
    from value: ConfigValue,
    path: [any CodingKey],
    tracker: KeyUsageTracker
) throws -> T {
    let scalar: Any
    switch type {
    case is Bool.Type:
        guard case .bool(let bool) = value else { throw mismatch(expected: "true or false", path: path, found: value) }
        scalar = bool
    case is String.Type:
        guard case .string(let string) = value else { throw mismatch(expected: "a string", path: path, found: value) }
        scalar = string
    case is Double.Type:
        scalar = try decodeFloatingPoint(from: value, path: path)
    case is Float.Type:
        scalar = Float(try decodeFloatingPoint(from: value, path: path))
    case let integer as any FixedWidthInteger.Type:
        scalar = try decodeInteger(integer, from: value, path: path)
    default:
        return try T(from: TreeDecoder(value: value, codingPath: path, tracker: tracker))
    }
    guard let typed = scalar as? T else {
        throw DecodingError.typeMismatch(
            T.self,
            DecodingError.Context(codingPath: path, debugDescription: "unsupported type \(T.self)")
        )
    }
    return typed
}

private func decodeFloatingPoint(from value: ConfigValue, path: [any CodingKey]) throws -> Double {
    switch value {
    case .number(let number): return number
    case .integer(let integer): return Double(integer)
    default: throw mismatch(expected: "a number", path: path, found: value)
    }
}

private func decodeInteger<I: FixedWidthInteger>(
    _ type: I.Type,
    from value: ConfigValue,
    path: [any CodingKey]
) throws -> I {
    guard case .integer(let integer) = value else { throw mismatch(expected: "an integer", path: path, found: value) }
    guard let exact = I(exactly: integer) else {
        throw DecodingError.dataCorrupted(
            DecodingError.Context(
                codingPath: path,
                debugDescription: "expected an integer from \(I.min) to \(I.max), found \(integer)"
            )
        )
    }
    return exact
}

private struct KeyedTreeContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: [String: ConfigValue]
    let codingPath: [any CodingKey]
    let tracker: KeyUsageTracker

    var allKeys: [Key] { object.keys.sorted().compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool {
        tracker.markUsed(key.stringValue, at: codingPath)
        return object[key.stringValue] != nil
    }

    private func value(for key: Key) throws -> ConfigValue {
        tracker.markUsed(key.stringValue, at: codingPath)
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key,
                DecodingError.Context(codingPath: codingPath, debugDescription: "required key is missing")
            )
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        tracker.markUsed(key.stringValue, at: codingPath)
        guard let value = object[key.stringValue] else { return true }
        return value == .null
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let value = try value(for: key)
        if value == .null {
            throw DecodingError.valueNotFound(
                type,
                DecodingError.Context(
                    codingPath: codingPath + [key],
                    debugDescription: "a value is required, found null"
                )
            )
        }
        return try decodeValue(type, from: value, path: codingPath + [key], tracker: tracker)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type,
        forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try TreeDecoder(value: value(for: key), codingPath: codingPath + [key], tracker: tracker).container(
            keyedBy: type
        )
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try TreeDecoder(value: value(for: key), codingPath: codingPath + [key], tracker: tracker).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        TreeDecoder(value: .object(object), codingPath: codingPath, tracker: tracker)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        TreeDecoder(value: try value(for: key), codingPath: codingPath + [key], tracker: tracker)
    }
}

private struct UnkeyedTreeContainer: UnkeyedDecodingContainer {
    let list: [ConfigValue]
    let codingPath: [any CodingKey]
    let tracker: KeyUsageTracker
    var currentIndex = 0

    init(list: [ConfigValue], codingPath: [any CodingKey], tracker: KeyUsageTracker) {
        self.list = list
        self.codingPath = codingPath
        self.tracker = tracker
    }

    var count: Int? { list.count }
    var isAtEnd: Bool { currentIndex >= list.count }

    private mutating func next() throws -> (ConfigValue, [any CodingKey]) {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self,
                DecodingError.Context(codingPath: codingPath, debugDescription: "the list has too few elements")
            )
        }
        defer { currentIndex += 1 }
        return (list[currentIndex], codingPath + [IndexKey(currentIndex)])
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, list[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (value, path) = try next()
        return try decodeValue(type, from: value, path: path, tracker: tracker)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let (value, path) = try next()
        return try TreeDecoder(value: value, codingPath: path, tracker: tracker).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let (value, path) = try next()
        return try TreeDecoder(value: value, codingPath: path, tracker: tracker).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let (value, path) = try next()
        return TreeDecoder(value: value, codingPath: path, tracker: tracker)
    }
}

private struct SingleTreeContainer: SingleValueDecodingContainer {
    let value: ConfigValue
    let codingPath: [any CodingKey]
    let tracker: KeyUsageTracker

    func decodeNil() -> Bool { value == .null }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try decodeValue(type, from: value, path: codingPath, tracker: tracker)
    }
}
