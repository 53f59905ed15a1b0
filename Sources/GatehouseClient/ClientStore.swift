import Crypto
import Foundation
import GRDB
import GatehouseKernel

/// The client's state in SQLite: the device registration, profiles and plugin values. Every
/// secret (private keys, plugin values) is sealed with AES-GCM under the key store's key, with
/// the row's identity as associated data so sealed values cannot be swapped between rows.
final class ClientStore: Sendable {
    let queue: DatabaseQueue
    private let key: SymmetricKey

    init(path: String, keyStore: any KeyStore) throws {
        key = try keyStore.sealingKey()
        var configuration = Configuration()
        configuration.label = "gatehouse.client"
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "device") { table in
                table.primaryKey("server", .text)
                table.column("client_id", .text).notNull()
                table.column("sealed_key", .blob).notNull()
            }
            try db.create(table: "profiles") { table in
                table.primaryKey("id", .text)
                table.column("server", .text).notNull()
                table.column("identity_provider", .text).notNull()
                table.column("sealed_key", .blob).notNull()
                table.column("created_at", .double).notNull()
            }
            try db.create(table: "plugin_values") { table in
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade)
                table.column("plugin", .text).notNull()
                table.column("key", .text).notNull()
                table.column("sealed_value", .blob).notNull()
                table.primaryKey(["profile_id", "plugin", "key"])
            }
        }
        try migrator.migrate(queue)
    }

    func seal(_ data: Data, context: String) throws -> Data {
        guard let combined = try AES.GCM.seal(data, using: key, authenticating: Data(context.utf8)).combined else {
            throw GenericError(.dataStorageNotAvailable, message: "A secret could not be sealed.")
        }
        return combined
    }

    func open(_ sealed: Data, context: String) throws -> Data {
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: key, authenticating: Data(context.utf8))
        } catch {
            throw GenericError(
                .unrecoverableDataState,
                message: "A stored secret could not be opened; the data or its key changed."
            )
        }
    }

    // MARK: Device

    struct Device: Sendable {
        var clientID: String
        var key: P256.Signing.PrivateKey
    }

    func device(server: String) throws -> Device? {
        guard
            let row = try queue.read({ db in
                try Row.fetchOne(db, sql: "SELECT * FROM device WHERE server = ?", arguments: [server])
            })
        else { return nil }
        let clientID: String = row["client_id"]
        let raw = try open(row["sealed_key"], context: "device|\(server)|\(clientID)")
        return Device(clientID: clientID, key: try P256.Signing.PrivateKey(rawRepresentation: raw))
    }

    func saveDevice(_ device: Device, server: String) throws {
        let sealed = try seal(device.key.rawRepresentation, context: "device|\(server)|\(device.clientID)")
        try queue.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO device (server, client_id, sealed_key) VALUES (?, ?, ?)",
                arguments: [server, device.clientID, sealed]
            )
        }
    }

    // MARK: Profiles

    struct StoredProfile: Sendable {
        var profile: UserProfile
        var identityProvider: String
        var key: P256.Signing.PrivateKey
    }

    func profiles(server: String) throws -> [UserProfile] {
        try queue.read { db in
            try String.fetchAll(
                db,
                sql: "SELECT id FROM profiles WHERE server = ? ORDER BY created_at, id",
                arguments: [server]
            )
        }.map(UserProfile.init)
    }

    func profile(_ id: String, server: String) throws -> StoredProfile? {
        guard
            let row = try queue.read({ db in
                try Row.fetchOne(
                    db,
                    sql: "SELECT * FROM profiles WHERE id = ? AND server = ?",
                    arguments: [id, server]
                )
            })
        else { return nil }
        let raw = try open(row["sealed_key"], context: "profile|\(server)|\(id)")
        return StoredProfile(
            profile: UserProfile(id: id),
            identityProvider: row["identity_provider"],
            key: try P256.Signing.PrivateKey(rawRepresentation: raw)
        )
    }

    /// Saves a profile and its plugin values in one transaction, replacing what the profile had.
    func saveProfile(
        _ stored: StoredProfile,
        server: String,
        pluginValues: [String: [String: Data]],
        replacingValues: Bool
    ) throws {
        let id = stored.profile.id
        let sealedKey = try seal(stored.key.rawRepresentation, context: "profile|\(server)|\(id)")
        var sealedValues: [(String, String, Data)] = []
        for (plugin, values) in pluginValues {
            for (key, value) in values {
                sealedValues.append((plugin, key, try seal(value, context: "value|\(id)|\(plugin)|\(key)")))
            }
        }
        let now = Date().timeIntervalSince1970
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO profiles (id, server, identity_provider, sealed_key, created_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET identity_provider = excluded.identity_provider, sealed_key = excluded.sealed_key
                    """,
                arguments: [id, server, stored.identityProvider, sealedKey, now]
            )
            if replacingValues {
                try db.execute(sql: "DELETE FROM plugin_values WHERE profile_id = ?", arguments: [id])
            }
            for (plugin, key, sealed) in sealedValues {
                try db.execute(
                    sql:
                        "INSERT OR REPLACE INTO plugin_values (profile_id, plugin, key, sealed_value) VALUES (?, ?, ?, ?)",
                    arguments: [id, plugin, key, sealed]
                )
            }
        }
    }

    func removeProfile(_ id: String) throws {
        try queue.write { db in try db.execute(sql: "DELETE FROM profiles WHERE id = ?", arguments: [id]) }
    }

    // MARK: Plugin values

    func pluginValue(profile: String, plugin: String, key: String) throws -> Data? {
        guard
            let sealed = try queue.read({ db in
                try Data.fetchOne(
                    db,
                    sql: "SELECT sealed_value FROM plugin_values WHERE profile_id = ? AND plugin = ? AND key = ?",
                    arguments: [profile, plugin, key]
                )
            })
        else { return nil }
        return try open(sealed, context: "value|\(profile)|\(plugin)|\(key)")
    }

    func pluginValues(profile: String, plugin: String) throws -> [String: Data] {
        let rows = try queue.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT key, sealed_value FROM plugin_values WHERE profile_id = ? AND plugin = ?",
                arguments: [profile, plugin]
            ).map { ($0["key"] as String, $0["sealed_value"] as Data) }
        }
        var values: [String: Data] = [:]
        for (key, sealed) in rows { values[key] = try open(sealed, context: "value|\(profile)|\(plugin)|\(key)") }
        return values
    }
}

/// A plugin's view of its values for one profile, staged in memory: nothing reaches the database
/// until the flow that wrote them succeeds, so a failed re-registration or PIN change leaves the
/// old values intact.
actor StagedPluginStorage: KeyValueStore {
    private(set) var values: [String: Data]
    private(set) var cleared = false

    init(_ values: [String: Data]) { self.values = values }

    func value(forKey key: String) -> Data? { values[key] }
    func setValue(_ value: Data, forKey key: String) { values[key] = value }
    func removeValue(forKey key: String) { values[key] = nil }
    func removeAll() {
        values.removeAll()
        cleared = true
    }
}

extension ClientStore {
    /// Forgets the device registration and every profile for `server`: the server no longer knows
    /// this device.
    func forgetDevice(server: String) throws {
        try queue.write { db in
            try db.execute(sql: "DELETE FROM device WHERE server = ?", arguments: [server])
            try db.execute(sql: "DELETE FROM profiles WHERE server = ?", arguments: [server])
        }
    }
}
