import Foundation
import GRDB
import Synchronization

/// Durable writes in groups: the changes that arrive while a transaction commits wait and then
/// share the next one, so one fsync makes many of them durable, and each caller is answered only
/// once its change is. Every change runs in a savepoint of its own: one that throws is rolled
/// back alone and leaves the others, as if each had its own transaction. Alone, a change is
/// committed at once; under load the groups grow by themselves, with no timer to wait for.
final class GroupCommitWriter: Sendable {
    private let pool: DatabasePool
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "gatehouse.server.group-commit")
    private let groups = Atomic<Int>(0)
    private let checkpointRequested = Atomic<Bool>(false)
    /// The most changes one transaction carries, so that one group's latency stays bounded.
    static let maximumGroup = 256

    private struct State {
        var pending: [any GroupedChange] = []
        var draining = false
    }

    /// Where the changes' announcements go once their group has committed.
    private let announce: @Sendable (String) -> Void

    init(pool: DatabasePool, announce: @escaping @Sendable (String) -> Void) {
        self.pool = pool
        self.announce = announce
    }

    /// Runs a passive checkpoint between the next two groups (see ``WALCheckpointer``).
    func requestCheckpoint() { checkpointRequested.store(true, ordering: .relaxed) }

    /// Transactions committed so far (each carried one group).
    var committedGroups: Int { groups.load(ordering: .relaxed) }

    /// Changes waiting for the next group (not those of the group committing now).
    var pendingChanges: Int { state.withLock { $0.pending.count } }

    /// Runs `change` in the next group and returns its result once the group is durable.
    func write<T: Sendable>(_ change: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(PendingChange(change: change, continuation: continuation))
        }
    }

    private func enqueue(_ change: any GroupedChange) {
        let startDraining = state.withLock { state in
            state.pending.append(change)
            guard !state.draining else { return false }
            state.draining = true
            return true
        }
        if startDraining { queue.async { self.drain() } }
    }

    private func drain() {
        while true {
            let group = state.withLock { state -> [any GroupedChange] in
                let taken = Array(state.pending.prefix(Self.maximumGroup))
                state.pending.removeFirst(taken.count)
                if taken.isEmpty { state.draining = false }
                return taken
            }
            guard !group.isEmpty else { return }
            do {
                try pool.writeWithoutTransaction { db in
                    if checkpointRequested.exchange(false, ordering: .relaxed) {
                        _ = try? db.checkpoint(.passive)
                    }
                    try db.inTransaction(.immediate) {
                        for change in group {
                            // A change whose writes could not be undone must not be committed
                            // with the others: then nothing is.
                            guard change.run(db, announce: announce) else { throw GroupCommitError.rollbackFailed }
                            // SQLite ends the transaction itself on some errors (a full disk):
                            // what ran before is gone too, so the whole group fails.
                            guard db.isInsideTransaction else { throw GroupCommitError.transactionEnded }
                        }
                        return .commit
                    }
                }
                groups.add(1, ordering: .relaxed)
                for change in group { change.finish(committed: nil) }
            } catch {
                for change in group { change.finish(committed: error) }
            }
        }
    }
}

enum GroupCommitError: Error, CustomStringConvertible {
    case transactionEnded
    case rollbackFailed

    var description: String {
        switch self {
        case .transactionEnded: "The database ended the transaction; nothing of it was kept."
        case .rollbackFailed: "A failed change could not be undone; nothing of its transaction was kept."
        }
    }
}

/// A change waiting for its group: run inside the group's transaction, then answered.
private protocol GroupedChange: Sendable {
    /// Runs the change in a savepoint of its own; false when its writes could not be undone
    /// after it failed (the group must then fail).
    func run(_ db: Database, announce: @escaping @Sendable (String) -> Void) -> Bool
    /// The group was committed (nil) or failed with an error (nothing of it is kept).
    func finish(committed error: (any Error)?)
}

private final class PendingChange<T: Sendable>: GroupedChange {
    let change: @Sendable (any SQLSession) throws -> T
    let continuation: CheckedContinuation<T, any Error>
    /// Set by `run` and read by `finish`, both on the writer's queue: the change's result, and
    /// what it asked to run once committed.
    private let outcome = Mutex<(Result<T, any Error>, [@Sendable () -> Void])?>(nil)

    init(change: @escaping @Sendable (any SQLSession) throws -> T, continuation: CheckedContinuation<T, any Error>) {
        self.change = change
        self.continuation = continuation
    }

    func run(_ db: Database, announce: @escaping @Sendable (String) -> Void) -> Bool {
        // The savepoint by hand rather than GRDB's inSavepoint, which does not report a failed
        // ROLLBACK TO: here that failure fails the whole group.
        var result: Result<T, any Error>
        var undone = true
        let session = SQLiteSession(db, announcements: announce)
        do {
            try session.execute(sql: "SAVEPOINT change")
        } catch {
            outcome.withLock { $0 = (.failure(error), []) }
            return false
        }
        do {
            let value = try change(session)
            try session.execute(sql: "RELEASE SAVEPOINT change")
            result = .success(value)
        } catch {
            result = .failure(error)
            do {
                try session.execute(sql: "ROLLBACK TO SAVEPOINT change")
                try session.execute(sql: "RELEASE SAVEPOINT change")
            } catch {
                undone = false
            }
        }
        // A change rolled back to its savepoint committed nothing: its actions do not run.
        var committedActions: [@Sendable () -> Void] = []
        if case .success = result { committedActions = session.committedActions }
        outcome.withLock { $0 = (result, committedActions) }
        return undone
    }

    func finish(committed error: (any Error)?) {
        if let error { return continuation.resume(throwing: error) }
        guard let (result, actions) = outcome.withLock({ $0 }) else {
            return continuation.resume(throwing: GroupCommitError.transactionEnded)
        }
        // Before the caller hears of the change: what it ended is forgotten first.
        for action in actions { action() }
        continuation.resume(with: result)
    }
}
