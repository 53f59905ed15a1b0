public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files and folders only their owner can read, created that way from the first byte: a
/// chmod after the write leaves a moment in which another local user can open the file.
/// Databases (OPRF keys, sealed secrets), key files and outboxes (activation codes) use it.
public enum PrivateFiles {
    /// Creates `folder` and any missing parents with mode 0700; an existing folder is left as it is.
    public static func createFolder(_ folder: URL) throws {
        let path = folder.standardizedFileURL.path
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            guard isFolder.boolValue else { throw PrivateFileError(path: path, problem: "it is not a folder") }
            return
        }
        let parent = (path as NSString).deletingLastPathComponent
        if parent != path, !parent.isEmpty { try createFolder(URL(fileURLWithPath: parent)) }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else { throw PrivateFileError(path: path, errno: errno) }
    }

    /// Makes sure the SQLite database at `path` is private before SQLite opens it: a missing one
    /// is created empty with mode 0600 (SQLite gives its -wal and -shm files the database's
    /// mode); an existing one, and its -wal and -shm, lose any group or other access.
    public static func prepareDatabase(at path: String) throws {
        let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            close(descriptor)
            return
        }
        guard errno == EEXIST else { throw PrivateFileError(path: path, errno: errno) }
        for file in [path, path + "-wal", path + "-shm"] {
            var status = stat()
            guard stat(file, &status) == 0, status.st_mode & 0o077 != 0 else { continue }
            guard chmod(file, status.st_mode & 0o700) == 0 else { throw PrivateFileError(path: file, errno: errno) }
        }
    }

    /// Writes `data` to a new file at `path` with mode 0600, whole or not at all: it is written
    /// and synced under a temporary name, then linked into place, which fails if `path` exists.
    /// Returns false (and leaves the existing file alone) when another writer got there first.
    @discardableResult
    public static func writeNew(_ data: Data, to path: String) throws -> Bool {
        let temporary = try writeSynced(data, beside: path)
        defer { unlink(temporary) }
        guard link(temporary, path) == 0 else {
            if errno == EEXIST { return false }
            throw PrivateFileError(path: path, errno: errno)
        }
        return true
    }

    /// Replaces the file at `path` with `data` (mode 0600) in one rename: readers see the old
    /// content or the new, never a part.
    public static func replace(_ data: Data, at path: String) throws {
        let temporary = try writeSynced(data, beside: path)
        guard rename(temporary, path) == 0 else {
            let problem = errno
            unlink(temporary)
            throw PrivateFileError(path: path, errno: problem)
        }
    }

    /// `data` in a new file with mode 0600 next to `path`, synced to disk; returns its path.
    private static func writeSynced(_ data: Data, beside path: String) throws -> String {
        let temporary = path + ".\(UUID().uuidString).tmp"
        let descriptor = open(temporary, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw PrivateFileError(path: temporary, errno: errno) }
        let written = data.withUnsafeBytes { bytes in write(descriptor, bytes.baseAddress, bytes.count) }
        let synced = fsync(descriptor)
        let problem = errno
        close(descriptor)
        guard written == data.count, synced == 0 else {
            unlink(temporary)
            throw PrivateFileError(path: temporary, errno: problem)
        }
        return temporary
    }
}

/// A private file or folder could not be made.
public struct PrivateFileError: Error, Sendable, CustomStringConvertible {
    /// The file or folder that could not be made.
    public var path: String
    /// Why, in words: usually the system's message for the `errno` it met.
    public var problem: String
    /// The path and the problem, as a command prints them.
    public var description: String { "\(path): \(problem)" }

    init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }

    init(path: String, errno: Int32) {
        self.init(path: path, problem: String(cString: strerror(errno)))
    }
}
