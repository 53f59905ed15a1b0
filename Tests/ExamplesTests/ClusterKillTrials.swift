import Foundation
import GatehouseTesting
import Testing

/// The kill trials of `scripts/reliability`, across a cluster (`scripts/cluster-reliability`):
/// a bed of three instances on a primary with a synchronous standby, under the fault suite's
/// mixed load, and trial after trial an instance killed with SIGKILL at a random moment (and
/// started again) or the primary killed and its standby promoted (the lost primary then rebuilt
/// as the new one's standby). After each trial, every registration acknowledged since the start
/// and every push approval acknowledged in the trial is looked up; at the end, the fault
/// suite's checks (nothing twice, the lockout held, sessions whole, refusals retryable).
@Suite(
    "Kill trials across a cluster",
    .serialized,
    .enabled(
        if: clusterKillTrials > 0,
        "run by scripts/cluster-reliability (GATEHOUSE_CLUSTER_TRIALS=N, GATEHOUSE_CLUSTER_SEED=S)"
    )
)
struct ClusterKillTrials {
    static let trials = clusterKillTrials

    @Test("instances killed and primaries failed over at random moments lose no acknowledged write")
    func killTrials() async throws {
        let seed =
            UInt64(ProcessInfo.processInfo.environment["GATEHOUSE_CLUSTER_SEED"] ?? "")
            ?? UInt64.random(in: 1...999_999)
        var random = SeededGenerator(seed: seed)
        print("cluster kill trials: \(Self.trials) trials, seed \(seed)")
        try await ClusterFaultTests.withBed(standby: true) { bed, load in
            var (instanceKills, failovers, lookups, lostTotal) = (0, 0, 0, 0)
            var (registered, approved) = (0, 0)
            var recoveries: [String: [Duration]] = [:]
            for trial in 1...Self.trials {
                let moment = Duration.milliseconds(Int.random(in: 0...1500, using: &random))
                let failover = Int.random(in: 0..<3, using: &random) == 0
                let victim = failover ? try await bed.primary() : "i\(Int.random(in: 1...3, using: &random))"
                var killed = ContinuousClock.now
                try await load.during("trial \(trial): \(victim)\(failover ? " failed over" : " killed")") {
                    try await Task.sleep(for: moment)
                    killed = ContinuousClock.now
                    try await bed.fault("kill", victim)
                    if failover {
                        // What a failover manager takes to decide.
                        try await Task.sleep(for: .seconds(1))
                        try await bed.fault("promote", victim == "db" ? "db2" : "db")
                        // The lost primary back as the new one's synchronous standby, under load.
                        try await bed.fault("rebuild", victim)
                    } else {
                        try await Task.sleep(for: .milliseconds(Int.random(in: 0...1000, using: &random)))
                        try await bed.fault("start", victim)
                    }
                    // The load runs on until every instance serves again, and 4 s more: a
                    // failure however late after the kill is counted.
                    for host in ["i1", "i2", "i3"] { try await bed.waitUntilReady(host) }
                }
                if failover { failovers += 1 } else { instanceKills += 1 }
                let (registrations, approvals, lost) = try await load.checkAcknowledged()
                let (failed, last, lastFailure) = load.failures(since: killed)
                let kind = failover ? "failover" : "instance"
                if let last { recoveries[kind, default: []].append(last) }
                lookups += registrations + approvals
                registered = registrations
                approved += approvals
                lostTotal += lost.count
                print(
                    "trial \(trial): \(victim) killed at \(milliseconds(moment))\(failover ? ", standby promoted" : ""); "
                        + "\(failed) operations failed\(last.map { ", the last \(milliseconds($0)) after the kill" } ?? ""); "
                        + "\(registrations) registrations and \(approvals) approvals checked, \(lost.count) lost"
                        + (lastFailure.map { "\n  the last failure: \($0)" } ?? "")
                )
                #expect(lost.isEmpty, "trial \(trial) lost \(lost)")
            }
            // The answers that were not the work's nor an instance's 503, for the figures: requests
            // an instance had when it was killed (502, or closed: -1), and requests whose client
            // stalled (408 from HAProxy, which never chose an instance).
            let lostAnswers = bed.routed().filter { [408, 502, 504, -1].contains($0.status) }
            print("answers from HAProxy itself: \(lostAnswers.count)")
            for request in lostAnswers.prefix(40) { print("  \(request)") }
            func describe(_ times: [Duration]?) -> String {
                guard let times = times?.sorted(), !times.isEmpty else { return "none failed" }
                return "median \(milliseconds(times[times.count / 2])), max \(milliseconds(times[times.count - 1]))"
            }
            print(
                "cluster kill trials: \(Self.trials) trials (seed \(seed)): \(instanceKills) instance kills, "
                    + "\(failovers) primary failovers; \(registered + approved) acknowledged writes (\(registered) "
                    + "registrations, \(approved) push approvals) checked \(lookups) times in all, \(lostTotal) lost; "
                    + "last failure after an instance kill: \(describe(recoveries["instance"])); "
                    + "after a failover: \(describe(recoveries["failover"]))"
            )
        }
    }
}

private func milliseconds(_ duration: Duration) -> String {
    "\((duration / .milliseconds(1)).rounded()) ms".replacingOccurrences(of: ".0 ms", with: " ms")
}

/// How many trials `scripts/cluster-reliability` asked for (none: the suite does not run).
private let clusterKillTrials = Int(ProcessInfo.processInfo.environment["GATEHOUSE_CLUSTER_TRIALS"] ?? "") ?? 0
