public import Foundation

/// A database that cannot be opened or used, told as a sentence that names it: what a command
/// prints and what a log line carries, never a Swift type's description.
///
/// Every store turns what its database threw into one of these: the token server's, the hosted
/// login's, XignIn's and the device's SQLite files through ``sqlite(_:_:_:)``, here in one
/// place, and the token server's PostgreSQL database with the reason the server works out from
/// postgres-nio's error.
public struct DatabaseFailure: Error, Sendable, Equatable, LocalizedError, CustomStringConvertible {
    /// What was being done with the database.
    public enum Activity: String, Sendable, Equatable {
        case opening = "open"
        case using = "use"
    }

    /// The database: a SQLite file's path, or a PostgreSQL URL without its password.
    public var database: String
    /// Whether the failure came while opening the database or while using it.
    public var activity: Activity
    /// Why, in words, e.g. "it is not a SQLite database (another kind of file, or a damaged one)".
    public var reason: String

    /// Creates a failure for a database, by default met while opening it.
    public init(database: String, activity: Activity = .opening, reason: String) {
        self.database = database
        self.activity = activity
        self.reason = reason
    }

    /// The sentence a command prints: "Cannot open the database <name>: <reason>."
    public var description: String { "Cannot \(activity.rawValue) the database \(database): \(reason)." }
    /// The same sentence as ``description``, for `localizedDescription`.
    public var errorDescription: String? { description }

    /// `error`, met while opening or using the SQLite database at `path`, as a failure that
    /// names the file: SQLite's result (GRDB's `DatabaseError` reports it as its `CustomNSError`
    /// code), or a file that could not be made private. Anything else (a Gatehouse error, a
    /// cancellation) comes back as it is.
    public static func sqlite(_ path: String, _ activity: Activity = .opening, _ error: any Error) -> any Error {
        if error is DatabaseFailure { return error }
        if let error = error as? PrivateFileError {
            let problem = error.problem.prefix(1).lowercased() + error.problem.dropFirst()
            return DatabaseFailure(
                database: path,
                activity: activity,
                reason: error.path == path ? problem : "\(error.path): \(problem)"
            )
        }
        guard let error = error as? any CustomNSError, type(of: error).errorDomain == "GRDB.DatabaseError" else {
            return error
        }
        let message = error.errorUserInfo[NSLocalizedFailureReasonErrorKey] as? String
        return DatabaseFailure(
            database: path,
            activity: activity,
            reason: sqliteReason(primaryResultCode: Int32(truncatingIfNeeded: error.errorCode & 0xFF), message: message)
        )
    }

    /// What SQLite's primary result code means for the person who runs the command.
    static func sqliteReason(primaryResultCode code: Int32, message: String?) -> String {
        switch code {
        case 26: "it is not a SQLite database (another kind of file, or a damaged one)"
        case 11: "the file is damaged; restore it from a backup"
        case 8:
            "it is read-only (the file, its folder or the file system); it must be writable, and so must its "
                + "folder, where SQLite keeps its -wal and -shm files"
        case 14: "the file cannot be opened; check that its folder exists and that this user may read and write both"
        case 3, 23: "permission denied"
        case 13: "the disk is full"
        case 10: "the disk or the file system failed to read or write it (an I/O error)"
        case 5, 6: "another process keeps it locked; try again"
        case 7: "out of memory"
        default: message.map { "SQLite said: \($0)" } ?? "SQLite failed with result code \(code)"
        }
    }
}
