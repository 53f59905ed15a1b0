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

    /// Makes the error; leave `entry` and `path` `nil` when the problem is with the file as a
    /// whole.
    public init(source: String, entry: String? = nil, path: String? = nil, problem: String) {
        self.source = source
        self.entry = entry
        self.path = path
        self.problem = problem
    }

    /// The one line: source, entry, path and problem, joined by `": "`.
    public var message: String { [source, entry, path, problem].compactMap { $0 }.joined(separator: ": ") }
    /// The one line, as ``message``.
    public var description: String { message }
    /// `"Generic"`: a refused manifest is ``GenericError`` `configurationInvalid` to code that
    /// catches by domain.
    public var domainName: String { GenericDomain.name }
    /// 10001, the number of ``GenericError`` `configurationInvalid`.
    public var codeNumber: Int { GenericError.Code.configurationInvalid.rawValue }
    /// `"configurationInvalid"`.
    public var codeName: String { GenericError.Code.configurationInvalid.name }
    /// None: the message says it all.
    public var details: ErrorDetails { ErrorDetails() }
}
