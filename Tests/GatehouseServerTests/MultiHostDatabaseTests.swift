import Foundation
import GatehousePostgresTestSupport
import GatehouseTesting
import Logging
import Testing

@testable import GatehouseServer

/// A database URL may name several servers (a primary and its standbys): each new connection
/// tries them in order and, with `target_session_attrs=read-write` (the default), passes over
/// one that accepts no writes, so after a failover the instances reach the promoted standby.
/// The failover itself, with a real standby, is `ClusterFaultTests`' (`scripts/cluster-bed`).
@Suite("A database URL with several servers")
struct MultiHostDatabaseTests {
    @Test("hosts, ports, target_session_attrs and connect_timeout are read; bad ones are refused")
    func parsing() throws {
        let location = try PostgresLocation(
            url: "postgres://gate:p%40ss@db1.internal:5433,10.0.0.2,[::1]:6543/gatehouse?sslmode=disable"
                + "&target_session_attrs=any&connect_timeout=3"
        )
        #expect(location.hosts.map(\.description) == ["db1.internal:5433", "10.0.0.2:5432", "[::1]:6543"])
        #expect(location.host == "db1.internal" && location.port == 5433)
        #expect(location.username == "gate" && location.password == "p@ss" && location.database == "gatehouse")
        #expect(location.targetSessions == .any && location.connectTimeout == .seconds(3))
        #expect(!location.description.contains("p@ss") && !location.description.contains("p%40ss"))
        #expect(location.description.contains("db1.internal:5433,10.0.0.2:5432,[::1]:6543"))

        // A password may hold / ? # : and @ unencoded: the user's part ends at the URL's last @.
        let raw = try PostgresLocation(url: "postgres://gate:a/b?c#d:e@f@db1,db2:5433/gatehouse?sslmode=disable")
        #expect(raw.password == "a/b?c#d:e@f" && raw.username == "gate")
        #expect(raw.hosts.map(\.description) == ["db1:5432", "db2:5433"] && raw.database == "gatehouse")
        for leaking in [
            "postgres://gate:pa/ss@db,/gatehouse", "postgres://gate:pa/ss@db", "postgres://gate:pa?ss@db,x:y/gatehouse",
            "postgres://gate@db/gatehouse?password=pa/ss", "postgres://gate:pa/ss@db/gatehouse?pool=0",
        ] {
            #expect {
                try PostgresLocation(url: leaking)
            } throws: { error in
                !"\(error)".contains("pa/ss") && !"\(error)".contains("pa?ss")
            }
        }

        let single = try PostgresLocation(url: "postgres://gate@db/gatehouse")
        #expect(single.hosts == [PostgresLocation.Host(name: "db")])
        #expect(single.targetSessions == .readWrite && single.connectTimeout == .seconds(10))

        let base = "postgres://gate:secret@a,b/gatehouse?sslmode=disable"
        for bad in [
            "postgres://gate:secret@a,,b/gatehouse", "postgres://gate:secret@a,b:x/gatehouse",
            "postgres://gate:secret@,/gatehouse", "postgres://gate:secret@a,b/", base + "&target_session_attrs=primary",
            base + "&connect_timeout=0", base + "&connect_timeout=61", base + "&connect_timeout=soon",
        ] {
            #expect {
                try PostgresLocation(url: bad)
            } throws: { error in
                // Every refusal names the URL without its password.
                "\(error)".count > 0 && !"\(error)".contains("secret")
            }
        }
    }

    @Test("a server that refuses is passed over for the next; with all refusing, each says why")
    func refusedServerPassedOver() async throws {
        let cluster = try await PostgresTestCluster.shared()
        let schema = try await cluster.makeSchema("multihost")
        defer { try? cluster.dropSchemaBlocking(schema) }
        let closed = try #require(LoopbackPort.free())
        let url =
            "postgres://\(cluster.user)@127.0.0.1:\(closed),127.0.0.1:\(cluster.port)/\(cluster.database)"
            + "?sslmode=disable&pool=2&schema=\(schema)"
        let engine = try await PostgresEngine.open(PostgresLocation(url: url), logger: Logger(label: "multi-host"))
        let port = try await engine.read { db in try Int.fetchOne(db, sql: "SELECT inet_server_port()") }
        await engine.shutdown()
        #expect(port == cluster.port)

        let other = try #require(LoopbackPort.free())
        let nowhere = "postgres://gatehouse@127.0.0.1:\(closed),127.0.0.1:\(other)/x?sslmode=disable&connect_timeout=2"
        do {
            let engine = try await PostgresEngine.open(PostgresLocation(url: nowhere), logger: Logger(label: "none"))
            await engine.shutdown()
            Issue.record("opened a database where nothing listens")
        } catch {
            let reason = PostgresSession.describe(error)
            #expect(reason.contains("127.0.0.1:\(closed): nothing accepts connections"), "\(reason)")
            #expect(reason.contains("127.0.0.1:\(other): nothing accepts connections"), "\(reason)")
            #expect(PostgresSession.explained(error) is StoreRefusal, "a request would not be told to try again")
        }
    }

    @Test("read-write passes over a server that accepts no writes, listed first; 'any' settles on it")
    func readOnlyServerPassedOver() async throws {
        let primary = try await PostgresTestCluster.shared()
        // A server of its own whose sessions are read-only, as a standby's are.
        let standIn = try await PostgresTestCluster.start()
        defer { standIn.stop() }
        try await standIn.sql("ALTER DATABASE \(standIn.database) SET default_transaction_read_only = on")
        let schema = try await primary.makeSchema("multihost")
        defer { try? primary.dropSchemaBlocking(schema) }
        func url(_ options: String) -> String {
            "postgres://\(primary.user)@127.0.0.1:\(standIn.port),127.0.0.1:\(primary.port)/\(primary.database)"
                + "?sslmode=disable&pool=2&schema=\(schema)" + options
        }

        let engine = try await PostgresEngine.open(PostgresLocation(url: url("")), logger: Logger(label: "rw"))
        do {
            // Every connection settles on the writable server: the schema was made there, and a
            // change commits.
            try await engine.write { db in try db.execute(sql: "CREATE TABLE written (id BIGINT)") }
            try await engine.write { db in try db.execute(sql: "INSERT INTO written VALUES (1)") }
            let port = try await engine.read { db in try Int.fetchOne(db, sql: "SELECT inet_server_port()") }
            #expect(port == primary.port)
        } catch {
            await engine.shutdown()
            throw error
        }
        await engine.shutdown()
        #expect(
            try await primary.sql("SELECT id FROM \(schema).written").trimmingCharacters(in: .whitespacesAndNewlines)
                == "1"
        )

        // Asked for any server, the first one will do, and its refusal to write shows.
        do {
            let engine = try await PostgresEngine.open(
                PostgresLocation(url: url("&target_session_attrs=any")),
                logger: Logger(label: "any")
            )
            await engine.shutdown()
            Issue.record("migrated a read-only server")
        } catch {
            #expect(PostgresSession.describe(error).contains("read-only"), "\(PostgresSession.describe(error))")
        }

        // The read-only server alone: refused, and why.
        let alone =
            "postgres://\(primary.user)@127.0.0.1:\(standIn.port)/\(standIn.database)?sslmode=disable&pool=1"
        do {
            let engine = try await PostgresEngine.open(PostgresLocation(url: alone), logger: Logger(label: "alone"))
            await engine.shutdown()
            Issue.record("settled on a server that accepts no writes")
        } catch {
            #expect(PostgresSession.describe(error).contains("accepts no writes"), "\(PostgresSession.describe(error))")
        }
    }
}
