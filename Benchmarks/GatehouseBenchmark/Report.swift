import Crypto
import Foundation
import GatehouseProtocol
import Histogram
import _CryptoExtras

// Figures, floors, the token table's filling, and start-up: what the benchmark reports besides
// the load itself.

/// One operation at one concurrency.
struct LevelFigures {
    var clients: Int
    var operations = 0
    var errors = 0
    var firstError: String?
    var latencies = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    var elapsed: Double
    var serverCPU: Double
    var generatorCPU: Double
    var cores: Int
    var floor: Double
    var storedTokens: Int
    /// Bytes the server wrote to storage during the run.
    var writtenBytes = 0.0
    /// Proofs or blinded elements made in the timed window because the prepared stock ran out.
    var madeLive = 0

    init(
        clients: Int,
        connections: [ConnectionFigures],
        elapsed: Double,
        serverCPU: Double,
        generatorCPU: Double,
        cores: Int,
        floor: Double,
        storedTokens: Int
    ) {
        self.clients = clients
        self.elapsed = elapsed
        self.serverCPU = serverCPU
        self.generatorCPU = generatorCPU
        self.cores = cores
        self.floor = floor
        self.storedTokens = storedTokens
        for connection in connections {
            operations += connection.operations
            errors += connection.errors
            firstError = firstError ?? connection.firstError
            latencies.add(connection.latencies)
        }
    }

    var rate: Double { Double(operations) / elapsed }
    var serverMillisecondsPerOperation: Double { operations == 0 ? 0 : serverCPU * 1000 / Double(operations) }
    func milliseconds(_ percentile: Double) -> Double { Double(latencies.valueAtPercentile(percentile)) / 1000 }

    var row: String {
        String(
            format: "%7d %10.1f %8.2f %8.2f %9.2f %7d %14.3f %8.1f %10.0f%% %10.0f%% %8.1f %6d",
            clients,
            rate,
            milliseconds(50),
            milliseconds(99),
            milliseconds(99.9),
            errors,
            serverMillisecondsPerOperation,
            floor > 0 ? serverMillisecondsPerOperation / floor : 0,
            100 * serverCPU / (elapsed * Double(cores)),
            100 * generatorCPU / (elapsed * Double(cores)),
            operations == 0 ? 0 : writtenBytes / 1024 / Double(operations),
            madeLive
        )
    }
}

enum Report {
    static let header =
        "clients      ops/s   p50 ms   p99 ms  p99.9 ms  errors  server CPU ms/op  × floor  server/machine  generator/machine  KiB written/op  live"

    static func title(_ operation: String) -> String {
        switch operation {
        case "introspect": "Introspection (RFC 7662, HTTP Basic, one stored-token lookup)"
        case "validate": "Token validation (GET /v1/resource/profile: DPoP-bound token, fresh proof recorded)"
        case "refresh": "Refresh grant (DPoP, rotation with reuse detection, durable)"
        case "push":
            "Push round trip (portal start → event with the sealed payload → sealed answer → signed callback)"
        default: "PIN authentication (start, blinded PIN evaluated and counted, nonce signed; 3 requests)"
        }
    }

    /// How many proofs (or blinded PINs) to prepare per client: more than this run could use,
    /// judged from the fastest rate seen so far for the operation (or a first guess), so that
    /// signing in the timed window stays the exception (counted as `live`).
    static func preparedBudget(_ operation: String, level: Int, seconds: Double, fastestSoFar: Double?) -> Int {
        let guess: Double
        switch operation {
        case "introspect": return 0
        case "validate": guess = 10_000
        case "refresh": guess = 6_000
        default: guess = 500
        }
        let rate = max(guess, fastestSoFar ?? 0)
        return Int(rate * seconds * 1.3 / Double(level)) + 20
    }

    /// Throughput at each stored-token count side by side, and the ratio of the last to the first.
    static func scaling(_ results: [String: [Int: [Int: LevelFigures]]], targets: [Int], levels: [Int]) {
        guard targets.count > 1, let first = targets.first, let last = targets.last else { return }
        print("\nScaling with the table: ops/s at \(first) and \(last) stored tokens (ratio)")
        for operation in Options.loadOperations {
            guard let byTarget = results[operation] else { continue }
            let cells = levels.map { level -> String in
                guard let low = byTarget[first]?[level], let high = byTarget[last]?[level] else { return "" }
                return String(
                    format: "%d clients: %.0f → %.0f (%.2f)",
                    level,
                    low.rate,
                    high.rate,
                    low.rate > 0 ? high.rate / low.rate : 0
                )
            }
            print("  \(operation): " + cells.joined(separator: "; "))
        }
    }
}

// MARK: - The floor: the server's share of each operation's crypto, alone, on one core

struct CryptoFloors {
    var milliseconds: [String: Double] = [:]

    init(baseURL: String, oprfPublicKey: Data) throws {
        let dpopKey = P256.Signing.PrivateKey()
        let token = Data.random(count: 32).base64URLEncodedString
        let proof = try DPoP.proof(method: "POST", url: baseURL + "/v1/token", key: dpopKey, now: Date())
        let resourceProof = try DPoP.proof(
            method: "GET",
            url: baseURL + Endpoint.profileResource,
            accessToken: token,
            key: dpopKey,
            now: Date()
        )
        let macKey = SymmetricKey(size: .bits256)
        let oprfKey = P384._VOPRF.PrivateKey()
        let oprfRaw = oprfKey.rawRepresentation
        let blinded = try oprfKey.publicKey.blind(Data(benchmarkPIN.utf8)).blindedElement.oprfRepresentation
        let pinKey = P256.Signing.PrivateKey()
        let pinPublic = pinKey.publicKey.x963Representation
        let nonce = Data.random(count: 32)
        let signature = try pinKey.signature(for: nonce).derRepresentation

        // A stored token's lookup key, and the resource server's secret compared.
        milliseconds["introspect"] = Self.measure(iterations: 20_000) {
            _ = SHA256.hash(data: Data(token.utf8))
            _ = constantTimeEquals(Data(token.utf8), Data(token.utf8))
        }
        // The proof checked (signature, claims, `ath`), the token hashed to find it.
        milliseconds["validate"] = try Self.measure(iterations: 500) {
            _ = try DPoP.verify(
                resourceProof,
                method: "GET",
                url: baseURL + Endpoint.profileResource,
                accessToken: token,
                now: Date()
            )
            _ = SHA256.hash(data: Data(token.utf8))
        }
        // The proof checked; the refresh token's MAC checked and the next one's made; a new
        // access token drawn; three token hashes (lookup and two stored).
        milliseconds["refresh"] = try Self.measure(iterations: 500) {
            _ = try DPoP.verify(proof, method: "POST", url: baseURL + "/v1/token", accessToken: nil, now: Date())
            for _ in 0..<2 { _ = HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: macKey) }
            _ = Data.random(count: 32)
            for _ in 0..<3 { _ = SHA256.hash(data: Data(token.utf8)) }
        }
        // Three proofs checked; the OPRF key read from storage and the blinded PIN evaluated
        // (with its proof); the PIN-protected public key parsed and the nonce's signature checked.
        milliseconds["pin"] = try Self.measure(iterations: 40) {
            for _ in 0..<3 {
                _ = try DPoP.verify(proof, method: "POST", url: baseURL + "/v1/token", accessToken: nil, now: Date())
            }
            let key = try P384._VOPRF.PrivateKey(rawRepresentation: oprfRaw)
            _ = try key.evaluate(P384._VOPRF.BlindedElement(oprfRepresentation: blinded)).rawRepresentation
            let publicKey = try P256.Signing.PublicKey(x963Representation: pinPublic)
            _ = publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: nonce)
        }
        milliseconds["push"] = try Self.pushFloor(baseURL: baseURL)
    }

    /// The portal's Basic secret compared; the payload sealed for the device (HPKE: an ephemeral
    /// X25519 key and its agreement, ChaCha20-Poly1305); the answer's proof checked and the answer
    /// opened (the low-order check's agreement and HPKE's); the callback's HMAC.
    static func pushFloor(baseURL: String) throws -> Double {
        let secret = Data("example-portal-secret-change-me".utf8)
        let digest = Data(SHA256.hash(data: secret))
        let deviceKey = Curve25519.KeyAgreement.PrivateKey()
        let serverKey = Curve25519.KeyAgreement.PrivateKey()
        let profileKey = P256.Signing.PrivateKey()
        let transaction = Data.random(count: 16).base64URLEncodedString
        let url = baseURL + Endpoint.mobileAuthAnswer(transaction, profile: "profile")
        let proof = try DPoP.proof(method: "POST", url: url, key: profileKey, now: Date())
        let payload = Data(repeating: 0x61, count: 420)
        let answer = try SealedBox.seal(
            Data(repeating: 0x62, count: 120),
            for: serverKey.publicKey,
            purpose: .answer,
            transactionID: transaction
        )
        let macKey = SymmetricKey(data: secret)
        return try measure(iterations: 300) {
            _ = constantTimeEquals(Data(SHA256.hash(data: secret)), digest)
            _ = try SealedBox.seal(payload, for: deviceKey.publicKey, purpose: .payload, transactionID: transaction)
            _ = try DPoP.verify(proof, method: "POST", url: url, accessToken: nil, now: Date())
            _ = try answer.open(with: serverKey, purpose: .answer, transactionID: transaction)
            _ = HMAC<SHA256>.authenticationCode(for: payload, using: macKey)
        }
    }

    /// Milliseconds of one run of `body`: the median of 15 batches.
    static func measure(iterations: Int, _ body: () throws -> Void) rethrows -> Double {
        var batches: [Double] = []
        for _ in 0..<15 {
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<iterations { try body() }
            batches.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6 / Double(iterations))
        }
        return batches.sorted()[batches.count / 2]
    }

    func show() {
        print("server-side crypto floor per operation, one core (median of 15 batches):")
        for operation in Options.loadOperations + ["push"] {
            print(String(format: "  %-10@ %8.4f ms", operation as NSString, milliseconds[operation] ?? 0))
        }
    }
}

// MARK: - Start-up and memory

/// Cold start (process start to listening) on a new and on an existing database, and the
/// resident memory of an idle server.
func measureStartup() throws {
    var created: [Double] = []
    var existing: [Double] = []
    for run in 0..<7 {
        let database = scratch.appendingPathComponent("startup-\(run).sqlite").path
        let (first, _, createdMilliseconds) = try startServer(database: database)
        first.terminate()
        first.waitUntilExit()
        let (second, _, existingMilliseconds) = try startServer(database: database)
        second.terminate()
        second.waitUntilExit()
        created.append(createdMilliseconds)
        existing.append(existingMilliseconds)
    }
    let (idle, _, _) = try startServer(database: scratch.appendingPathComponent("startup-idle.sqlite").path)
    Thread.sleep(forTimeInterval: 2)
    let memory = residentMemory(idle.processIdentifier)
    idle.terminate()
    idle.waitUntilExit()
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    print("\nStart-up (process start to listening, median of 7; min–max):")
    print(
        String(
            format: "  existing database %.1f ms (%.1f–%.1f); new database %.1f ms (%.1f–%.1f)",
            median(existing),
            existing.min() ?? 0,
            existing.max() ?? 0,
            median(created),
            created.min() ?? 0,
            created.max() ?? 0
        )
    )
    print(
        String(
            format: "  idle resident memory %.1f MB (2 s after start): its own %.1f MB, mapped files %.1f MB; "
                + "proportional share %.1f MB",
            memory.total,
            memory.anonymous,
            memory.files,
            memory.proportional
        )
    )
}

// MARK: - The processes' own accounting

/// A process's CPU time (user + system) so far, from /proc: what it spent itself, whatever the
/// load generator on the same cores did.
func serverCPUSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    // After "pid (comm) ", field 3 is the state; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The number on the `name:` line of a /proc file (`VmRSS:` in status, `write_bytes:` in io).
func procField(_ name: String, in path: String) -> Double? {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") })
    else { return nil }
    return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap { Double($0) }
}

/// Bytes the server has had written to storage so far (its own accounting, /proc/<pid>/io):
/// what durability costs per operation. The log, the database file and their fsyncs.
func serverWrittenBytes(_ pid: Int32) -> Double { procField("write_bytes", in: "/proc/\(pid)/io") ?? 0 }
