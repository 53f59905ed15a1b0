import Foundation
import GatehouseTesting

/// A bed of `scripts/cluster-bed`: PostgreSQL (with `standby`, a primary and its synchronous
/// standby), three `gatehouse serve` instances and HAProxy, each in a network namespace of its
/// own, joined by veth links to one bridge; the test process is the clients' host on that
/// bridge. Faults are the script's (`kill`, `cut`, `partition`, `promote`, …).
final class ClusterBed: Sendable {
    /// HAProxy's front, every instance's `server.publicURL`.
    let front: String
    /// The clients' address on the bridge (this machine's).
    let clientAddress: String
    /// The database every instance shares, reachable from here.
    let database: String
    /// Each instance's own URL, by host name (`i1`…), past HAProxy.
    let instances: [String: String]
    let directory: String

    private init(directory: String, environment: [String: String]) throws {
        self.directory = directory
        front = try HarnessFailure.require(environment["FRONT"], "cluster-bed env: no FRONT")
        clientAddress = try HarnessFailure.require(environment["CLIENT"], "cluster-bed env: no CLIENT")
        database = try HarnessFailure.require(environment["DATABASE"], "cluster-bed env: no DATABASE")
        let hosts = try HarnessFailure.require(environment["HOSTS"], "cluster-bed env: no HOSTS")
        instances = Dictionary(
            uniqueKeysWithValues: hosts.split(separator: " ").compactMap { entry in
                entry.firstIndex(of: "=").map { (String(entry[..<$0]), String(entry[entry.index(after: $0)...])) }
            }
        )
    }

    /// Brings a bed up with `manifest` (its `server.publicURL` line is set to the front), owned by
    /// this process: beds of an earlier test process that was killed are swept first.
    static func up(manifest: URL, in scratch: URL, standby: Bool = false) async throws -> ClusterBed {
        guard getuid() == 0 else { throw HarnessFailure("the cluster bed needs root (network namespaces)") }
        let gatehouse = try binary("gatehouse")
        let directory = scratch.appendingPathComponent("bed").path
        _ = try await script("sweep")
        let started = try await script(
            ["up", directory, "--manifest", manifest.path, "--gatehouse", gatehouse.path, "--owner", "\(getpid())"]
                + (standby ? ["--standby"] : [])
        )
        guard started.status == 0 else {
            throw HarnessFailure("cluster-bed up failed (\(started.status)): \(started.errorText)")
        }
        let listed = try await script("env", directory)
        var environment: [String: String] = [:]
        for line in listed.outputText.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            environment[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        do {
            return try ClusterBed(directory: directory, environment: environment)
        } catch {
            _ = try? await script("down", directory)
            throw error
        }
    }

    /// `scripts/cluster-bed VERB DIR HOST [OPTIONS]`: a fault, or its end.
    func fault(_ verb: String, _ host: String, _ options: String...) async throws {
        let result = try await Self.script([verb, directory, host] + options)
        guard result.status == 0 else {
            throw HarnessFailure("cluster-bed \(verb) \(host) failed (\(result.status)): \(result.errorText)")
        }
    }

    /// The database server that is the primary now (`db`, or `db2` once promoted).
    func primary() async throws -> String {
        let listed = try await Self.script("env", directory).outputText
        let line = listed.split(separator: "\n").first { $0.hasPrefix("PRIMARY=") }
        return try HarnessFailure.require(line.map { String($0.dropFirst("PRIMARY=".count)) }, "no PRIMARY")
    }

    /// Which hosts run and are ready, as the script reports them.
    func status() async throws -> String { try await Self.script("status", directory).outputText }

    /// Whether `host`'s instance answers `/ready` with 200 now (asked directly, not through the front).
    func isReady(_ host: String) async throws -> Bool {
        try await status().split(separator: "\n").contains { $0 == "\(host) running, ready" }
    }

    /// Takes everything down: processes, namespaces, links, the folder.
    func down() async {
        _ = try? await Self.script("down", directory)
    }

    /// What `host` wrote to its standard error and output, for failure messages.
    func log(of host: String) -> String {
        let path = host == "lb" ? "\(directory)/lb/log" : "\(directory)/\(host)/log"
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    /// One request as HAProxy logged it (`routed SERVER METHOD PATH STATUS TERMINATION TOTAL_MS`),
    /// in the order HAProxy answered them.
    struct Routed: CustomStringConvertible {
        var server: String
        var method: String
        var path: String
        var status: Int
        /// HAProxy's termination state: `--` for a normal end; a first letter `S` when the
        /// server side aborted (an instance that died or vanished), `s` for a server timeout.
        var termination: String
        /// From HAProxy's accepting the request to its last byte out.
        var totalMilliseconds: Int
        var description: String { "\(method) \(path) → \(server) \(status) \(termination) \(totalMilliseconds) ms" }
    }

    func routed() -> [Routed] {
        log(of: "lb").split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 7, fields[0] == "routed", let status = Int(fields[4]) else { return nil }
            return Routed(
                server: String(fields[1]),
                method: String(fields[2]),
                path: String(fields[3]),
                status: status,
                termination: String(fields[5]),
                totalMilliseconds: Int(fields[6]) ?? -1
            )
        }
    }

    /// `statement` run by `psql` on the bed's database (from this host, over the bridge): on the
    /// primary, whichever server that is now.
    func sql(_ statement: String) async throws -> String {
        let result = try await ChildProcess.run(
            command: "psql",
            arguments: [
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", statement,
                // libpq's URL without Gatehouse's own parameters (pool, prepared).
                (database.split(separator: "?").first.map(String.init) ?? database)
                    + "?sslmode=disable&target_session_attrs=read-write",
            ]
        )
        guard result.status == 0 else { throw HarnessFailure("psql: \(result.errorText)") }
        return result.outputText
    }

    private static func script(_ arguments: String...) async throws -> ChildProcess.Result {
        try await script(arguments)
    }

    private static func script(_ arguments: [String]) async throws -> ChildProcess.Result {
        try await ChildProcess.run(packageRoot.appendingPathComponent("scripts/cluster-bed"), arguments: arguments)
    }
}
