import Foundation
import GRDB

/// Copies the write-ahead log into the database file from a connection of its own, a few times a
/// second, instead of SQLite's automatic checkpoint, which runs inside whichever commit crosses
/// the log's threshold: that commit (and every change waiting behind it) would wait for the copy
/// and the database file's fsync. A passive checkpoint never blocks the writer or readers.
///
/// The log starts again from its beginning only once a checkpoint has caught up with it, which
/// one running beside a busy writer never quite does: when the log has grown past
/// `restartFrames`, the writer is asked (``GroupCommitWriter/requestCheckpoint()``) to run one
/// between two groups, which then has only the last few frames to copy.
final class WALCheckpointer: Sendable {
    private let task: Task<Void, Never>

    init(
        path: String,
        every interval: Duration = .milliseconds(250),
        restartFrames: Int = 4_000,
        commits: @escaping @Sendable () -> Int,
        requestRestart: @escaping @Sendable () -> Void
    ) throws {
        var configuration = Configuration()
        configuration.label = "gatehouse.server.checkpointer"
        configuration.busyMode = .timeout(1)
        let connection = try DatabaseQueue(path: path, configuration: configuration)
        task = Task.detached(priority: .utility) {
            var checkpointed = -1
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                // Nothing committed since the last one: nothing to copy (an idle server sleeps).
                let committed = commits()
                guard committed != checkpointed else { continue }
                checkpointed = committed
                let frames = try? await connection.writeWithoutTransaction { db in
                    try db.checkpoint(.passive).walFrameCount
                }
                if let frames, frames > restartFrames { requestRestart() }
            }
        }
    }

    deinit { task.cancel() }
}
