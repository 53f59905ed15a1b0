/// Runs CPU-heavy work (an OPRF evaluation, a key derivation) where it does not hold up the
/// cooperative thread pool. The token server hands plugins one backed by a thread pool; the
/// default runs the work in place, which suits a client.
public protocol CPUWorkExecutor: Sendable {
    /// Runs `work` off the cooperative thread pool and returns its result or rethrows its error.
    func run<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result
}

/// Runs the work on the calling task.
public struct InlineCPUWorkExecutor: CPUWorkExecutor {
    /// Makes the executor.
    public init() {}

    /// Runs `work` on the calling task and returns its result.
    public func run<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
        try work()
    }
}
