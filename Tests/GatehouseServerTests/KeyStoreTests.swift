import Foundation
import GatehouseClient
import Testing

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
}
