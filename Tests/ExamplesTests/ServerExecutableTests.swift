import Foundation
import GatehouseTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("gatehouse-server: the token server alone, as operators deploy it")
struct ServerExecutableTests {
    @Test("its options, variables and version are gatehouse serve's; nothing else is a command of it")
    func sameOptionsAsServe() async throws {
        let help = try Session(["--help"], binary: "gatehouse-server")
        #expect(try await help.finish() == 0)
        let serveHelp = try Session(["serve", "--help"])
        #expect(try await serveHelp.finish() == 0)
        let text = help.output.withLock { $0 }
        #expect(text.contains("USAGE: gatehouse-server [--manifest <manifest>]"), "\(text)")
        #expect(Self.options(text) == Self.options(serveHelp.output.withLock { $0 }))
        #expect(Self.options(text).contains("--max-connections-per-address <max-connections-per-address>"))

        let version = try Session(["--version"], binary: "gatehouse-server")
        #expect(try await version.finish() == 0)
        let gatehouseVersion = try Session(["--version"])
        #expect(try await gatehouseVersion.finish() == 0)
        #expect(version.output.withLock { $0 } == gatehouseVersion.output.withLock { $0 })

        // A device command is not one of its own: a usage mistake, with the usage.
        let login = try Session(["login"], binary: "gatehouse-server")
        #expect(try await login.finish() == 64)
        #expect(login.errors.withLock { $0 }.contains("Unexpected argument 'login'"))
    }

    @Test("a bad setting or a missing manifest is one line and status 64, and leaves no database behind")
    func badSettings() async throws {
        let directory = try scratchDirectory("gatehouse-server-bad")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("server.sqlite").path
        let port = try Session(["--port", "70000", "--database", database], binary: "gatehouse-server")
        #expect(try await port.finish() == 64)
        #expect(port.errors.withLock { $0 } == "error: --port must be a whole number from 0 to 65535, not \"70000\"\n")
        let manifest = try Session(
            ["--manifest", "missing.yaml", "--database", database, "--port", "0"],
            binary: "gatehouse-server",
            in: directory
        )
        #expect(try await manifest.finish() == 64)
        #expect(manifest.errors.withLock { $0 }.hasPrefix("error: the manifest missing.yaml does not exist"))
        // A manifest that is there but cannot be used fails after the start has taken the
        // database's lock: a configuration error (78), and what the start created goes again.
        let unusable = directory.appendingPathComponent("unusable.yaml")
        try Data("authenticators:\n  - id: pin\n    type: no.such.plugin\n".utf8).write(to: unusable)
        let refused = try Session(
            ["--manifest", unusable.path, "--database", database, "--port", "0"],
            binary: "gatehouse-server"
        )
        #expect(try await refused.finish() == 78)
        #expect(refused.errors.withLock { $0 }.contains("no.such.plugin"), "\(refused.errors.withLock { $0 })")
        for leftover in ["", "-wal", "-shm", ".lock"] {
            #expect(!FileManager.default.fileExists(atPath: database + leftover), "\(database + leftover)")
        }
    }

    @Test(
        "it serves the example manifest as gatehouse serve does, takes a command line written for serve, and SIGTERM ends it with status 0"
    )
    func serves() async throws {
        let directory = try scratchDirectory("gatehouse-server-serves")
        defer { try? FileManager.default.removeItem(at: directory) }
        // As a unit or a container written for `gatehouse serve` starts it: a leading `serve`.
        let server = try Session(
            ["serve", "--database", directory.appendingPathComponent("server.sqlite").path, "--port", "0"],
            binary: "gatehouse-server"
        )
        defer { if server.process.isRunning { server.process.terminate() } }
        let announced = try await server.waitFor("listening on http://")
        let start = try #require(announced.range(of: "http://"))
        let url = String(announced[start.lowerBound...].prefix { !$0.isWhitespace })
        let session = URLSession(configuration: .ephemeral)
        let (configuration, response) = try await session.data(
            from: try #require(URL(string: url + "/v1/configuration"))
        )
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let published = try #require(try JSONSerialization.jsonObject(with: configuration) as? [String: Any])
        let authenticators = try #require(published["authenticators"] as? [[String: Any]])
        #expect(authenticators.compactMap { $0["type"] as? String }.contains("pin"))
        // A device registers against it with the full command line.
        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]
        let registered = try await registerOverCommandLine(device)
        #expect(registered.contains("Registered"), "\(registered)")

        kill(server.process.processIdentifier, SIGTERM)
        #expect(try await server.finish(within: 30) == 0, "\(server.errors.withLock { $0 })")
    }

    @Test("its binary links neither FoundationNetworking nor libcurl, and holds nothing of the client SDK")
    func noClientLibraries() async throws {
        let readelf = try #require(
            ["/usr/bin/readelf", "/bin/readelf"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "readelf (binutils) is needed to read the binary's dynamic section"
        )
        let server = try binary("gatehouse-server")
        let needed = try await ChildProcess.run(URL(fileURLWithPath: readelf), arguments: ["-d", server.path])
        #expect(needed.status == 0, "\(needed.errorText)")
        let libraries = needed.outputText.split(separator: "\n").filter { $0.contains("(NEEDED)") }
        #expect(libraries.contains { $0.contains("libFoundation") }, "\(libraries)")
        #expect(!libraries.contains { $0.contains("FoundationNetworking") || $0.contains("curl") }, "\(libraries)")
        // Nor, linked statically, any symbol of the SDK's module (GatehouseClient's mangled prefix).
        let symbols = try await ChildProcess.run(
            URL(fileURLWithPath: readelf),
            arguments: ["-Ws", "--wide", server.path]
        )
        #expect(symbols.status == 0 && symbols.output.count > 100_000)
        #expect(!symbols.outputText.contains("15GatehouseClient"))
        // The checks can tell: the full command line has both.
        let gatehouse = try binary("gatehouse").path
        let full = try await ChildProcess.run(URL(fileURLWithPath: readelf), arguments: ["-d", gatehouse])
        #expect(full.outputText.contains("libFoundationNetworking"))
        let fullSymbols = try await ChildProcess.run(
            URL(fileURLWithPath: readelf),
            arguments: ["-Ws", "--wide", gatehouse]
        )
        #expect(fullSymbols.outputText.contains("15GatehouseClient"))
    }

    /// The OPTIONS section of a `--help` text.
    private static func options(_ help: String) -> String {
        guard let start = help.range(of: "OPTIONS:") else { return "" }
        return String(help[start.upperBound...])
            .replacingOccurrences(of: "--version               Show the version.\n", with: "")
    }
}
