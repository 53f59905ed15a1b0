import Dispatch

/// Runs CPU-heavy work (an OPRF evaluation, a key derivation) where it does not hold up the
/// cooperative thread pool. The token server hands plugins one backed by its thread pool; the
/// default runs the work on Dispatch's global queue.
public protocol CPUWorkExecutor: Sendable {
    /// Runs `work` off the cooperative thread pool and returns its result or rethrows its error.
    func run<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result
}

/// Runs the work on Dispatch's global concurrent queue, whose threads are not the cooperative
/// pool's: a password hash or an OPRF evaluation in flight leaves every task free to run, so an
/// embedding app's own requests (or an in-process peer's) are not held up behind it. The default
/// of ``PluginEnvironment``; it costs a thread hop per piece of work.
public struct DispatchCPUWorkExecutor: CPUWorkExecutor {
    /// Makes the executor.
    public init() {}

    /// Runs `work` on a global-queue thread and returns its result or rethrows its error.
    public func run<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(with: Swift.Result { try work() })
            }
        }
    }
}

/// Runs the work on the calling task: it holds one of the cooperative pool's threads (as many
/// as there are cores) until it ends. For a caller that does nothing else meanwhile, a command
/// or a device, say.
public struct InlineCPUWorkExecutor: CPUWorkExecutor {
    /// Makes the executor.
    public init() {}

    /// Runs `work` on the calling task and returns its result.
    public func run<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
        try work()
    }
}
