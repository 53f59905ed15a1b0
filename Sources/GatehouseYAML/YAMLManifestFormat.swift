public import Foundation
public import GatehouseKernel
import Yams

/// YAML manifests (`.yaml`, `.yml`), read into the same tree as JSON so both share one schema.
///
/// Scalars take YAML 1.1's core types as resolved by Yams: `10` is an integer, `"10"` a string,
/// `true` a boolean, `~` null. Anchors and aliases are refused: a manifest should read top to bottom.
public struct YAMLManifestFormat: ManifestFormat {
    /// Creates the format, for a `ManifestLoader` beside `JSONManifestFormat`.
    public init() {}

    /// `YAML`, as messages name the format.
    public var name: String { "YAML" }
    /// `yaml` and `yml`: the files this format reads.
    public var fileExtensions: [String] { ["yaml", "yml"] }

    /// Parses a YAML document into the manifest tree; an empty document is `.null`. Throws
    /// `ManifestSyntaxError` for text that is not UTF-8, malformed YAML, an anchor or alias, or a
    /// key that is not a plain name or is given twice.
    public func parse(_ data: Data) throws(ManifestSyntaxError) -> ConfigValue {
        guard let text = String(data: data, encoding: .utf8) else {
            throw ManifestSyntaxError("the file is not UTF-8 text")
        }
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw ManifestSyntaxError(Self.describe(error))
        } catch {
            throw ManifestSyntaxError(String(describing: error))
        }
        guard let node else { return .null }
        return try Self.value(of: node)
    }

    private static func value(of node: Node) throws(ManifestSyntaxError) -> ConfigValue {
        switch node {
        case .scalar(let scalar):
            switch Tag.Name(rawValue: node.tag.rawValue) {
            case .null: return .null
            case .bool: return node.bool.map(ConfigValue.bool) ?? .string(scalar.string)
            case .int:
                return node.int.map(ConfigValue.integer) ?? node.float.map(ConfigValue.number) ?? .string(scalar.string)
            case .float: return node.float.map(ConfigValue.number) ?? .string(scalar.string)
            default: return .string(scalar.string)
            }
        case .sequence(let sequence):
            var list: [ConfigValue] = []
            for element in sequence { list.append(try value(of: element)) }
            return .list(list)
        case .mapping(let mapping):
            var object: [String: ConfigValue] = [:]
            for (key, element) in mapping {
                guard case .scalar(let keyScalar) = key else {
                    throw ManifestSyntaxError("\(position(key))keys must be plain names, not lists or objects")
                }
                if object[keyScalar.string] != nil {
                    throw ManifestSyntaxError("\(position(key))the key \"\(keyScalar.string)\" appears twice")
                }
                object[keyScalar.string] = try value(of: element)
            }
            return .object(object)
        case .alias:
            throw ManifestSyntaxError("\(position(node))anchors and aliases are not supported in manifests")
        }
    }

    private static func position(_ node: Node) -> String {
        node.mark.map { "line \($0.line), column \($0.column): " } ?? ""
    }

    /// One line instead of Yams' multi-line description with a source snippet.
    private static func describe(_ error: YamlError) -> String {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let circumstance = context.map { " (\($0.text) at line \($0.mark.line), column \($0.mark.column))" } ?? ""
            return "line \(mark.line), column \(mark.column): \(problem)\(circumstance)"
        case .duplicatedKeysInMapping(let duplicates, let context):
            let keys = duplicates.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            return "line \(context.mark.line), column \(context.mark.column): duplicate keys \(keys)"
        default:
            return String(describing: error).split(separator: "\n").first.map(String.init) ?? "unreadable YAML"
        }
    }
}

extension ManifestLoader {
    /// A loader for JSON and YAML manifests.
    public static var jsonAndYAML: ManifestLoader {
        ManifestLoader(formats: [JSONManifestFormat(), YAMLManifestFormat()])
    }
}
