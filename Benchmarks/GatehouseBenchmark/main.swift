// gatehouse-bench: starts `gatehouse serve` on a loopback port, registers one profile per
// concurrent client, then measures PIN authentications, refresh grants and push round trips at
// 1, 8 and 64 concurrent clients (throughput, median and p99 latency, the server's own CPU time
// per operation), beside the cost of the same crypto alone on one core (the floor).
//
//   swift build -c release --product gatehouse && swift build -c release --product gatehouse-bench
//   .build/release/gatehouse-bench [--seconds 5] [--levels 1,8,64] [--operations pin,refresh,push]
//   .build/release/gatehouse-bench --operations steady --seconds 600 --levels 16   (table growth)

import ArgumentParser
import BiometricAuthenticator
import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehousePlugins
import GatehouseProtocol
import GatehouseYAML
import Logging
import _CryptoExtras

// MARK: - Options

struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse-bench",
        abstract: "Measures gatehouse serve: PIN authentications, refresh grants, push round trips."
    )

    @Option(help: "Seconds each measurement runs.")
    var seconds = 5.0

    @Option(help: "Concurrent clients, comma-separated.", transform: Options.integers)
    var levels = [1, 8, 64]

    @Option(help: "The server's manifest.")
    var manifest = "Examples/manifests/server.yaml"

    @Option(help: "pin, refresh, push and/or steady, comma-separated.", transform: Options.names)
    var operations: Set<String> = ["pin", "refresh", "push"]

    func validate() throws {
        guard seconds > 0 else { throw ValidationError("--seconds must be positive") }
        guard !levels.isEmpty, levels.allSatisfy({ (1...1024).contains($0) }) else {
            throw ValidationError("--levels takes numbers from 1 to 1024")
        }
        let known: Set<String> = ["pin", "refresh", "push", "steady"]
        guard operations.isSubset(of: known) else {
            throw ValidationError("--operations takes \(known.sorted().joined(separator: ", "))")
        }
    }

    static func integers(_ text: String) throws -> [Int] {
        try text.split(separator: ",").map {
            guard let number = Int($0) else { throw ValidationError("\($0) is not a number") }
            return number
        }
    }

    static func names(_ text: String) -> Set<String> { Set(text.split(separator: ",").map(String.init)) }
}

let options = Options.parseOrExit()
let seconds = options.seconds
let levels = options.levels
let operations = options.operations

// MARK: - The server

let binDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
    "gatehouse-bench-\(UUID().uuidString.prefix(8))"
)
try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: scratch) }

// Every benchmark client registers from this one address: the server's limit on installations
// per address would measure itself, so the copy the server reads turns it off.
let manifestPath = scratch.appendingPathComponent(URL(fileURLWithPath: options.manifest).lastPathComponent).path
do {
    let text = try String(contentsOfFile: options.manifest, encoding: .utf8)
    let unlimited = text.replacingOccurrences(of: "\nserver:\n", with: "\nserver:\n  rateLimitPerMinute: 0\n")
    try unlimited.write(toFile: manifestPath, atomically: true, encoding: .utf8)
}

let serve = Process()
serve.executableURL = binDirectory.appendingPathComponent("gatehouse")
serve.arguments = [
    "serve", "--manifest", manifestPath, "--database", scratch.appendingPathComponent("server.sqlite").path, "--port",
    "0",
    "--log-level", "error",
]
let serveOutput = Pipe()
serve.standardOutput = serveOutput
try serve.run()
defer { serve.terminate() }
guard let line = String(data: serveOutput.fileHandleForReading.availableData, encoding: .utf8),
    let range = line.range(of: "http://")
else {
    FileHandle.standardError.write(Data("gatehouse serve did not start\n".utf8))
    exit(1)
}
let baseURL = String(line[range.lowerBound...]).trimmingCharacters(in: .whitespacesAndNewlines)

// MARK: - Clients

/// Answers the demo registration API and the PIN challenges.
struct BenchmarkDelegate: RegistrationDelegate, AuthenticationDelegate {
    let email: String
    func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse {
        challenge.step == .initialize ? .data(email) : .data(String((challenge.info?.data ?? "").suffix(6)))
    }
    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .pin(PIN("258147")) }
    func pin(_ challenge: PinChallenge) -> PinResponse { .pin(PIN("258147")) }
}

let manifest = try ManifestLoader.jsonAndYAML.load(
    path: manifestPath,
    additionalSections: ["server", "xignin", "login"]
)
var quiet = Logger(label: "gatehouse.bench")
quiet.logLevel = .warning
// The demo manifest names the command line's simulated biometric sensor; the benchmark gives it one.
let plugins = try PluginRegistry.builtIn.load(
    manifest,
    environment: PluginEnvironment(logger: quiet, services: ["simulated-sensor": SimulatedBiometricSensor()]),
    sides: .client
)
let clientCount = levels.max() ?? 1
var clients: [(UserClient, UserProfile)] = []
var pushDevices: [(UserClient, UserProfile, String)] = []
for index in 0..<clientCount {
    let client = try UserClient(
        configuration: ClientConfiguration(
            dataDirectory: scratch.appendingPathComponent("device-\(index)"),
            transport: HTTPTransport(baseURL: baseURL),
            appID: "gatehouse-example",
            plugins: plugins,
            logger: quiet
        )
    )
    let result = try await client.registerUser(delegate: BenchmarkDelegate(email: "user\(index)@example.com"))
    clients.append((client, result.profile))
    if operations.contains("push") {
        // Registration leaves the user authenticated: enrol for mobile auth and the events channel.
        try await client.enrollForMobileAuth()
        try await client.enrollForPushMobileAuth(deviceToken: "bench-device-\(index)", platform: .events)
        pushDevices.append((client, result.profile, "user\(index)@example.com"))
    }
}

// MARK: - Measurement

struct Figures {
    var operations: Int
    var elapsed: Double
    var latencies: [Double]

    var rate: Double { Double(operations) / elapsed }
    func percentile(_ p: Double) -> Double {
        let sorted = latencies.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
    }
}

@MainActor
func measure(
    concurrency: Int,
    _ operation: @escaping @Sendable (UserClient, UserProfile) async throws -> Void
) async throws -> Figures {
    let start = Date()
    let deadline = start.addingTimeInterval(seconds)
    let selected = Array(clients.prefix(concurrency))
    let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
        for (client, profile) in selected {
            group.addTask {
                var samples: [Double] = []
                while Date() < deadline {
                    let began = Date()
                    try await operation(client, profile)
                    samples.append(Date().timeIntervalSince(began) * 1000)
                }
                return samples
            }
        }
        var all: [Double] = []
        for try await samples in group { all += samples }
        return all
    }
    return Figures(operations: latencies.count, elapsed: Date().timeIntervalSince(start), latencies: latencies)
}

// MARK: - The floor: the same crypto, alone, on one core

/// Milliseconds of one run of `body`, the median of 15 batches.
func floorMilliseconds(iterations: Int, _ body: () throws -> Void) rethrows -> Double {
    var batches: [Double] = []
    for _ in 0..<15 {
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<iterations { try body() }
        batches.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6 / Double(iterations))
    }
    return batches.sorted()[batches.count / 2]
}

let oprfKey = P384._VOPRF.PrivateKey()
let oprfRaw = oprfKey.rawRepresentation
let signingKey = P256.Signing.PrivateKey()
let dpopKey = P256.Signing.PrivateKey()
let wrappingKey = SymmetricKey(size: .bits256)
let sealed = try AES.GCM.seal(signingKey.rawRepresentation, using: wrappingKey).combined ?? Data()
let nonce = Data(repeating: 7, count: 32)

/// One PIN authentication's crypto: three DPoP proofs made and checked, a blind, a server
/// evaluation (key parsed from storage), a finalize, the key derivation and unwrap, the nonce
/// signature and its check.
let pinFloor = try floorMilliseconds(iterations: 20) {
    for step in 0..<3 {
        let proof = try DPoP.proof(method: "POST", url: baseURL + "/v1/flows/x", key: dpopKey, now: Date())
        _ = try DPoP.verify(proof, method: "POST", url: baseURL + "/v1/flows/x", accessToken: nil, now: Date())
        _ = step
    }
    let blinded = try oprfKey.publicKey.blind(Data("258147".utf8))
    let key = try P384._VOPRF.PrivateKey(rawRepresentation: oprfRaw)
    let evaluation = try key.evaluate(
        P384._VOPRF.BlindedElement(oprfRepresentation: blinded.blindedElement.oprfRepresentation)
    )
    let output = try oprfKey.publicKey.finalize(
        blinded,
        using: P384._VOPRF.BlindEvaluation(rawRepresentation: evaluation.rawRepresentation)
    )
    let derived = HKDF<SHA256>.deriveKey(
        inputKeyMaterial: SymmetricKey(data: output),
        salt: nonce,
        info: nonce,
        outputByteCount: 32
    )
    _ = try? AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: derived)
    let raw = try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: wrappingKey)
    let unwrapped = try P256.Signing.PrivateKey(rawRepresentation: raw)
    let signature = try unwrapped.signature(for: nonce)
    _ = unwrapped.publicKey.isValidSignature(signature, for: nonce)
}

/// One refresh grant's crypto: a DPoP proof made and checked, two new random tokens and three hashes.
let refreshFloor = try floorMilliseconds(iterations: 200) {
    let proof = try DPoP.proof(method: "POST", url: baseURL + "/v1/token", key: dpopKey, now: Date())
    _ = try DPoP.verify(proof, method: "POST", url: baseURL + "/v1/token", accessToken: nil, now: Date())
    for _ in 0..<3 { _ = SHA256.hash(data: Data.random(count: 32)) }
}

// MARK: - Runs

@MainActor
func report(
    _ name: String,
    floor: Double,
    _ operation: @escaping @Sendable (UserClient, UserProfile) async throws -> Void
) async throws {
    print(
        "\n\(name) (floor: \(String(format: "%.3f", floor)) ms of crypto per operation = \(String(format: "%.0f", 1000 / floor))/s on one core)"
    )
    print("clients      ops/s   median ms    p99 ms   ratio to floor (2 cores)   server CPU ms/op")
    for level in levels {
        let cpuBefore = serverCPUSeconds(serve.processIdentifier)
        let figures = try await measure(concurrency: level, operation)
        let cpu = serverCPUSeconds(serve.processIdentifier) - cpuBefore
        let ratio = figures.rate / (2 * 1000 / floor)
        print(
            String(
                format: "%7d %10.1f %11.2f %9.2f   %.2f                       %.2f",
                level,
                figures.rate,
                figures.percentile(0.5),
                figures.percentile(0.99),
                ratio,
                figures.operations == 0 ? 0 : cpu * 1000 / Double(figures.operations)
            )
        )
    }
}

print("Gatehouse benchmark: gatehouse serve at \(baseURL), \(clientCount) registered profiles, \(seconds) s per level")
print("machine: \(ProcessInfo.processInfo.activeProcessorCount) cores; client and server share them")
if operations.contains("pin") {
    try await report("PIN authentications (start + evaluate + prove, each DPoP-signed)", floor: pinFloor) {
        client,
        profile in
        try await client.authenticateUser(profile, delegate: BenchmarkDelegate(email: ""))
    }
}
if operations.contains("refresh") {
    try await report("Refresh grants (rotation with reuse detection)", floor: refreshFloor) { client, _ in
        try await client.refreshSession()
    }
}
if operations.contains("steady") {
    try await steadyRefreshLoad(
        clients: clients,
        database: scratch.appendingPathComponent("server.sqlite").path,
        seconds: seconds,
        serverPID: serve.processIdentifier
    )
}
if operations.contains("push") {
    try await benchmarkPushRoundTrip(
        devices: pushDevices,
        baseURL: baseURL,
        serverPID: serve.processIdentifier,
        levels: levels,
        seconds: seconds
    )
}
