import Foundation
import GatehouseKernel

/// The events channels' leases: a profile's open channels at every instance, within
/// ``EventChannelHub/maxChannelsPerProfile``.
extension ServerStore {
    /// Seconds a lease lasts unless renewed: three of the channel's 15 s keep-alives, so a channel
    /// of an instance that died frees its slot within this.
    static let eventChannelLease: Double = 45

    /// Leases one of `profileID`'s `slots` for the channel `id`: false when every slot is held by
    /// a channel open now, at whichever instance. Concurrent leases of one slot meet at its
    /// primary key, and the loser tries the next, so none is given twice.
    func leaseEventChannel(_ id: String, profileID: String, slots: Int, now: Double) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM event_channels WHERE profile_id = ? AND lease_until < ?",
                arguments: [profileID, now]
            )
            for slot in 0..<slots {
                try db.execute(
                    sql: """
                        INSERT INTO event_channels (profile_id, slot, id, lease_until) VALUES (?, ?, ?, ?)
                        ON CONFLICT (profile_id, slot) DO NOTHING
                        """,
                    arguments: [profileID, slot, id, now + Self.eventChannelLease]
                )
                if db.changesCount == 1 { return true }
            }
            return false
        }
    }

    /// Keeps the leases of `ids`, open channels of this instance, for another
    /// ``eventChannelLease``; returns those it found. A lease that is gone (it lapsed while the
    /// database was out of reach, and another change took its slot) is not made again: its
    /// channel must close.
    func renewEventChannels(_ ids: [String], now: Double) async throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        return try await write { db in
            var renewed = Set<String>()
            for batch in stride(from: 0, to: ids.count, by: 500).map({ ids[$0..<min($0 + 500, ids.count)] }) {
                let rows = try String.fetchAll(
                    db,
                    sql: """
                        UPDATE event_channels SET lease_until = ? WHERE id IN (\(Self.placeholders(batch.count)))
                        RETURNING id
                        """,
                    arguments: [now + Self.eventChannelLease] + SQLArguments(batch.map { .text($0) })
                )
                renewed.formUnion(rows)
            }
            return renewed
        }
    }

    /// Frees the slots of closed channels.
    func releaseEventChannels(_ ids: [String]) async throws {
        guard !ids.isEmpty else { return }
        try await write { db in
            for batch in stride(from: 0, to: ids.count, by: 500).map({ ids[$0..<min($0 + 500, ids.count)] }) {
                try db.execute(
                    sql: "DELETE FROM event_channels WHERE id IN (\(Self.placeholders(batch.count)))",
                    arguments: SQLArguments(batch.map { .text($0) })
                )
            }
        }
    }

    private static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}
