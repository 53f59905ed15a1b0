import Foundation
@_spi(Benchmarks) import GatehouseServer
import NIOPosix

/// `--operations steady`: refresh grants from every client, back to back, for `seconds`, driven by
/// the load generator in windows of a minute (each window's proofs are signed before it, since a
/// proof is valid for 60 s); after each window the rows of the server's token tables, read from
/// its database, beside the refreshes so far. With rotation storing only a family's current tokens
/// and the janitor sweeping the rest, the token table must stay flat.
func steadyRefreshLoad(
    devices: [WireDevice],
    baseURL: String,
    ports: [Int],
    tables: StoredTokenFiller,
    seconds: Double,
    group: MultiThreadedEventLoopGroup,
    serverPID: Int32
) async throws {
    print(
        "\nSteady refresh load: \(devices.count) clients for \(Int(seconds)) s; rows of the server's tables each minute"
    )
    print(
        "elapsed s   refreshes   per s   server CPU ms/op   errors   live   tokens   families   flows   dpop_proofs   clients"
    )
    var sessions = devices
    var refreshes = 0
    var errors = 0
    var live = 0
    var measured = 0.0
    var serverCPU = 0.0
    var rate = 6_000.0
    while measured < seconds {
        let window = min(60, seconds - measured)
        // More proofs than the fastest minute so far could use.
        let prepared = Int(rate * window * 1.3 / Double(sessions.count)) + 20
        let workloads = try sessions.map { try RefreshWorkload(device: $0, baseURL: baseURL, prepared: prepared) }
        let cpuBefore = serverCPUSeconds(serverPID)
        let started = DispatchTime.now().uptimeNanoseconds
        let connections = try await drive(workloads, ports: ports, seconds: window, group: group)
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        serverCPU += serverCPUSeconds(serverPID) - cpuBefore
        measured += elapsed
        let done = connections.reduce(0) { $0 + $1.operations }
        refreshes += done
        errors += connections.reduce(0) { $0 + $1.errors }
        live += workloads.reduce(0) { $0 + $1.madeLive }
        rate = max(rate, Double(done) / elapsed)
        for (index, workload) in workloads.enumerated() { sessions[index] = workload.session(of: sessions[index]) }
        let counts = try await tables.rowCounts([.tokens, .families, .flows, .dpopProofs, .clients])
        print(
            String(
                format: "%9.0f %11d %7.0f %18.3f %8d %6d %8d %10d %7d %13d %9d",
                measured,
                refreshes,
                Double(refreshes) / measured,
                refreshes == 0 ? 0 : serverCPU * 1000 / Double(refreshes),
                errors,
                live,
                counts[0],
                counts[1],
                counts[2],
                counts[3],
                counts[4]
            )
        )
        if let first = connections.compactMap(\.firstError).first { print("        first wrong answer: \(first)") }
    }
}
