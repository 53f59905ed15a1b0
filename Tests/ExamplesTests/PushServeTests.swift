import Crypto
import Foundation
import Testing

/// `gatehouse serve` with `server.mobileAuth.push`: it reads the APNs key at start, refuses one
/// its group or others may read in one line naming the file and the fix, and starts with a
/// private one.
@Suite("serve's push senders", .serialized)
struct PushServeTests {
    /// Examples/manifests/server.yaml with an APNs section naming `keyFile`, in `directory`.
    private func manifest(keyFile: String, in directory: URL) throws -> URL {
        let example = try String(
            contentsOf: packageRoot.appendingPathComponent("Examples/manifests/server.yaml"),
            encoding: .utf8
        )
        let section = """
              mobileAuth:
                push:
                  apns: {keyFile: \(keyFile), keyID: ABC123DEFG, teamID: DEF123GHIJ, topic: com.example.app}

            """
        guard let range = example.range(of: "  mobileAuth:\n") else { throw CocoaError(.fileReadCorruptFile) }
        let url = directory.appendingPathComponent("server.yaml")
        try example.replacingCharacters(in: range, with: section).write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    /// A P-256 key as Apple hands it out, with `permissions`.
    private func keyFile(in directory: URL, permissions: Int) throws -> String {
        let path = directory.appendingPathComponent("AuthKey_ABC123DEFG.p8").path
        let pem = Data(P256.Signing.PrivateKey().pemRepresentation.utf8)
        guard FileManager.default.createFile(atPath: path, contents: pem) else { throw CocoaError(.fileWriteUnknown) }
        try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: path)
        return path
    }

    @Test("a key file others may read stops serve with one line naming it and chmod 600, status 78")
    func openKeyRefused() async throws {
        let directory = try scratchDirectory("gatehouse-push-serve")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = try keyFile(in: directory, permissions: 0o644)
        let manifest = try manifest(keyFile: key, in: directory)
        let serve = try Session(
            [
                "serve", "--manifest", manifest.path, "--database",
                directory.appendingPathComponent("server.sqlite").path,
                "--port", "0", "--log-level", "error",
            ]
        )
        #expect(try await serve.finish() == 78)
        let errors = serve.errors.withLock { $0 }
        #expect(errors.split(separator: "\n").count == 1, "\(errors)")
        #expect(errors.hasPrefix("error: \(manifest.path): server.mobileAuth.push.apns.keyFile: \(key) "))
        #expect(errors.contains("chmod 600 \(key)"))
        #expect(!errors.contains("PRIVATE KEY"))
        // Nothing was left behind by the start that failed.
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("server.sqlite").path))

        // `manifest check` finds it too, in the same line, before anything is started.
        let check = try Session(["manifest", "check", manifest.path])
        #expect(try await check.finish() == 78)
        #expect(check.errors.withLock { $0 } == errors)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        let fixed = try Session(["manifest", "check", manifest.path])
        #expect(try await fixed.finish() == 0, "\(fixed.errors.withLock { $0 })")
    }

    @Test("a private key file: serve starts with its APNs sender")
    func privateKeyStarts() async throws {
        let directory = try scratchDirectory("gatehouse-push-serve")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = try keyFile(in: directory, permissions: 0o600)
        let (server, _) = try await startServer(
            in: directory,
            manifest: ["--manifest", try manifest(keyFile: key, in: directory).path]
        )
        server.process.terminate()
        _ = try await server.finish()
    }
}
