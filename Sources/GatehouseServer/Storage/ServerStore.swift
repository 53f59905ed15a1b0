import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging
import Synchronization

/// The token server's state, in SQLite (one instance) or PostgreSQL (several instances sharing
/// it), through a ``StorageEngine``.
///
/// The gate every slice's store goes through: the engine, one transaction per change, the
/// server's secrets and the DPoP proof record. Each slice keeps its own store as an extension of
/// this type in its folder (`Flows/FlowStore.swift`, `Tokens/TokenStore.swift`, …): each change
/// is a named method that runs one transaction and keeps its invariants, and no SQL lives
/// outside the stores and `Storage/`. The SQL is written once, in what both engines understand. Dates are stored as seconds since 1970, tokens only as
/// SHA-256 hashes.
final class ServerStore: Sendable {
    let engine: any StorageEngine
    /// Whether the store opened its engine itself, and so closes it (``TokenServer/shutdown()``);
    /// a ``ServerStorage`` the integrator opened is theirs to close.
    let ownsEngine: Bool
    /// Active access tokens' introspection answers, kept exact by the changes that end them.
    let activeTokens = ActiveTokenCache()
    let tokenLifetimes: TokenLifetimes
    /// Failures allowed per profile before it is deregistered; 0 means unlimited.
    let maxFailures: Int
    /// Seconds an attempt stays held while a plugin looks at a message; a request that takes
    /// longer (or dies) loses it, and its answer is not applied.
    static let holdLifetime = FlowMachine.attemptHoldLifetime

    /// How long the tokens this store mints live, in seconds.
    struct TokenLifetimes: Sendable {
        var access: Int
        var refresh: Int
    }

    /// What the store is made with, on either engine.
    struct Settings: Sendable {
        var tokenLifetimes: TokenLifetimes
        var maxFailures: Int
        /// Seconds a registration lasts, by application id (absent: for ever).
        var registrationValidity: [String: Int] = [:]
    }

    /// Seconds a registration lasts, by application id (absent: for ever).
    let registrationValidity: [String: Int]
    /// Authenticates refresh tokens: each names its family and generation, so a rotated one is
    /// recognised as such without a row kept for it (see ``RefreshToken``).
    let refreshTokenKey: SymmetricKey
    /// The key of the DPoP nonces, the same on every instance.
    let dpopNonceSecret: Data
    /// PostgreSQL's hot-path calls that changed nothing, so the whole change ran (a refusal, or a
    /// race lost): rising with successes would mean the fast path is broken.
    let hotPathFallbacks = Atomic<Int>(0)

    private init(
        engine: any StorageEngine,
        ownsEngine: Bool,
        settings: Settings,
        refreshTokenKey: Data,
        dpopNonceSecret: Data
    ) {
        self.engine = engine
        self.ownsEngine = ownsEngine
        tokenLifetimes = settings.tokenLifetimes
        maxFailures = settings.maxFailures
        registrationValidity = settings.registrationValidity
        self.refreshTokenKey = SymmetricKey(data: refreshTokenKey)
        self.dpopNonceSecret = dpopNonceSecret
        engine.subscribe { [activeTokens] announcement in activeTokens.hear(announcement) }
    }

    /// A store in the SQLite file at `path`, opened on the caller's thread. A file that cannot be
    /// opened is a ``DatabaseFailure`` naming it.
    convenience init(sqlitePath path: String, settings: Settings) throws {
        let engine: SQLiteEngine
        let (refresh, nonce): (Data, Data)
        do {
            engine = try SQLiteEngine(path: path)
            (refresh, nonce) = try engine.writeNow { db in
                (try Self.secret("refresh-token", db), try Self.secret("dpop-nonce", db))
            }
        } catch {
            throw DatabaseFailure.sqlite(path, .opening, error)
        }
        self.init(
            engine: engine,
            ownsEngine: true,
            settings: settings,
            refreshTokenKey: refresh,
            dpopNonceSecret: nonce
        )
    }

    /// A store in `database`, migrated to this version's schema.
    static func open(_ database: ServerDatabase, settings: Settings, logger: Logger) async throws -> ServerStore {
        if case .sqlite(let path) = database { return try ServerStore(sqlitePath: path, settings: settings) }
        let storage = try await ServerStorage.open(database, logger: logger)
        do {
            return try await open(on: storage, settings: settings, ownsEngine: true)
        } catch {
            await storage.shutdown()
            throw error
        }
    }

    /// A store on `storage`'s engine, which it closes only when `ownsEngine`.
    static func open(on storage: ServerStorage, settings: Settings, ownsEngine: Bool) async throws -> ServerStore {
        do {
            let (refresh, nonce) = try await storage.engine.write { db in
                (try Self.secret("refresh-token", db), try Self.secret("dpop-nonce", db))
            }
            return ServerStore(
                engine: storage.engine,
                ownsEngine: ownsEngine,
                settings: settings,
                refreshTokenKey: refresh,
                dpopNonceSecret: nonce
            )
        } catch {
            throw DatabaseFailure(database: storage.database.description, reason: PostgresSession.reason(error))
        }
    }

    /// Runs `change` as one atomic, durable change and returns its result once it is durable.
    /// On SQLite it shares its commit with the changes that arrive with it; on PostgreSQL it
    /// runs with the row locks its statements take, and again from the start after a deadlock.
    /// In a traced request it is a `db.write` span naming the store method (`function`).
    func write<T: Sendable>(
        function: String = #function,
        _ change: @escaping @Sendable (any SQLSession) throws -> T
    ) async throws -> T {
        try await ServerTracing.database("db.write", engine.dialect, function: function) {
            try await engine.write(change)
        }
    }

    /// Every read, as one read-only snapshot; in a traced request a `db.read` span.
    func lookup<T: Sendable>(
        function: String = #function,
        _ body: @escaping @Sendable (any SQLSession) throws -> T
    ) async throws -> T {
        try await ServerTracing.database("db.read", engine.dialect, function: function) {
            try await engine.read(body)
        }
    }

    /// A lookup of one statement (``StorageEngine/readStatement(_:)``): on PostgreSQL no
    /// transaction round trips around it; in a traced request a `db.read` span.
    func lookupStatement<T: Sendable>(
        function: String = #function,
        _ body: @escaping @Sendable (any SQLSession) throws -> T
    ) async throws -> T {
        try await ServerTracing.database("db.read", engine.dialect, function: function) {
            try await engine.readStatement(body)
        }
    }

    /// The named secret, made (32 random bytes) the first time any instance asks for it.
    private static func secret(_ name: String, _ db: any SQLSession) throws -> Data {
        try db.execute(
            sql: "INSERT INTO server_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
            arguments: [name, Data.random(count: 32)]
        )
        guard
            let value = try Data.fetchOne(db, sql: "SELECT value FROM server_secrets WHERE name = ?", arguments: [name])
        else { throw ServerDatabaseError("The server secret \(name) could not be stored.") }
        return value
    }

    // MARK: - DPoP proofs

    /// A DPoP proof about to authorise a change: recorded in the change's own transaction, so a
    /// replayed proof is refused and a refused request leaves nothing behind.
    struct ProofUse: Sendable {
        var keyThumbprint: String
        var jti: String
        var now: Double
    }

    func record(_ proof: ProofUse, _ db: any SQLSession) throws {
        // Spent proofs go as new ones come on SQLite, where changes run one at a time anyway. On
        // PostgreSQL that range delete in every change would make concurrent changes wait for
        // each other over the same expired rows, so the sweep (``removeExpiredState``) takes them.
        if db.dialect == .sqlite {
            try db.execute(sql: "DELETE FROM dpop_proofs WHERE expires_at < ?", arguments: [proof.now])
        }
        do {
            try db.execute(
                sql: "INSERT INTO dpop_proofs (jti, expires_at) VALUES (?, ?)",
                arguments: [proof.keyThumbprint + ":" + proof.jti, proof.now + 2 * DPoP.allowedClockSkew]
            )
        } catch is UniqueConstraintViolation {
            throw StoreRefusal.proof("The DPoP proof was already used.")
        }
    }

    static func tokenHash(_ token: String) -> Data { Data(SHA256.hash(data: Data(token.utf8))) }
}
