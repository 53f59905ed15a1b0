import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

/// The provider's signing keys as this instance sees them: read from the store at most every
/// `refreshInterval` seconds, with the keys each algorithm lacks made and a rotation that is due
/// carried out on the way. Instances agree through the store; between two reads an instance may
/// go on signing with a key another one retired, which stays published for that reason.
final class SigningKeyRing: Sendable {
    struct Snapshot: Sendable {
        /// The key that signs, per algorithm.
        var signing: [JSONWebSignature.Algorithm: SigningKey]
        /// Every published public key: signing, next, retired but still published.
        var published: JSONWebKeySet
        var loadedAt: Double
    }

    let store: LoginStore
    let cpuWork: any CPUWorkExecutor
    let rotationPeriod: Double
    /// How long a retired key stays published: the longest-lived token it signed, plus skew.
    let retention: Double
    let refreshInterval: Double
    let logger: Logger
    private let snapshot = Mutex<Snapshot?>(nil)

    init(
        store: LoginStore,
        cpuWork: any CPUWorkExecutor,
        rotationPeriod: Double,
        retention: Double,
        logger: Logger
    ) {
        self.store = store
        self.logger = logger
        self.cpuWork = cpuWork
        self.rotationPeriod = rotationPeriod
        self.retention = retention
        refreshInterval = 10
    }

    /// The keys now; read again when the last read is older than the refresh interval or
    /// `refresh` asks (a token named a key this instance has not seen).
    func keys(now: Double, refresh: Bool = false) async throws -> Snapshot {
        // A forced read (a token names a key this instance has not seen) at most once a second,
        // so tokens with made-up key ids cannot send every request to the database.
        if let current = snapshot.withLock({ $0 }), now >= current.loadedAt,
            now - current.loadedAt < (refresh ? 1 : refreshInterval)
        {
            return current
        }
        let loaded = try await load(now: now)
        let before = snapshot.withLock { current in
            defer { current = loaded }
            return current
        }
        // What operators look for after `signing-keys rotate`: when this instance took it up.
        let signing = loaded.signing.mapValues(\.kid)
        if before.map({ $0.signing.mapValues(\.kid) }) != signing {
            logger.notice(
                "Signing with these keys",
                metadata: [
                    "keys":
                        "\(signing.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue) \($0.value)" })"
                ]
            )
        }
        return loaded
    }

    /// Rotates every algorithm now, whatever its key's age (an operator's command, or a key
    /// feared exposed): the next keys, published already, sign from now on.
    func rotate(now: Double) async throws {
        let stored = try await store.publishedSigningKeys(now: now)
        for algorithm in JSONWebSignature.Algorithm.allCases {
            guard let signing = stored.first(where: { $0.algorithm == algorithm && $0.isSigning }) else { continue }
            let fresh = try await generate(algorithm)
            _ = try await store.rotateSigningKey(
                from: signing.kid,
                algorithm: algorithm,
                newNext: fresh,
                retainUntil: now + retention,
                now: now
            )
        }
        snapshot.withLock { $0 = nil }
    }

    private func generate(_ algorithm: JSONWebSignature.Algorithm) async throws -> SigningKey {
        try await cpuWork.run { try SigningKey.generate(algorithm) }
    }

    private func load(now: Double) async throws -> Snapshot {
        // At most a few rounds: each makes what is missing or rotates what is due, then reads again.
        for _ in 0..<4 {
            let stored = try await store.publishedSigningKeys(now: now)
            var changed = false
            for algorithm in JSONWebSignature.Algorithm.allCases {
                let keys = stored.filter { $0.algorithm == algorithm }
                if let signing = keys.last(where: \.isSigning) {
                    if !keys.contains(where: \.isNext) {
                        try await store.installNextSigningKey(
                            try await generate(algorithm),
                            after: keys.map(\.generation).max() ?? signing.generation,
                            now: now
                        )
                        changed = true
                    } else if let since = signing.signsFrom, now - since >= rotationPeriod {
                        _ = try await store.rotateSigningKey(
                            from: signing.kid,
                            algorithm: algorithm,
                            newNext: try await generate(algorithm),
                            retainUntil: now + retention,
                            now: now
                        )
                        changed = true
                    }
                } else {
                    try await store.installFirstSigningKeys(
                        current: try await generate(algorithm),
                        next: try await generate(algorithm),
                        now: now
                    )
                    changed = true
                }
            }
            if changed { continue }
            var signing: [JSONWebSignature.Algorithm: SigningKey] = [:]
            var published: [JSONWebKey] = []
            for key in stored {
                let parsed = try SigningKey(algorithm: key.algorithm, kid: key.kid, pem: key.pem)
                published.append(try parsed.publicJWK())
                if key.isSigning { signing[key.algorithm] = parsed }
            }
            return Snapshot(signing: signing, published: JSONWebKeySet(keys: published), loadedAt: now)
        }
        throw LoginError("The signing keys could not be settled; try again.")
    }
}
