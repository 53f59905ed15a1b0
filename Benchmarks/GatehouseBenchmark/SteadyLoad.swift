import Foundation
import GatehouseClient
import GatehouseKernel
@_spi(Benchmarks) import GatehouseServer

/// `--operations steady`: refresh grants from every client, back to back, for `seconds`; each
/// minute the rows of the server's token tables, read from its database, beside the number of
/// live sessions (families) and the refreshes so far. With rotation storing only a family's
/// current tokens and the janitor sweeping the rest, the token table must stay flat.
@MainActor
func steadyRefreshLoad(
    clients: [(UserClient, UserProfile)],
    database: String,
    seconds: Double,
    serverPID: Int32
)
    async throws
{
    print(
        "\nSteady refresh load: \(clients.count) clients for \(Int(seconds)) s; rows of the server's tables each minute"
    )
    print("elapsed s   refreshes   per s   server CPU ms/op   tokens   families   flows   dpop_proofs   clients")
    let tables = try StoredTokenFiller(sqlitePath: database)
    let start = Date()
    let deadline = start.addingTimeInterval(seconds)
    let counter = RefreshCounter()
    let cpuStart = serverCPUSeconds(serverPID)
    let load = Task {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (client, _) in clients {
                group.addTask {
                    while Date() < deadline {
                        try await client.refreshSession()
                        await counter.add()
                    }
                }
            }
            try await group.waitForAll()
        }
    }
    var next = start.addingTimeInterval(60)
    while next <= deadline.addingTimeInterval(1) {
        try await Task.sleep(for: .seconds(max(0, next.timeIntervalSinceNow)))
        let counts = try await tables.rowCounts([.tokens, .families, .flows, .dpopProofs, .clients])
        let done = await counter.count
        let elapsed = Date().timeIntervalSince(start)
        let cpu = serverCPUSeconds(serverPID) - cpuStart
        print(
            String(
                format: "%9.0f %11d %7.0f %18.2f %8d %10d %7d %13d %9d",
                elapsed,
                done,
                Double(done) / elapsed,
                done == 0 ? 0 : cpu * 1000 / Double(done),
                counts[0],
                counts[1],
                counts[2],
                counts[3],
                counts[4]
            )
        )
        next = next.addingTimeInterval(60)
    }
    try await load.value
}

actor RefreshCounter {
    private(set) var count = 0
    func add() { count += 1 }
}
