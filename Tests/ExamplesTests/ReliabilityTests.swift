import Foundation
import Testing

@Suite("The reliability suite against gatehouse serve")
struct ReliabilityTests {
    @Test("30 trials that kill the server or a device mid-command leave nothing corrupt, half-written or lost")
    func thirtyTrials() async throws {
        let reliability = try Session(
            ["--trials", "30", "--gatehouse", try binary("gatehouse").path],
            binary: packageRoot.appendingPathComponent("scripts/reliability").path
        )
        // About 20 s alone; far longer when the other tests share the machine.
        let status = try await reliability.finish(within: .seconds(300))
        let output = reliability.output.withLock { $0 }
        #expect(status == 0, "\(output) \(reliability.errors.withLock { $0 })")
        #expect(output.contains("Summary: 30 trials in "), "\(output)")
        let noFailures = "0 integrity failures, 0 half-written rows, 0 lost acknowledged writes, 0 other failures"
        #expect(output.contains(noFailures), "\(output)")
    }
}

extension Session {
    /// Waits (at most `limit`) for the process to end and returns its status; one still running
    /// then is terminated. For commands that take longer than ``finish()`` waits.
    func finish(within limit: Duration) async throws -> Int32 {
        try? input.fileHandleForWriting.close()
        let deadline = ContinuousClock.now + limit
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }
}
