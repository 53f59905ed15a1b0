import Foundation
import GatehouseKernel
import Synchronization
import Testing

@Suite("CPU-heavy work")
struct CPUWorkTests {
    /// Who let the blocked work go: the probe task (the cooperative pool was free to run it) or
    /// the watchdog (nothing else could run, as with work done inline).
    enum Opener: Sendable, Equatable { case probe, watchdog }

    @Test("the default executor leaves the cooperative pool free while its work blocks")
    func defaultLeavesCooperativePoolFree() async throws {
        #expect(try await opener(of: PluginEnvironment().cpuWork) == .probe)
    }

    /// Runs as many pieces of work as the cooperative pool has threads, each waiting on a gate,
    /// and a task that opens the gate once all have started. A watchdog thread opens it 30 s
    /// after all have started, so an executor that blocks the pool (`InlineCPUWorkExecutor`
    /// answers `.watchdog`) fails instead of hanging.
    ///
    /// The watchdog's clock starts only once every piece is blocking: on a loaded machine the
    /// executor's queue may hold other tests' work for a while first, which says nothing about
    /// the pool. If the pieces never all start (an executor narrower than the pool), it gives
    /// up after 5 minutes.
    private func opener(of cpuWork: some CPUWorkExecutor) async throws -> Opener {
        let trial = Trial(width: ProcessInfo.processInfo.activeProcessorCount)
        Thread.detachNewThread {
            let giveUp = Date(timeIntervalSinceNow: 300)
            while trial.started.load(ordering: .sequentiallyConsistent) < trial.width, Date() < giveUp {
                Thread.sleep(forTimeInterval: 0.01)
            }
            let deadline = Date(timeIntervalSinceNow: 30)
            while trial.opener == nil, Date() < deadline {
                Thread.sleep(forTimeInterval: 0.01)
            }
            trial.open(.watchdog)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<trial.width {
                group.addTask {
                    try await cpuWork.run {
                        trial.started.add(1, ordering: .sequentiallyConsistent)
                        trial.gate.wait()
                    }
                }
            }
            group.addTask {
                while trial.started.load(ordering: .sequentiallyConsistent) < trial.width, trial.opener == nil {
                    try await Task.sleep(for: .milliseconds(5))
                }
                trial.open(.probe)
            }
            try await group.waitForAll()
        }
        return try #require(trial.opener)
    }

    private final class Trial: Sendable {
        let width: Int
        let gate = DispatchSemaphore(value: 0)
        let started = Atomic<Int>(0)
        private let openedBy = Mutex<Opener?>(nil)

        init(width: Int) { self.width = width }

        var opener: Opener? { openedBy.withLock { $0 } }

        /// Lets every blocked piece of work go, once: the first caller is the one recorded.
        func open(_ who: Opener) {
            let first = openedBy.withLock { opener in
                defer { if opener == nil { opener = who } }
                return opener == nil
            }
            if first { for _ in 0..<width { gate.signal() } }
        }
    }
}
