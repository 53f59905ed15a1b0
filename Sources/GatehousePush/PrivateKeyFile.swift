import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a file that holds a private key: only when it exists, is a regular file, and neither
/// its group nor others may touch it. Its contents never reach a message.
enum PrivateKeyFile {
    /// The largest key file read: a service account's JSON is a few kilobytes.
    static let maxBytes = 64 * 1024

    /// The contents of the file at `path`, the setting `key` names; `missing` says where such a
    /// file comes from. Throws a ``PushSetupError`` naming the file and the fix otherwise.
    static func read(_ path: String, key: String, missing: String) throws(PushSetupError) -> Data {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { throw PushSetupError(key: key, problem: "\(path) does not exist; \(missing)") }
            throw PushSetupError(
                key: key,
                problem:
                    "cannot read \(path): \(String(cString: strerror(code))); let the user running gatehouse read it"
            )
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        // The checks are of the file opened, so nothing can swap it in between.
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw PushSetupError(key: key, problem: "\(path) is not a file; \(missing)")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw PushSetupError(
                key: key,
                problem: "\(path) holds a private key but its group or others may read it (mode "
                    + "\(String(mode, radix: 8))); make it private to the user running gatehouse: chmod 600 \(path)"
            )
        }
        guard info.st_size <= maxBytes else {
            throw PushSetupError(key: key, problem: "\(path) is larger than a key file (\(maxBytes) bytes); \(missing)")
        }
        do {
            return try handle.read(upToCount: maxBytes) ?? Data()
        } catch {
            throw PushSetupError(key: key, problem: "cannot read \(path): \(error.localizedDescription)")
        }
    }
}
