// gatehouse-bench: starts `gatehouse serve` (its own process) on a loopback port, registers one
// device per concurrent client over the wire protocol, then drives introspection, token
// validation, refresh grants, PIN authentications and push round trips at 1, 8 and 64 concurrent
// clients from a load generator that prepares its requests ahead and runs on one event-loop
// thread. For each:
// throughput, p50/p99/p99.9 latency, the server's own CPU time per operation, the generator's
// share of the machine, and the server-side crypto floor with the ratio; at 1k and at 1M stored
// tokens. Also cold start and idle memory.
//
//   swift build -c release --package-path Benchmarks --product gatehouse
//   swift build -c release --package-path Benchmarks --product gatehouse-bench
//   Benchmarks/.build/release/gatehouse-bench                      (or: scripts/benchmark)
//   Benchmarks/.build/release/gatehouse-bench --operations push    (the push round trip)
//   Benchmarks/.build/release/gatehouse-bench --operations steady --seconds 600 --levels 16   (table growth)
//   Benchmarks/.build/release/gatehouse-bench --cluster 3 --stored-tokens 0   (3 instances on one PostgreSQL database)

import ArgumentParser
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
@_spi(Benchmarks) import GatehouseServer
import NIOCore
import NIOPosix

// MARK: - Options

struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse-bench",
        abstract: "Measures gatehouse serve: introspection, validation, refresh grants, PIN authentications."
    )

    static let loadOperations = ["introspect", "validate", "refresh", "pin"]

    @Option(help: "Seconds each measurement runs.")
    var seconds = 5.0

    @Option(help: "Concurrent clients, comma-separated.", transform: Options.integers)
    var levels = [1, 8, 64]

    @Option(
        help: "Stored tokens to measure at, comma-separated (the table is filled up to each).",
        transform: Options.integers
    )
    var storedTokens = [1_000, 1_000_000]

    @Option(help: "The server's manifest.")
    var manifest = "Examples/manifests/server.yaml"

    @Option(help: "The gatehouse binary to measure (default: the one beside this benchmark).")
    var server: String?

    @Option(
        help: """
            Instances of gatehouse serve on one PostgreSQL database (a private cluster on loopback), the \
            clients' connections spread over them; 0 for one instance on SQLite. Load operations only.
            """
    )
    var cluster = 0

    @Flag(
        help: """
            With --cluster: PostgreSQL's own profile of each row (pg_stat_statements, statements inside \
            functions included): the statements that cost it most, per operation.
            """
    )
    var postgresProfile = false

    @Option(
        help: """
            With --cluster: statements each connection keeps prepared (the database URL's prepared=N; \
            0 sends every statement unnamed, to measure what preparing them buys).
            """
    )
    var prepared = 256

    @Option(
        help: "introspect, validate, refresh, pin, startup, push and/or steady, comma-separated.",
        transform: Options.names
    )
    var operations: [String] = Options.loadOperations + ["push", "startup"]

    func validate() throws {
        guard seconds > 0 else { throw ValidationError("--seconds must be positive") }
        guard !levels.isEmpty, levels.allSatisfy({ (1...1024).contains($0) }) else {
            throw ValidationError("--levels takes numbers from 1 to 1024")
        }
        guard !storedTokens.isEmpty, storedTokens.allSatisfy({ (0...50_000_000).contains($0) }) else {
            throw ValidationError("--stored-tokens takes numbers from 0 to 50000000")
        }
        let known = Options.loadOperations + ["startup", "push", "steady"]
        guard operations.allSatisfy(known.contains) else {
            throw ValidationError("--operations takes \(known.joined(separator: ", "))")
        }
        guard (0...16).contains(cluster) else { throw ValidationError("--cluster takes 0 to 16 instances") }
        if postgresProfile, cluster == 0 { throw ValidationError("--postgres-profile needs --cluster") }
        guard (0...4096).contains(prepared) else { throw ValidationError("--prepared takes 0 to 4096") }
        if cluster > 0, operations.contains("steady") {
            throw ValidationError("--cluster measures \((Options.loadOperations + ["push"]).joined(separator: ", "))")
        }
    }

    static func integers(_ text: String) throws -> [Int] {
        try text.split(separator: ",").map {
            guard let number = Int($0) else { throw ValidationError("\($0) is not a number") }
            return number
        }
    }

    static func names(_ text: String) -> [String] { text.split(separator: ",").map(String.init) }
}

let options = Options.parseOrExit()
let seconds = options.seconds
let levels = options.levels
let operations = options.operations
let cores = ProcessInfo.processInfo.activeProcessorCount

// MARK: - The server

let binDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
let serverBinary = options.server ?? binDirectory.appendingPathComponent("gatehouse").path
let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
    "gatehouse-bench-\(UUID().uuidString.prefix(8))"
)
try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: scratch) }

/// The manifest's lines without what runs on one instance only (docs/CLUSTER.md): the `login`
/// and `xignin` sections, and the browser identity providers that use the hosted login.
func withoutOneInstanceParts(_ lines: [Substring]) -> [Substring] {
    var kept: [Substring] = []
    var item: [Substring] = []
    var skippingSection = false
    func flush() {
        if !item.contains(where: { $0.contains("type: idp.browser") }) { kept += item }
        item = []
    }
    for line in lines {
        let topLevel = !line.hasPrefix(" ") && !line.hasPrefix("#") && !line.isEmpty
        if topLevel {
            flush()
            skippingSection = line.hasPrefix("login:") || line.hasPrefix("xignin:")
        }
        if skippingSection { continue }
        if line.hasPrefix("  - ") || topLevel {
            flush()
            if topLevel {
                kept.append(line)
                continue
            }
        }
        item.append(line)
    }
    flush()
    return kept
}

/// The URL the instances of a cluster share (each listens on a port of its own).
let clusterURL = "http://gatehouse.bench"

// Every benchmark client registers from this one address: the server's per-address limits would
// measure themselves, so the copy the server reads turns them off. Access tokens live an hour, so
// the ones set up at the start stay valid through a long run.
let manifestPath = scratch.appendingPathComponent(URL(fileURLWithPath: options.manifest).lastPathComponent).path
do {
    let text = try String(contentsOfFile: options.manifest, encoding: .utf8)
    let kept = text.split(separator: "\n", omittingEmptySubsequences: false).filter {
        !$0.hasPrefix("  accessTokenLifetime:")
    }
    // Instances behind one address: proofs name it, whichever instance they reach.
    let sharedURL = options.cluster > 0 ? "  publicURL: \(clusterURL)\n" : ""
    let lines = options.cluster > 0 ? withoutOneInstanceParts(kept) : kept
    let adjusted = lines.joined(separator: "\n").replacingOccurrences(
        of: "\nserver:\n",
        with: "\nserver:\n  rateLimitPerMinute: 0\n  accessTokenLifetime: 3600\n" + sharedURL
    )
    try adjusted.write(toFile: manifestPath, atomically: true, encoding: .utf8)
}
let databasePath = scratch.appendingPathComponent("server.sqlite").path

/// Starts `gatehouse serve` and returns it once it listens, with its URL and how long that took.
func startServer(database: String, log: String? = nil) throws -> (Process, String, Double) {
    let serve = Process()
    serve.executableURL = URL(fileURLWithPath: serverBinary)
    serve.arguments = [
        "serve", "--manifest", manifestPath, "--database", database, "--port", "0", "--log-level", "error",
        // Every client connects from one address (three connections each for the push round trip).
        "--max-connections-per-address", "0",
    ]
    let output = Pipe()
    serve.standardOutput = output
    // Its audit log (registrations) would drown the report: it goes to a file beside the database.
    let log = log ?? database + ".log"
    _ = FileManager.default.createFile(atPath: log, contents: nil)
    serve.standardError = FileHandle(forWritingAtPath: log)
    let started = DispatchTime.now().uptimeNanoseconds
    try serve.run()
    let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
    guard let range = line.range(of: "http://") else {
        serve.terminate()
        let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        throw BenchmarkError("gatehouse serve did not start: \(line)\(said)")
    }
    return (serve, String(line[range.lowerBound...]).trimmingCharacters(in: .whitespacesAndNewlines), elapsed)
}

/// The server's resident memory in MB, from /proc: all of it, its own (anonymous) part, and the
/// code and data of the files it maps (the binary, the Swift runtime, Foundation: shared, clean,
/// and mapped by the kernel 64 KiB around each page touched); and its proportional share.
func residentMemory(_ pid: Int32) -> (total: Double, anonymous: Double, files: Double, proportional: Double) {
    func megabytes(_ name: String, in path: String) -> Double { (procField(name, in: path) ?? 0) / 1024 }
    let status = "/proc/\(pid)/status"
    return (
        megabytes("VmRSS", in: status), megabytes("RssAnon", in: status), megabytes("RssFile", in: status),
        megabytes("Pss", in: "/proc/\(pid)/smaps_rollup")
    )
}

/// This process's CPU time so far (the load generator's).
func ownCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

print("Gatehouse benchmark, \(seconds) s per measurement")
print(
    "machine: \(cores) cores, \(ProcessInfo.processInfo.physicalMemory / 1_073_741_824) GiB; "
        + "the server and the load generator share them"
)

if operations.contains("startup"), options.cluster == 0 {
    try measureStartup()
}

/// The instances measured, where proofs say they are, the ports they listen on, and the
/// PostgreSQL cluster behind them (none: one instance on SQLite).
let instances: [Process]
let baseURL: String
let ports: [Int]
// Durable as a production server is (fsync, synchronous commits), unlike the tests' cluster.
let postgres =
    options.cluster > 0
    ? try await PostgresTestCluster.start(
        durable: true,
        settings: options.postgresProfile
            ? [
                "shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all",
                "pg_stat_statements.track_planning=on",
            ] : []
    ) : nil
defer { postgres?.stop() }
if options.postgresProfile, let postgres { try await postgres.sql("CREATE EXTENSION pg_stat_statements") }
if let cluster = postgres {
    let url = cluster.url(schema: try await cluster.makeSchema("bench"), pool: 16) + "&prepared=\(options.prepared)"
    var started: [(Process, String)] = []
    for index in 0..<options.cluster {
        let (process, url, _) = try startServer(
            database: url,
            log: scratch.appendingPathComponent("serve-\(index).log").path
        )
        started.append((process, url))
    }
    instances = started.map(\.0)
    baseURL = clusterURL
    ports = started.compactMap { URLComponents(string: $0.1)?.port }
    print(
        "\(options.cluster) instances of gatehouse serve on one PostgreSQL \(cluster.version) database "
            + "(durable: fsync, synchronous commit; pool 16 each), ports \(ports.map(String.init).joined(separator: ", "))"
    )
} else {
    let (serve, url, _) = try startServer(database: databasePath)
    instances = [serve]
    baseURL = url
    ports = URLComponents(string: url)?.port.map { [$0] } ?? []
    print("gatehouse serve at \(baseURL) (pid \(serve.processIdentifier))")
}
defer { for instance in instances { instance.terminate() } }
guard !ports.isEmpty else { throw BenchmarkError("no port in \(baseURL)") }
let serve = instances[0]

/// CPU seconds the instances (and the PostgreSQL server's processes) used so far.
func serversCPUSeconds() -> (instances: Double, database: Double) {
    (
        instances.reduce(0) { $0 + serverCPUSeconds($1.processIdentifier) },
        postgres?.postmasterPID.map(processTreeCPUSeconds) ?? 0
    )
}

// MARK: - Load

/// Measures one row: runs `run` (the timed window) and prints its figures from the processes' own
/// accounting; on PostgreSQL also its CPU share and rollbacks, and with --postgres-profile its
/// costliest statements. On the main actor, where the rows' workloads are made and read.
@MainActor
func measureRow(
    level: Int,
    floor: Double,
    store: StoredTokenFiller?,
    madeLive: @autoclosure () -> Int,
    _ run: () async throws -> [ConnectionFigures]
) async throws -> LevelFigures {
    let tokensBefore = try await store?.rowCounts([.tokens])[0] ?? 0
    let serverBefore = serversCPUSeconds()
    let rollbacksBefore: Int
    if let postgres { rollbacksBefore = try await rollbacks(postgres) } else { rollbacksBefore = 0 }
    if options.postgresProfile, let postgres { try await postgres.sql("SELECT pg_stat_statements_reset()") }
    let writtenBefore = serverWrittenBytes(serve.processIdentifier)
    let ownBefore = ownCPUSeconds()
    let started = DispatchTime.now().uptimeNanoseconds
    let connections = try await run()
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
    let serverAfter = serversCPUSeconds()
    let databaseCPU = serverAfter.database - serverBefore.database
    var figures = LevelFigures(
        clients: level,
        connections: connections,
        elapsed: elapsed,
        serverCPU: serverAfter.instances - serverBefore.instances + databaseCPU,
        generatorCPU: ownCPUSeconds() - ownBefore,
        cores: cores,
        floor: floor,
        storedTokens: tokensBefore
    )
    figures.madeLive = madeLive()
    figures.writtenBytes = serverWrittenBytes(serve.processIdentifier) - writtenBefore
    print(figures.row)
    if let postgres, figures.operations > 0 {
        let rolledBack = try await rollbacks(postgres) - rollbacksBefore
        print(
            String(
                format: "        of the server CPU, PostgreSQL %.3f ms/op; transactions rolled back %.3f/op",
                databaseCPU * 1000 / Double(figures.operations),
                Double(rolledBack) / Double(figures.operations)
            )
        )
    }
    if options.postgresProfile, let postgres, figures.operations > 0 {
        try await printPostgresProfile(postgres, operations: figures.operations)
    }
    if let error = figures.firstError { print("        first wrong answer: \(error)") }
    return figures
}

let loadOperations = Options.loadOperations.filter(operations.contains)
let deviceCount = levels.max() ?? 1
let setup = SetupCalls(transport: HTTPTransport(baseURL: "http://127.0.0.1:\(ports[0])"), baseURL: baseURL)
var devices: [WireDevice] = []
if !loadOperations.isEmpty || operations.contains("push") || operations.contains("steady") {
    for index in 0..<deviceCount {
        devices.append(try await setup.registerDevice(subject: "user\(index)@example.com"))
    }
    print("\(deviceCount) devices registered over the wire protocol (custom registration API, then the PIN)")
}
let floors = devices.isEmpty ? nil : try CryptoFloors(baseURL: baseURL, oprfPublicKey: devices[0].oprfPublicKey)
floors?.show()
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
// The stored-token fill goes through the store, beside the server on its SQLite file; a cluster
// is measured as registered.
let store = options.cluster == 0 ? try StoredTokenFiller(sqlitePath: databasePath) : nil

if !loadOperations.isEmpty {
    var results: [String: [Int: [Int: LevelFigures]]] = [:]
    for target in options.cluster == 0 ? options.storedTokens : [0] {
        if let store {
            let filled = try await store.fill(upTo: target)
            print("\n=== \(filled) tokens stored (the table filled up to \(target)) ===")
        }
        for operation in loadOperations {
            let floor = floors?.milliseconds[operation] ?? 0
            print("\n\(Report.title(operation)) — server-side crypto floor \(String(format: "%.3f", floor)) ms/op")
            print(Report.header)
            for level in levels {
                let selected = Array(devices.prefix(level))
                let budget = Report.preparedBudget(
                    operation,
                    level: level,
                    seconds: seconds,
                    fastestSoFar: results[operation]?.values.flatMap(\.values).map(\.rate).max()
                )
                let workloads: [any Workload]
                var blinded: Stock<Data>?
                switch operation {
                case "introspect":
                    workloads = selected.map {
                        IntrospectionWorkload(
                            device: $0,
                            resourceServer: "gateway",
                            secret: "example-gateway-secret-change-me"
                        )
                    }
                case "validate":
                    workloads = try selected.map {
                        try ValidationWorkload(device: $0, baseURL: baseURL, prepared: budget)
                    }
                case "refresh":
                    workloads = try selected.map { try RefreshWorkload(device: $0, baseURL: baseURL, prepared: budget) }
                default:
                    let stock = try blindedPINStock(count: budget * level, oprfPublicKey: devices[0].oprfPublicKey)
                    blinded = stock
                    workloads = try selected.map {
                        try PINWorkload(device: $0, baseURL: baseURL, blinded: stock, prepared: budget)
                    }
                }
                let figures = try await measureRow(
                    level: level,
                    floor: floor,
                    store: store,
                    madeLive: workloads.reduce(0) { $0 + $1.madeLive } + (blinded?.madeLive ?? 0)
                ) {
                    try await drive(workloads, ports: ports, seconds: seconds, group: group)
                }
                results[operation, default: [:]][target, default: [:]][level] = figures
                // A rotated session is the one the next measurements must use.
                for (index, workload) in workloads.enumerated() {
                    if let refresh = workload as? RefreshWorkload {
                        devices[index] = refresh.session(of: devices[index])
                    }
                }
            }
        }
    }
    Report.scaling(results, targets: options.storedTokens, levels: levels)
}

if operations.contains("push") {
    var pushDevices: [PushDevice] = []
    for (index, device) in devices.enumerated() {
        pushDevices.append(try await setup.enrolForPush(device, pushToken: "bench-device-\(index)"))
    }
    let floor = floors?.milliseconds["push"] ?? 0
    print("\n\(Report.title("push")) — server-side crypto floor \(String(format: "%.3f", floor)) ms/op")
    print(Report.header)
    let push = try await PushRoundTrips(devices: pushDevices, baseURL: baseURL, ports: ports, group: group)
    for level in levels {
        var stages = ""
        _ = try await measureRow(level: level, floor: floor, store: store, madeLive: 0) {
            let connections = try await push.run(level: level, seconds: seconds)
            stages = PushStage.summary(connections)
            return connections
        }
        print("        stages, mean ms after the portal's start: \(stages)")
    }
    await push.close()
}

if operations.contains("steady"), let store {
    try await steadyRefreshLoad(
        devices: Array(devices.prefix(levels.max() ?? 1)),
        baseURL: baseURL,
        ports: ports,
        tables: store,
        seconds: seconds,
        group: group,
        serverPID: serve.processIdentifier
    )
}
try await group.shutdownGracefully()

/// Transactions PostgreSQL rolled back in the benchmark's database so far: serialization
/// failures retried by the instances, and refused changes.
func rollbacks(_ cluster: PostgresTestCluster) async throws -> Int {
    let text = try await cluster.sql("SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()")
    return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
}

/// What PostgreSQL spent its time on during a row, from pg_stat_statements: the costliest
/// statements with their calls, planning and execution per operation (a function's statements
/// are listed under it, indented by their nesting in the report's order of cost).
func printPostgresProfile(_ cluster: PostgresTestCluster, operations: Int) async throws {
    let text = try await cluster.sql(
        """
        SELECT calls, total_plan_time, total_exec_time, toplevel, regexp_replace(query, '\\s+', ' ', 'g')
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        ORDER BY total_plan_time + total_exec_time DESC LIMIT 12
        """
    )
    let count = Double(operations)
    print(
        "        PostgreSQL's statements, per operation: calls, planning ms, execution ms (top level or in a function)"
    )
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: "|", maxSplits: 4, omittingEmptySubsequences: false).map(String.init)
        guard fields.count == 5, let calls = Double(fields[0]), let plan = Double(fields[1]),
            let execution = Double(fields[2])
        else { continue }
        let figures = String(format: "          %5.2f  %6.3f  %6.3f  ", calls / count, plan / count, execution / count)
        print(figures + (fields[3] == "t" ? "top " : " in ") + String(fields[4].prefix(110)))
    }
}

/// CPU seconds of a process and its children (PostgreSQL's server and its backends).
func processTreeCPUSeconds(_ root: Int32) -> Double {
    let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap { Int32($0) } ?? []
    return pids.reduce(0) { total, pid in
        guard pid == root || procField("PPid", in: "/proc/\(pid)/status").map({ Int32($0) == root }) == true
        else { return total }
        return total + serverCPUSeconds(pid)
    }
}

/// Unbuffered even into a pipe or a file, so a long run can be watched (and profiled) as it goes.
func print(_ text: String = "") { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }
