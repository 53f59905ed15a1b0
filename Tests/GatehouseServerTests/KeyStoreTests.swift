import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseServer

#if canImport(Glibc)
// `stat` comes through Glibc or CoreFoundation, whichever clang module the compiler loaded
// first; with member import visibility the file needs both.
import CoreFoundation
import Glibc
#endif

@Suite("Key store")
struct KeyStoreTests {
    @Test("the key file is created with mode 0600, reused, and refused when others can read it")
    func fileKeyStore() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-keys-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("client.key").path
        let store = FileKeyStore(path: path)
        let first = try store.sealingKey()
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try store.sealingKey() == first)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        #expect(throws: KeyStoreError.self) { try store.sealingKey() }
        try Data("short".utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        #expect(throws: KeyStoreError.self) { try store.sealingKey() }
    }

    @Test("no one sees the key file with a wider mode than 0600, not even while it is created")
    func keyFileNeverWider() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-race-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let widest = Mutex<mode_t>(0)
        for trial in 0..<40 {
            let path = directory.appendingPathComponent("key-\(trial)").path
            let done = Atomic(false)
            // A watcher polls the path as fast as it can and keeps the widest mode it sees.
            let watcher = Thread {
                var status = stat()
                while !done.load(ordering: .relaxed) {
                    if stat(path, &status) == 0 {
                        let mode = status.st_mode & 0o777
                        widest.withLock { $0 |= mode }
                    }
                }
            }
            watcher.start()
            try await Task.sleep(for: .milliseconds(2))
            _ = try FileKeyStore(path: path).sealingKey()
            try await Task.sleep(for: .milliseconds(2))
            done.store(true, ordering: .relaxed)
        }
        #expect(widest.withLock { $0 } == 0o600)
    }

    @Test(
        "the server's and the device's databases, folders and key are private to their user",
        arguments: Mode.allCases
    )
    func privateState(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            _ = try await register(client)
            let server = URL(fileURLWithPath: fixture.serverDatabase)
            let device = fixture.directory.appendingPathComponent("device")
            // The server's own files exist on SQLite only (PostgreSQL keeps its data itself).
            let serverFiles =
                fixture.dialect == .sqlite
                ? [
                    (server.path, 0o600), (server.path + "-wal", 0o600),
                    (server.deletingLastPathComponent().path, 0o700),
                ]
                : []
            for (path, expected) in serverFiles + [
                (device.path, 0o700), (device.appendingPathComponent("client.key").path, 0o600),
                (device.appendingPathComponent("client.sqlite").path, 0o600),
            ] {
                let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
                #expect(mode == expected, "\(path)")
            }
        }
    }

    @Test("a database left readable by others by an earlier version is made private when opened")
    func tightensExistingDatabase() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-tighten-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("client.sqlite").path
        for file in [path, path + "-wal"] {
            #expect(FileManager.default.createFile(atPath: file, contents: nil, attributes: [.posixPermissions: 0o644]))
        }
        try PrivateFiles.prepareDatabase(at: path)
        for file in [path, path + "-wal"] {
            #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o600)
        }
    }
}
