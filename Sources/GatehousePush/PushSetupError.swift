/// Why a push sender could not be made: a key file that is missing, open to others, or not a
/// key, or a CA file that is not one. Names the manifest key and the file, and says what to do;
/// never carries key material.
public struct PushSetupError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The manifest key the problem is about, e.g. `server.mobileAuth.push.apns.keyFile`.
    public var key: String
    /// What is wrong and how to fix it, naming the file.
    public var problem: String

    /// A problem with the setting at `key`.
    public init(key: String, problem: String) {
        self.key = key
        self.problem = problem
    }

    /// `key: problem`, one line.
    public var description: String { "\(key): \(problem)" }
}
