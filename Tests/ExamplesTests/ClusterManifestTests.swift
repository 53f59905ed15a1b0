import Foundation
import GatehousePostgresTestSupport
import GatehouseTesting
import Testing

@Suite("Examples/manifests/cluster.yaml on PostgreSQL", .serialized)
struct ClusterManifestTests {
    @Test("gatehouse serve runs the cluster example on PostgreSQL: a device registers, logs in and enrols")
    func servesOnPostgres() async throws {
        let database = try await PostgresTestCluster.shared()
        let schema = try await database.makeSchema("cluster_example")
        defer { try? database.dropSchemaBlocking(schema) }
        let directory = try scratchDirectory("gatehouse-cluster-example")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The example as shipped, with `publicURL` naming this instance instead of a balancer.
        let port = try #require(LoopbackPort.free())
        let url = "http://127.0.0.1:\(port)"
        let example = try String(
            contentsOf: packageRoot.appendingPathComponent("Examples/manifests/cluster.yaml"),
            encoding: .utf8
        )
        #expect(example.contains("publicURL: https://auth.example.com"))
        let manifest = directory.appendingPathComponent("cluster.yaml")
        try example.replacingOccurrences(of: "https://auth.example.com", with: url)
            .write(to: manifest, atomically: true, encoding: .utf8)
        // A local database: no TLS (`sslmode=disable`), as docs/CLUSTER.md says.
        #expect(database.url(schema: schema).contains("sslmode=disable"))
        let server = try Session(
            [
                "serve", "--manifest", manifest.path, "--database", database.url(schema: schema), "--port", "\(port)",
                "--log-level", "warning",
            ]
        )
        defer { server.process.terminate() }
        _ = try await server.waitFor("listening on http://")

        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]
        try await registerOverCommandLine(device)
        let enrol = try Session(["device", "enrol"] + device)
        enrol.type("258147")
        #expect(try await enrol.finish() == 0, "\(enrol.errors.withLock { $0 })")
        let profiles = try await database.sql("SELECT count(*) FROM \(schema).profiles")
        #expect(profiles.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }
}
