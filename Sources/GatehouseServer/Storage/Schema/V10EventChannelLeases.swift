import GRDB

extension SchemaMigration {
    /// The events channels open for each profile, at every instance: one leased slot a row, so
    /// instances together keep a profile's channels within the cap, however they are spread.
    static let eventChannelLeases = SchemaMigration(
        "v10-event-channel-leases",
        sqlite: { db in
            try db.create(table: "event_channels") { table in
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade)
                // 0 up to the cap less one: a second channel in a slot is a conflict, not a count.
                table.column("slot", .integer).notNull()
                table.column("id", .text).notNull().unique()
                // The channel's instance renews it while it is open; past it, the slot is free.
                table.column("lease_until", .double).notNull()
                table.primaryKey(["profile_id", "slot"])
            }
        },
        postgres: [
            """
            CREATE TABLE event_channels (profile_id TEXT NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
                slot INTEGER NOT NULL, id TEXT NOT NULL UNIQUE, lease_until DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (profile_id, slot))
            """
        ]
    )
}
