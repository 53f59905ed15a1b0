/// Why a manifest was refused: one line naming the file, the entry and the key path.
///
/// `app.yaml: validators[1] (id "alias"): config.maxLength: expected an integer, found "ten"`
public struct ManifestError: DomainError, Equatable {
    /// The file (as given) or another name for where the manifest came from.
    public var source: String
    /// The entry, e.g. `validators[1] (id "alias")`; `nil` for file-level problems.
    public var entry: String?
    /// The key path inside the entry or the file, e.g. `config.maxLength`.
    public var path: String?
    /// What is wrong.
    public var problem: String

    public init(source: String, entry: String? = nil, path: String? = nil, problem: String) {
        self.source = source
        self.entry = entry
        self.path = path
        self.problem = problem
    }

    public var message: String { [source, entry, path, problem].compactMap { $0 }.joined(separator: ": ") }
    public var description: String { message }
    public var domainName: String { GenericDomain.name }
    public var codeNumber: Int { GenericError.Code.configurationInvalid.rawValue }
    public var codeName: String { GenericError.Code.configurationInvalid.name }
    public var details: ErrorDetails { ErrorDetails() }
}
