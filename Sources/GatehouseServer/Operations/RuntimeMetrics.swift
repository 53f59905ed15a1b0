import CoreMetrics
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What a scrape of `/metrics` reads when it comes (at most once a second, however often it
/// comes), through the server's metrics factory: the process (CPU time, memory, open files and
/// start time, from `/proc/self` on Linux), the database (the PostgreSQL pool's connections and
/// waiting calls, or the changes waiting for SQLite's next group commit), the callbacks waiting
/// in the outbox, and the events channels open. Nothing is read between scrapes.
final class RuntimeMetrics: Sendable {
    private let factory: any MetricsFactory
    /// When the last sample was taken, and the counters' values then (a counter only grows, by
    /// what grew since).
    private let last = Mutex<(at: ContinuousClock.Instant?, cpuSeconds: Double, commits: Int)>((nil, 0, 0))
    static let minimumInterval: Duration = .seconds(1)

    init(factory: any MetricsFactory) { self.factory = factory }

    /// Samples unless another sample was taken in the last second. `store` is read for the
    /// outbox only when `outbox` (mobile authentication is configured).
    func sample(store: ServerStore, eventChannels: Int, outbox: Bool) async {
        let now = ContinuousClock.now
        let due = last.withLock { last in
            guard last.at.map({ now - $0 >= Self.minimumInterval }) ?? true else { return false }
            last.at = now
            return true
        }
        guard due else { return }
        sampleProcess()
        sampleDatabase(store.engine)
        gauge("gatehouse_event_channels_open", eventChannels)
        if outbox, let waiting = try? await store.callbacksWaiting() {
            gauge("gatehouse_callback_outbox_waiting", waiting)
        }
    }

    private func sampleProcess() {
        guard let process = ProcessSample.current() else { return }
        let grown = last.withLock { last in
            defer { last.cpuSeconds = max(last.cpuSeconds, process.cpuSeconds) }
            return max(0, process.cpuSeconds - last.cpuSeconds)
        }
        FloatingPointCounter(label: "process_cpu_seconds_total", dimensions: [], factory: factory).increment(by: grown)
        gauge("process_resident_memory_bytes", process.residentBytes)
        gauge("process_virtual_memory_bytes", process.virtualBytes)
        gauge("process_open_fds", process.openFiles)
        if let limit = process.maxFiles { gauge("process_max_fds", limit) }
        Gauge(label: "process_start_time_seconds", dimensions: [], factory: factory).record(process.startTime)
    }

    private func sampleDatabase(_ engine: any StorageEngine) {
        if let postgres = engine as? PostgresEngine {
            let pool = postgres.poolStatistics
            gauge("gatehouse_db_pool_max_connections", pool.size)
            gauge("gatehouse_db_pool_connections_in_use", pool.inUse)
            gauge("gatehouse_db_pool_connections_idle", pool.idle)
            gauge("gatehouse_db_pool_waiting_calls", pool.waiting)
        } else if let sqlite = engine as? SQLiteEngine {
            let commits = sqlite.groupCommits
            gauge("gatehouse_db_sqlite_pending_writes", commits.pending)
            let grown = last.withLock { last in
                defer { last.commits = max(last.commits, commits.committed) }
                return max(0, commits.committed - last.commits)
            }
            Counter(label: "gatehouse_db_sqlite_group_commits_total", dimensions: [], factory: factory)
                .increment(by: Int64(grown))
        }
    }

    private func gauge(_ label: String, _ value: Int) {
        Gauge(label: label, dimensions: [], factory: factory).record(value)
    }
}

/// The process's own figures, read from `/proc/self` (nil elsewhere, or when it cannot be read).
struct ProcessSample: Sendable {
    var cpuSeconds: Double
    var residentBytes: Int
    var virtualBytes: Int
    var openFiles: Int
    var maxFiles: Int?
    /// Seconds since 1970.
    var startTime: Double

    static func current() -> ProcessSample? {
        #if os(Linux)
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so the fields are
        // counted after its last ")". Field 3 (state) is the first there.
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        // utime 14, stime 15, starttime 22, vsize 23, rss 24 (man 5 proc), at offsets -3.
        guard fields.count > 21, let user = Double(fields[11]), let system = Double(fields[12]),
            let started = Double(fields[19]), let virtual = Int(fields[20]), let pages = Int(fields[21])
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard ticks > 0, let boot = bootTime() else { return nil }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count).map { max(0, $0 - 1) }
        var limit = rlimit()
        let maxFiles = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Int(clamping: limit.rlim_cur) : nil
        return ProcessSample(
            cpuSeconds: (user + system) / ticks,
            residentBytes: pages * Int(sysconf(Int32(_SC_PAGESIZE))),
            virtualBytes: virtual,
            // Less the descriptor the listing itself held open.
            openFiles: open ?? 0,
            maxFiles: maxFiles,
            startTime: boot + started / ticks
        )
        #else
        return nil
        #endif
    }

    /// The moment the system booted, seconds since 1970 (`btime` in `/proc/stat`).
    private static func bootTime() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in stat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst("btime ".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}

extension TokenServer {
    /// Takes the sample a scrape of `/metrics` reports (``RuntimeMetrics``).
    func sampleRuntimeMetrics() async {
        await metrics.runtime.sample(store: store, eventChannels: hub.listenerCount, outbox: callbacks != nil)
    }
}
