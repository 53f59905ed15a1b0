public import Foundation

/// Where a plugin keeps its small pieces of state (a wrapped key, registration data), scoped to
/// one plugin and one profile by whoever hands it over.
///
/// The client SDK backs it with its sealed SQLite store; tests use `InMemoryKeyValueStore`
/// from GatehouseTesting.
public protocol KeyValueStore: Sendable {
    func value(forKey key: String) async throws -> Data?
    func setValue(_ value: Data, forKey key: String) async throws
    func removeValue(forKey key: String) async throws
    /// Removes every value, e.g. when the profile is deregistered.
    func removeAll() async throws
}
