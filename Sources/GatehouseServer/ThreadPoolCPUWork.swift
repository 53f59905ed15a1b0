public import GatehouseKernel
public import NIOPosix

/// Runs plugins' CPU-heavy work (OPRF evaluations) on a NIO thread pool, off the cooperative pool
/// that serves requests.
public struct ThreadPoolCPUWork: CPUWorkExecutor {
    public let pool: NIOThreadPool

    public init(pool: NIOThreadPool) { self.pool = pool }

    public func run<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await pool.runIfActive(work)
    }
}
