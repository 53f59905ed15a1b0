/// A config manifest: which plugins to load, with each one's configuration.
///
/// ```yaml
/// validators:
///   - id: email
///     type: xignin.email
///   - id: alias
///     type: xignin.alias
///     config: { minLength: 2, maxLength: 40 }
/// authenticators: []
/// identityProviders: []
/// ```
///
/// Each section lists entries `{id, type, config, name}`: `id` is unique in the whole manifest,
/// `type` names a registered plugin type, `config` is that type's configuration (defaults apply
/// to what is left out) and `name` is an optional display name. The same schema reads from JSON
/// and YAML. Hosts may allow further top-level sections (the token server's `server`, say) and
/// decode them with ``section(_:as:)``.
public struct Manifest: Sendable, Hashable {
    /// One plugin entry.
    public struct Entry: Sendable, Hashable {
        /// Which section the entry is in: authenticator, identity provider or validator.
        public var kind: PluginKind
        /// The position in its section, for messages.
        public var index: Int
        /// The entry's `id`, unique in the manifest: flows, other entries and apps name the plugin
        /// by it.
        public var id: String
        /// The entry's `type`: the registered plugin type that builds it.
        public var type: PluginTypeIdentifier
        /// The entry's display name, `name`; `nil` when the manifest gives none and the id is
        /// shown.
        public var name: String?
        /// The entry's `config`; an empty object when the entry has none.
        public var configuration: ConfigValue

        /// How messages name the entry: `validators[1] (id "alias")`.
        public var location: String { "\(kind.manifestSection)[\(index)] (id \(quoted(id)))" }
    }

    /// Where the manifest came from, as used in messages.
    public let source: String
    /// Every entry, section by section, in file order.
    public let entries: [Entry]
    /// Top-level sections other than the plugin sections, as allowed by the host.
    public let sections: [String: ConfigValue]

    /// Reads a manifest from a parsed tree.
    /// - Parameters:
    ///   - value: The parsed file.
    ///   - source: Names the file in messages.
    ///   - additionalSections: Top-level keys the host understands besides the plugin sections.
    public init(_ value: ConfigValue, source: String, additionalSections: Set<String> = []) throws(ManifestError) {
        self.source = source
        let pluginSections = PluginKind.allCases.map(\.manifestSection)
        let allowed = (pluginSections + additionalSections).sorted()
        guard case .object(let top) = value else {
            if value == .null { throw ManifestError(source: source, problem: Self.emptyProblem(allowed)) }
            throw ManifestError(
                source: source,
                problem:
                    "expected an object with the sections \(allowed.joined(separator: ", ")); found \(value.renderedForMessage)"
            )
        }
        if top.isEmpty { throw ManifestError(source: source, problem: Self.emptyProblem(allowed)) }
        if let unknown = top.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw ManifestError(
                source: source,
                path: unknown,
                problem: "unknown section; expected one of: \(allowed.joined(separator: ", "))"
            )
        }

        var entries: [Entry] = []
        var firstUse: [String: String] = [:]
        for kind in PluginKind.allCases {
            guard let section = top[kind.manifestSection], section != .null else { continue }
            guard case .list(let items) = section else {
                throw ManifestError(
                    source: source,
                    path: kind.manifestSection,
                    problem: "expected a list of entries, found \(section.renderedForMessage)"
                )
            }
            for (index, item) in items.enumerated() {
                let entry = try Self.entry(item, kind: kind, index: index, source: source)
                if let earlier = firstUse[entry.id] {
                    throw ManifestError(
                        source: source,
                        entry: entry.location,
                        path: "id",
                        problem: "duplicate id; \(earlier) already uses it"
                    )
                }
                firstUse[entry.id] = "\(kind.manifestSection)[\(index)]"
                entries.append(entry)
            }
        }
        self.entries = entries
        self.sections = top.filter { additionalSections.contains($0.key) }
    }

    /// Decodes a host section, such as the token server's settings. An absent section decodes
    /// from an empty object, so its defaults apply.
    public func section<T: Decodable>(_ name: String, as type: T.Type) throws(ManifestError) -> T {
        do {
            return try ConfigurationDecoder().decode(type, from: sections[name] ?? .object([:]))
        } catch {
            throw ManifestError(
                source: source,
                path: ConfigurationPathComponent.render([.key(name)] + error.path),
                problem: error.problem
            )
        }
    }

    /// The entries of one kind, in file order.
    public func entries(of kind: PluginKind) -> [Entry] { entries.filter { $0.kind == kind } }

    private static func emptyProblem(_ allowed: [String]) -> String {
        "the manifest is empty; it needs at least one of the sections \(allowed.joined(separator: ", "))"
    }

    private static let entryKeys = ["config", "id", "name", "type"]

    private static func entry(
        _ item: ConfigValue,
        kind: PluginKind,
        index: Int,
        source: String
    ) throws(ManifestError) -> Entry {
        let position = "\(kind.manifestSection)[\(index)]"
        guard case .object(let fields) = item else {
            throw ManifestError(
                source: source,
                entry: position,
                problem:
                    "expected an object with the keys \(entryKeys.joined(separator: ", ")), found \(item.renderedForMessage)"
            )
        }
        guard let idValue = fields["id"] else {
            throw ManifestError(source: source, entry: position, path: "id", problem: "required key is missing")
        }
        guard case .string(let id) = idValue else {
            throw ManifestError(
                source: source,
                entry: position,
                path: "id",
                problem: "expected a string, found \(idValue.renderedForMessage)"
            )
        }
        guard Self.isValidID(id) else {
            throw ManifestError(
                source: source,
                entry: position,
                path: "id",
                problem: "expected 1 to 64 letters, digits, \".\", \"-\" or \"_\", found \(quoted(id))"
            )
        }
        let location = "\(position) (id \(quoted(id)))"
        if let unknown = fields.keys.sorted().first(where: { !entryKeys.contains($0) }) {
            throw ManifestError(
                source: source,
                entry: location,
                path: unknown,
                problem: "unknown key; expected one of: \(entryKeys.joined(separator: ", "))"
            )
        }
        guard let typeValue = fields["type"] else {
            throw ManifestError(source: source, entry: location, path: "type", problem: "required key is missing")
        }
        guard case .string(let type) = typeValue, !type.isEmpty else {
            throw ManifestError(
                source: source,
                entry: location,
                path: "type",
                problem: "expected a plugin type name, found \(typeValue.renderedForMessage)"
            )
        }
        var name: String?
        if let nameValue = fields["name"], nameValue != .null {
            guard case .string(let text) = nameValue else {
                throw ManifestError(
                    source: source,
                    entry: location,
                    path: "name",
                    problem: "expected a string, found \(nameValue.renderedForMessage)"
                )
            }
            name = text
        }
        let configuration = fields["config"] ?? .null
        switch configuration {
        case .object: break
        case .null: break
        default:
            throw ManifestError(
                source: source,
                entry: location,
                path: "config",
                problem: "expected an object, found \(configuration.renderedForMessage)"
            )
        }
        return Entry(
            kind: kind,
            index: index,
            id: id,
            type: PluginTypeIdentifier(type),
            name: name,
            configuration: configuration == .null ? .object([:]) : configuration
        )
    }

    private static func isValidID(_ id: String) -> Bool {
        guard (1...64).contains(id.utf8.count) else { return false }
        return id.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII
                && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                    || "._-".unicodeScalars.contains(scalar))
        }
    }
}
