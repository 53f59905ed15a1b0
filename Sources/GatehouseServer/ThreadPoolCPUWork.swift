public import GatehouseKernel
public import NIOPosix

/// Runs plugins' CPU-heavy work (OPRF evaluations) on a NIO thread pool, off the cooperative pool
/// that serves requests.
public struct ThreadPoolCPUWork: CPUWorkExecutor {
    /// The thread pool the work runs on; it must be started.
    public let pool: NIOThreadPool

    /// Runs work on `pool`.
    public init(pool: NIOThreadPool) { self.pool = pool }

    /// Runs `work` on the pool and returns its result; throws what it throws, or NIO's error when the pool is not
    /// active.
    public func run<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await pool.runIfActive(work)
    }
}
