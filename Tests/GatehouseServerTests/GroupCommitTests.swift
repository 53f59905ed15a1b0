import Foundation
import GRDB
import Synchronization
import Testing

@testable import GatehouseServer

@Suite("Group commit")
struct GroupCommitTests {
    @Test(
        "changes arriving together share commits; one that fails is rolled back alone, unannounced; each answer means durable"
    )
    func groups() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("group-commit-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("test.sqlite").path
        let pool = try DatabasePool(path: path)
        try await pool.write { db in
            try db.execute(sql: "CREATE TABLE rows (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE)")
        }
        let heard = Mutex<Set<String>>([])
        let writer = GroupCommitWriter(pool: pool) { message in heard.withLock { _ = $0.insert(message) } }
        let changes = 400

        // Every third change inserts its row, then breaks the unique key: it must leave nothing.
        let answered = await withTaskGroup(of: (Int, Bool).self) { group in
            for index in 0..<changes {
                group.addTask {
                    do {
                        let value = try await writer.write { db in
                            try db.execute(sql: "INSERT INTO rows (value) VALUES (?)", arguments: ["row \(index)"])
                            try db.announce("row \(index)")
                            if index.isMultiple(of: 3) {
                                try db.execute(sql: "INSERT INTO rows (value) VALUES (?)", arguments: ["row \(index)"])
                            }
                            return index
                        }
                        return (value, true)
                    } catch {
                        return (index, false)
                    }
                }
            }
            var answered: [Int: Bool] = [:]
            for await (index, succeeded) in group { answered[index] = succeeded }
            return answered
        }

        #expect(answered.count == changes)
        for (index, succeeded) in answered { #expect(succeeded == !index.isMultiple(of: 3)) }
        // What a new connection reads is what was answered: the kept rows, and none of the failed.
        let reopened = try DatabaseQueue(path: path)
        let stored = try await reopened.read { db in try Set(String.fetchAll(db, sql: "SELECT value FROM rows")) }
        let expected = Set((0..<changes).filter { !$0.isMultiple(of: 3) }.map { "row \($0)" })
        #expect(stored == expected)
        // Announcements are heard for the committed changes only, not for those rolled back.
        #expect(heard.withLock { $0 } == expected)
        // Fewer transactions than changes: they were grouped.
        #expect(writer.committedGroups >= 1 && writer.committedGroups < changes)
    }
}
