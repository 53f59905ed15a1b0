import Crypto
import Foundation
import GRDB
import GatehouseKernel
import GatehouseProtocol

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
        try PrivateFiles.prepareDatabase(at: path)
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
        // Which authenticators each profile has registered, and the one it prefers.
        migrator.registerMigration("v2-authenticators") { db in
            try db.alter(table: "profiles") { table in table.add(column: "preferred_authenticator", .text) }
            try db.create(table: "authenticators") { table in
                table.column("profile_id", .text).notNull().references("profiles", onDelete: .cascade)
                table.column("authenticator", .text).notNull()
                table.column("registered_at", .double).notNull()
                table.primaryKey(["profile_id", "authenticator"])
            }
        }
        // A profile's mobile-auth enrolment: its HPKE key (sealed), the server's, its push token.
        migrator.registerMigration("v3-mobile-auth") { db in
            try db.create(table: "mobile_auth") { table in
                table.primaryKey("profile_id", .text).references("profiles", onDelete: .cascade)
                table.column("sealed_key", .blob).notNull()
                table.column("server_key", .blob).notNull()
                table.column("push_token", .text)
                table.column("platform", .text)
            }
        }
        migrator.registerMigration("v4-subject") { db in
            try db.alter(table: "profiles") { table in table.add(column: "subject", .text) }
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
        /// The user's identifier at the identity provider (profiles registered before it was kept: nil).
        var subject: String? = nil
    }

    func profiles(server: String) throws -> [UserProfile] {
        try profileSummaries(server: server).map(\.profile)
    }

    /// Each profile with the identity provider it registered with and when, oldest first.
    func profileSummaries(server: String) throws -> [ProfileSummary] {
        try queue.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, identity_provider, subject, created_at FROM profiles WHERE server = ? ORDER BY created_at, id
                    """,
                arguments: [server]
            ).map {
                ProfileSummary(
                    profile: UserProfile(id: $0["id"]),
                    identityProvider: $0["identity_provider"],
                    subject: $0["subject"],
                    registeredAt: Date(timeIntervalSince1970: $0["created_at"])
                )
            }
        }
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

    /// What a finished flow changes for a profile, written in one transaction.
    struct ProfileChanges: Sendable {
        /// A registration: the profile itself (its key), replacing everything it had.
        var profile: StoredProfile?
        /// Each touched authenticator's complete values after the flow.
        var values: [String: [String: Data]] = [:]
        /// Authenticators registered by the flow.
        var registered: [String] = []
        /// Authenticators the flow found gone.
        var removed: [String] = []
    }

    /// Applies a finished flow's changes: nothing before the flow succeeded, all of it at once.
    func save(_ changes: ProfileChanges, profile id: String, server: String) throws {
        var sealedKey: Data?
        if let stored = changes.profile {
            sealedKey = try seal(stored.key.rawRepresentation, context: "profile|\(server)|\(id)")
        }
        var sealedValues: [(String, String, Data)] = []
        for (plugin, values) in changes.values {
            for (key, value) in values {
                sealedValues.append((plugin, key, try seal(value, context: "value|\(id)|\(plugin)|\(key)")))
            }
        }
        let now = Date().timeIntervalSince1970
        try queue.write { db in
            if let stored = changes.profile, let sealedKey {
                try db.execute(
                    sql: """
                        INSERT INTO profiles (id, server, identity_provider, subject, sealed_key, created_at)
                        VALUES (?, ?, ?, ?, ?, ?)
                        ON CONFLICT(id) DO UPDATE SET identity_provider = excluded.identity_provider,
                            subject = excluded.subject, sealed_key = excluded.sealed_key, preferred_authenticator = NULL
                        """,
                    arguments: [id, server, stored.identityProvider, stored.subject, sealedKey, now]
                )
                try db.execute(sql: "DELETE FROM plugin_values WHERE profile_id = ?", arguments: [id])
                try db.execute(sql: "DELETE FROM authenticators WHERE profile_id = ?", arguments: [id])
            }
            for plugin in Set(changes.values.keys).union(changes.removed) {
                try db.execute(
                    sql: "DELETE FROM plugin_values WHERE profile_id = ? AND plugin = ?",
                    arguments: [id, plugin]
                )
            }
            for (plugin, key, sealed) in sealedValues {
                try db.execute(
                    sql: "INSERT INTO plugin_values (profile_id, plugin, key, sealed_value) VALUES (?, ?, ?, ?)",
                    arguments: [id, plugin, key, sealed]
                )
            }
            for authenticator in changes.registered {
                try db.execute(
                    sql:
                        "INSERT OR REPLACE INTO authenticators (profile_id, authenticator, registered_at) VALUES (?, ?, ?)",
                    arguments: [id, authenticator, now]
                )
            }
            for authenticator in changes.removed {
                try db.execute(
                    sql: "DELETE FROM authenticators WHERE profile_id = ? AND authenticator = ?",
                    arguments: [id, authenticator]
                )
                // Deregistering the preferred authenticator returns the profile to the PIN.
                try db.execute(
                    sql:
                        "UPDATE profiles SET preferred_authenticator = NULL WHERE id = ? AND preferred_authenticator = ?",
                    arguments: [id, authenticator]
                )
            }
        }
    }

    // MARK: Authenticators

    func registeredAuthenticators(profile: String) throws -> [String] {
        try queue.read { db in
            try String.fetchAll(
                db,
                sql:
                    "SELECT authenticator FROM authenticators WHERE profile_id = ? ORDER BY registered_at, authenticator",
                arguments: [profile]
            )
        }
    }

    /// The profile's preferred authenticator; `nil` means the PIN.
    func preferredAuthenticator(profile: String) throws -> String? {
        try queue.read { db in
            try String.fetchOne(
                db,
                sql: "SELECT preferred_authenticator FROM profiles WHERE id = ?",
                arguments: [profile]
            )
        }
    }

    func setPreferredAuthenticator(_ authenticator: String?, profile: String) throws {
        try queue.write { db in
            try db.execute(
                sql: "UPDATE profiles SET preferred_authenticator = ? WHERE id = ?",
                arguments: [authenticator, profile]
            )
        }
    }

    func removeProfile(_ id: String) throws {
        try queue.write { db in try db.execute(sql: "DELETE FROM profiles WHERE id = ?", arguments: [id]) }
    }

    // MARK: Plugin values

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

extension ClientStore {
    /// A profile's mobile-auth enrolment on this device.
    struct MobileAuthEnrolment: Sendable {
        var key: Curve25519.KeyAgreement.PrivateKey
        var serverKey: Curve25519.KeyAgreement.PublicKey
        var pushToken: String?
    }

    func saveMobileAuthEnrolment(
        profile: String,
        key: Curve25519.KeyAgreement.PrivateKey,
        serverKey: Curve25519.KeyAgreement.PublicKey
    ) throws {
        let sealed = try seal(key.rawRepresentation, context: "mobile-auth|\(profile)")
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO mobile_auth (profile_id, sealed_key, server_key) VALUES (?, ?, ?)
                    ON CONFLICT(profile_id) DO UPDATE SET sealed_key = excluded.sealed_key,
                        server_key = excluded.server_key, push_token = NULL, platform = NULL
                    """,
                arguments: [profile, sealed, serverKey.rawRepresentation]
            )
        }
    }

    func savePushToken(_ token: String, platform: String, profile: String) throws {
        try queue.write { db in
            try db.execute(
                sql: "UPDATE mobile_auth SET push_token = ?, platform = ? WHERE profile_id = ?",
                arguments: [token, platform, profile]
            )
        }
    }

    func mobileAuthEnrolment(profile: String) throws -> MobileAuthEnrolment? {
        guard
            let row = try queue.read({ db in
                try Row.fetchOne(db, sql: "SELECT * FROM mobile_auth WHERE profile_id = ?", arguments: [profile])
            })
        else { return nil }
        do {
            return MobileAuthEnrolment(
                key: try Curve25519.KeyAgreement.PrivateKey(
                    rawRepresentation: try open(row["sealed_key"], context: "mobile-auth|\(profile)")
                ),
                serverKey: try Curve25519.KeyAgreement.PublicKey(rawRepresentation: row["server_key"] as Data),
                pushToken: row["push_token"]
            )
        } catch let error as GenericError {
            throw error
        } catch {
            throw GenericError(.unrecoverableDataState, message: "The mobile-auth keys of \(profile) are damaged.")
        }
    }

    func removeMobileAuthEnrolment(profile: String) throws {
        try queue.write { db in
            try db.execute(sql: "DELETE FROM mobile_auth WHERE profile_id = ?", arguments: [profile])
        }
    }
}
