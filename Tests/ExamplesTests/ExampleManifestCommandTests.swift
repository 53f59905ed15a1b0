import Foundation
import Testing

/// What a newcomer outside the checkout runs: the example manifests and the demo come with the
/// binary, nothing is read from the working folder.
@Suite("gatehouse manifest example and demo, from a folder outside the checkout")
struct ExampleManifestCommandTests {
    @Test("manifest example lists every file of Examples/manifests and prints each byte for byte, from any folder")
    func printsEveryExample() async throws {
        let elsewhere = try scratchDirectory("gatehouse-examples")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let folder = packageRoot.appendingPathComponent("Examples/manifests")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { ["json", "yaml", "yml"].contains(($0 as NSString).pathExtension) }.sorted()
        #expect(files.contains("server.yaml") && files.contains("validators.json"))

        let list = try Session(["manifest", "example"], in: elsewhere)
        #expect(try await list.finish() == 0, "\(list.errors.withLock { $0 })")
        #expect(list.output.withLock { $0 } == files.map { $0 + "\n" }.joined())

        for file in files {
            let printed = try Session(["manifest", "example", file], in: elsewhere)
            #expect(try await printed.finish() == 0, "\(file): \(printed.errors.withLock { $0 })")
            let expected = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            #expect(printed.output.withLock { $0 } == expected, "\(file) differs from what the binary prints")
        }
        // Without its extension when that is unique; written to a file, `serve` and `manifest check` take it.
        let server = try Session(["manifest", "example", "server"], in: elsewhere)
        #expect(try await server.finish() == 0)
        try server.output.withLock { $0 }.write(
            to: elsewhere.appendingPathComponent("server.yaml"),
            atomically: true,
            encoding: .utf8
        )
        let check = try Session(["manifest", "check", "server.yaml"], in: elsewhere)
        #expect(try await check.finish() == 0, "\(check.errors.withLock { $0 })")
    }

    @Test("manifest example with an unknown or ambiguous name is a usage mistake: the choices and the usage, 64")
    func unknownName() async throws {
        let unknown = try Session(["manifest", "example", "nope"])
        #expect(try await unknown.finish() == 64)
        let said = unknown.errors.withLock { $0 }
        #expect(said.contains("There is no example manifest nope; the examples are cluster.yaml, "), "\(said)")
        #expect(said.contains("Usage: gatehouse manifest example"))
        let ambiguous = try Session(["manifest", "example", "validators"])
        #expect(try await ambiguous.finish() == 64)
        #expect(
            ambiguous.errors.withLock { $0 }.contains(
                "Several example manifests are called validators: validators.json, validators.yaml; name one."
            )
        )
    }

    @Test("demo runs from a folder outside the checkout with the built-in example manifest")
    func demoOutsideTheCheckout() async throws {
        let elsewhere = try scratchDirectory("gatehouse-demo-elsewhere")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let demo = try Session(["demo", "--data-dir", elsewhere.appendingPathComponent("state").path], in: elsewhere)
        #expect(try await demo.finish() == 0, "\(demo.errors.withLock { $0 })")
        #expect(demo.output.withLock { $0 }.hasSuffix("Done.\n"))
    }

    @Test("serve outside the checkout without a manifest says how to get the example, in one line, 64")
    func serveWithoutManifest() async throws {
        let elsewhere = try scratchDirectory("gatehouse-serve-elsewhere")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let serve = try Session(
            ["serve", "--database", elsewhere.appendingPathComponent("s.sqlite").path, "--port", "0"],
            in: elsewhere
        )
        #expect(try await serve.finish() == 64)
        #expect(
            serve.errors.withLock { $0 }
                == "error: the manifest Examples/manifests/server.yaml does not exist (set it with --manifest or "
                + "GATEHOUSE_MANIFEST; `gatehouse manifest example server > server.yaml` writes the example)\n"
        )
    }
}
