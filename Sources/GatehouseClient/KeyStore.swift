public import Crypto
import Foundation
import GatehouseProtocol

/// Where the key that seals the client's secrets comes from. The default keeps it in a file only
/// the user can read; an app plugs in the OS keychain or a TPM by conforming to this protocol.
public protocol KeyStore: Sendable {
    /// The 256-bit key that seals every secret the client stores. Must return the same key every
    /// time; create it on first use.
    func sealingKey() throws -> SymmetricKey
}

/// A key in a file with mode 0600, created on first use.
public struct FileKeyStore: KeyStore {
    /// The key file's path.
    public let path: String

    /// A key store that keeps its key in the file at `path`.
    public init(path: String) { self.path = path }

    /// Reads the key, or creates the file with a new random key on first use. Throws a ``KeyStoreError`` when the file
    /// does not hold 32 bytes, others can read it, or it cannot be created.
    public func sealingKey() throws -> SymmetricKey {
        let manager = FileManager.default
        if let data = manager.contents(atPath: path) {
            guard data.count == 32 else {
                throw KeyStoreError(path: path, problem: "the key file does not hold a 256-bit key")
            }
            let permissions = (try? manager.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? 0
            guard permissions & 0o077 == 0 else {
                throw KeyStoreError(
                    path: path,
                    problem: "the key file is readable by others (mode \(String(permissions, radix: 8)))"
                )
            }
            return SymmetricKey(data: data)
        }
        let key = SymmetricKey(size: .bits256)
        let data = key.withUnsafeBytes { Data($0) }
        // Mode 0600 from creation on, never widened; when another process created the file
        // first, its key is the key.
        do {
            guard try PrivateFiles.writeNew(data, to: path) else { return try sealingKey() }
        } catch {
            throw KeyStoreError(path: path, problem: "the key file could not be created (\(error))")
        }
        return key
    }
}

/// The key store could not give a key.
public struct KeyStoreError: Error, Sendable, CustomStringConvertible {
    /// The key file, or whatever place the key store names.
    public var path: String
    /// What went wrong, in words.
    public var problem: String
    /// The path and the problem, as a command prints them.
    public var description: String { "\(path): \(problem)" }
}
