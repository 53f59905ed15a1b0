public import Foundation

/// A file format a manifest can be written in.
public protocol ManifestFormat: Sendable {
    /// The format's name for messages, e.g. `"JSON"`.
    var name: String { get }
    /// File extensions, lowercase and without the dot, e.g. `["yaml", "yml"]`.
    var fileExtensions: [String] { get }
    /// Parses a whole file. Throws ``ManifestSyntaxError`` for malformed input; returns `.null`
    /// for a file with no content.
    func parse(_ data: Data) throws(ManifestSyntaxError) -> ConfigValue
}

/// Malformed input, described in one line (with the line and column where the parser knows them).
public struct ManifestSyntaxError: Error, Sendable, Equatable {
    /// What is malformed, e.g. `line 3, column 7: expected ':'`.
    public var problem: String
    /// Makes the error from its one-line description.
    public init(_ problem: String) { self.problem = problem }
}

/// Reads manifests from files, choosing the format by file extension.
public struct ManifestLoader: Sendable {
    /// The formats the loader reads, tried by file extension in this order.
    public let formats: [any ManifestFormat]

    /// A loader for the given formats; JSON by default. Add YAML with `GatehouseYAML`.
    public init(formats: [any ManifestFormat] = [JSONManifestFormat()]) { self.formats = formats }

    /// Loads the manifest at `path`; messages name the file as `path` is written.
    public func load(path: String, additionalSections: Set<String> = []) throws(ManifestError) -> Manifest {
        let url = URL(fileURLWithPath: path)
        let fileExtension = url.pathExtension.lowercased()
        guard let format = formats.first(where: { $0.fileExtensions.contains(fileExtension) }) else {
            let known = formats.flatMap(\.fileExtensions).map { ".\($0)" }.joined(separator: ", ")
            let found = fileExtension.isEmpty ? "no file extension" : "\".\(fileExtension)\""
            throw ManifestError(source: path, problem: "unsupported manifest format (\(found)); use \(known)")
        }
        let data = try read(path)
        return try parse(data, format: format, source: path, additionalSections: additionalSections)
    }

    /// Parses manifest text in `format`; `source` names it in messages.
    public func parse(
        _ data: Data,
        format: any ManifestFormat,
        source: String,
        additionalSections: Set<String> = []
    ) throws(ManifestError) -> Manifest {
        let value: ConfigValue
        do {
            value = try format.parse(data)
        } catch {
            throw ManifestError(source: source, problem: "not valid \(format.name): \(error.problem)")
        }
        return try Manifest(value, source: source, additionalSections: additionalSections)
    }

    private func read(_ path: String) throws(ManifestError) -> Data {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ManifestError(source: path, problem: "cannot read the manifest: no such file")
        }
        if isDirectory.boolValue {
            throw ManifestError(source: path, problem: "cannot read the manifest: it is a directory")
        }
        guard FileManager.default.isReadableFile(atPath: path), let data = FileManager.default.contents(atPath: path)
        else {
            throw ManifestError(source: path, problem: "cannot read the manifest: permission denied")
        }
        return data
    }
}

/// JSON manifests.
public struct JSONManifestFormat: ManifestFormat {
    /// Makes the format.
    public init() {}

    /// `"JSON"`.
    public var name: String { "JSON" }
    /// `["json"]`.
    public var fileExtensions: [String] { ["json"] }

    /// Parses JSON text into a tree; throws with the line and column of the first error.
    public func parse(_ data: Data) throws(ManifestSyntaxError) -> ConfigValue {
        try JSONParser.parse(Array(data))
    }
}
