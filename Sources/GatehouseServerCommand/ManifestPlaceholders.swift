import Foundation
package import GatehouseKernel

/// `${publicURL}` in a manifest's values: where clients reach the server, so one manifest serves
/// on any port. It is `server.publicURL` when the manifest sets one, else the address `serve`
/// listens on (`http://HOST:PORT`), else the embedded server's URL in `demo`.
///
/// ```yaml
/// authorizationURL: ${publicURL}/login/authorize
/// webLoginTargets: ["${publicURL}/web/"]
/// ```
package enum ManifestPlaceholders {
    package static let publicURL = "${publicURL}"

    /// Whether any value of `manifest` names a placeholder.
    package static func uses(_ manifest: Manifest) -> Bool {
        manifest.entries.contains { mentions($0.configuration) } || manifest.sections.values.contains(where: mentions)
    }

    /// `manifest` with `${publicURL}` replaced by `server.publicURL`, else by `served`. Any other
    /// `${…}` is refused with the key that holds it.
    package static func resolve(
        _ manifest: Manifest,
        served: String,
        additionalSections: Set<String>
    ) throws -> Manifest {
        let base = configuredPublicURL(manifest) ?? served
        var top: [String: ConfigValue] = [:]
        for (name, value) in manifest.sections {
            top[name] = try replace(value, with: base, source: manifest.source, entry: nil, path: name)
        }
        for kind in PluginKind.allCases {
            let entries = manifest.entries(of: kind).sorted { $0.index < $1.index }
            guard !entries.isEmpty else { continue }
            top[kind.manifestSection] = .list(
                try entries.map { entry in
                    var object: [String: ConfigValue] = [
                        "id": .string(entry.id), "type": .string(entry.type.rawValue),
                        "config": try replace(
                            entry.configuration,
                            with: base,
                            source: manifest.source,
                            entry: entry.location,
                            path: "config"
                        ),
                    ]
                    if let name = entry.name { object["name"] = .string(name) }
                    return .object(object)
                }
            )
        }
        return try Manifest(.object(top), source: manifest.source, additionalSections: additionalSections)
    }

    /// `server.publicURL` as written, without a trailing slash.
    package static func configuredPublicURL(_ manifest: Manifest) -> String? {
        guard case .object(let server) = manifest.sections["server"], case .string(let url) = server["publicURL"]
        else { return nil }
        return url.hasSuffix("/") ? String(url.dropLast()) : url
    }

    private static func mentions(_ value: ConfigValue) -> Bool {
        switch value {
        case .string(let text): return text.contains("${")
        case .list(let items): return items.contains(where: mentions)
        case .object(let object): return object.values.contains(where: mentions)
        default: return false
        }
    }

    private static func replace(
        _ value: ConfigValue,
        with base: String,
        source: String,
        entry: String?,
        path: String
    ) throws -> ConfigValue {
        switch value {
        case .string(let text):
            let replaced = text.replacingOccurrences(of: publicURL, with: base)
            if let start = replaced.range(of: "${") {
                let name = replaced[start.lowerBound...].prefix { $0 != "}" } + "}"
                throw ManifestError(
                    source: source,
                    entry: entry,
                    path: path,
                    problem: "unknown placeholder \"\(name)\"; the only one is \(publicURL)"
                )
            }
            return .string(replaced)
        case .list(let items):
            return .list(
                try items.enumerated().map { index, item in
                    try replace(item, with: base, source: source, entry: entry, path: "\(path)[\(index)]")
                }
            )
        case .object(let object):
            return .object(
                try object.reduce(into: [:]) { result, pair in
                    result[pair.key] = try replace(
                        pair.value,
                        with: base,
                        source: source,
                        entry: entry,
                        path: "\(path).\(pair.key)"
                    )
                }
            )
        default:
            return value
        }
    }
}
