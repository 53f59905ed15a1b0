import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import _CryptoExtras

/// Password hashes with scrypt (RFC 7914), a memory-hard function: each guess costs an attacker
/// `128 · r · N` bytes of memory as well as time, which GPUs and ASICs cannot share cheaply.
///
/// A hash is kept as one self-describing string, `$scrypt$ln=15,r=8,p=1$<salt>$<hash>` (base64url),
/// so the cost can be raised later and old hashes still verify.
public struct PasswordHasher: Sendable, Hashable {
    /// log2 of scrypt's N (CPU and memory cost).
    public var logN: Int
    /// scrypt's r (block size).
    public var blockSize: Int
    /// scrypt's p (parallelism).
    public var parallelism: Int

    /// N = 2^15, r = 8, p = 1: 32 MiB and tens of milliseconds per hash, OWASP's recommendation.
    public static let standard = PasswordHasher(logN: 15, blockSize: 8, parallelism: 1)

    /// A hasher with N = 2^`logN`, r = `blockSize` and p = `parallelism`. The values are not
    /// checked here: ``hash(_:)`` throws when scrypt refuses them. Memory per hash is
    /// `128 · r · 2^logN` bytes, so each step of `logN` doubles both time and memory.
    public init(logN: Int, blockSize: Int, parallelism: Int) {
        self.logN = logN
        self.blockSize = blockSize
        self.parallelism = parallelism
    }

    /// A new hash of `password` with a fresh 16-byte salt.
    public func hash(_ password: String) throws -> String {
        let salt = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        let derived = try derive(password, salt: salt)
        return
            "$scrypt$ln=\(logN),r=\(blockSize),p=\(parallelism)$\(salt.base64URLEncodedString)$\(derived.base64URLEncodedString)"
    }

    /// A hash of no password, for checking a password against when the user does not exist, so
    /// that a refusal takes as long either way: verifying against it costs one derivation with
    /// these parameters, like a real hash, and matches nothing. Made without deriving anything,
    /// so it costs a starting server nothing.
    public func decoy() -> String {
        "$scrypt$ln=\(logN),r=\(blockSize),p=\(parallelism)$\(Data.random(count: 16).base64URLEncodedString)$"
            + Data.random(count: 32).base64URLEncodedString
    }

    /// Whether `password` matches `stored`, with the parameters `stored` names. Compared in
    /// constant time; a malformed hash matches nothing.
    public static func verify(_ password: String, against stored: String) -> Bool {
        let parts = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "scrypt",
            let hasher = PasswordHasher(parameters: parts[2]),
            let salt = Data(base64URLEncoded: parts[3]), let expected = Data(base64URLEncoded: parts[4]),
            expected.count == 32,
            let derived = try? hasher.derive(password, salt: salt)
        else { return false }
        return ConstantTime.equals(derived, expected)
    }

    private init?(parameters: Substring) {
        var values: [String: Int] = [:]
        for pair in parameters.split(separator: ",") {
            let field = pair.split(separator: "=", maxSplits: 1)
            guard field.count == 2, let value = Int(field[1]) else { return nil }
            values[String(field[0])] = value
        }
        // Bounds keep a crafted hash from costing the server more than the strongest one it makes.
        guard let logN = values["ln"], (10...20).contains(logN), let r = values["r"], (1...16).contains(r),
            let p = values["p"], (1...4).contains(p)
        else { return nil }
        self.init(logN: logN, blockSize: r, parallelism: p)
    }

    private func derive(_ password: String, salt: Data) throws -> Data {
        let key = try KDF.Scrypt.deriveKey(
            from: Array(password.utf8),
            salt: salt,
            outputByteCount: 32,
            rounds: 1 << logN,
            blockSize: blockSize,
            parallelism: parallelism
        )
        return key.withUnsafeBytes { Data($0) }
    }
}
