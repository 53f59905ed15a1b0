import Crypto
public import Foundation
public import GatehouseKernel
public import GatehouseProtocol
public import GatehouseServer
import Logging
import Synchronization
import XignInValidators
import _CryptoExtras

/// A XignIn-style manager mounted on the token server under `/xignin/`: registration with
/// per-field verdicts, activation by e-mailed code and activation PIN, and delivery of arbitrary
/// attributes to a linked service at the first activation.
///
/// The activation PIN never reaches the manager: the client blinds it for an OPRF evaluation and
/// derives a signing key from the output; the manager keeps the OPRF key and that key's public
/// half, counts activation attempts and locks a code after too many wrong PINs.
public final class XignInManager: ServerExtension {
    /// The settings the manager was built with, from the manifest's `xignin` section.
    public let configuration: XignInManagerConfiguration
    /// `/xignin/`: the token server hands the manager every request under it.
    public var pathPrefix: String { "/xignin/" }
    let store: XignInStore
    let mail: any ActivationMailSender
    let provisioner: any LinkedServiceProvisioner
    let clock: any WallClock
    let cpuWork: any CPUWorkExecutor
    let logger: Logger
    /// Anonymous PIN evaluations per client address, in this instance's memory: floods stop here.
    let evaluationLimiter: RateLimiter
    /// The same limit, counted once for every instance on the database.
    let sharedEvaluations: SharedRateLimiter
    let maxRequestBytes = 65536
    /// The token server's URL, once it is served: the default manager URL derives from it.
    private let servedAt = Mutex<String?>(nil)

    /// Tells the manager the URL its token server is reached at (`serve` does once it listens).
    public func served(at url: String) {
        servedAt.withLock { $0 = url.hasSuffix("/") ? String(url.dropLast()) : url }
    }

    /// The URL clients are told: the configured one, else `/xignin` under the served URL.
    var managerURL: String {
        configuration.managerURL ?? (servedAt.withLock { $0 } ?? "http://127.0.0.1:8080") + "/xignin"
    }

    /// The manager's tables: pass them to ``ServerStorage/open(_:migrations:logger:)`` before
    /// building the manager on that storage.
    public static var migrations: MigrationGroup { XignInStore.migrations }

    /// A manager keeping its state in `storage`, the token server's database, which must have been
    /// opened with ``migrations``: on PostgreSQL, several instances share it.
    public init(
        configuration: XignInManagerConfiguration,
        storage: ServerStorage,
        mail: any ActivationMailSender,
        provisioner: any LinkedServiceProvisioner = WebhookProvisioner(),
        environment: PluginEnvironment = PluginEnvironment()
    ) throws {
        self.configuration = configuration
        self.mail = mail
        self.provisioner = provisioner
        clock = environment.clock
        cpuWork = environment.cpuWork
        logger = environment.logger
        evaluationLimiter = RateLimiter(
            perMinute: configuration.evaluationsPerMinute,
            burst: configuration.evaluationsPerMinute
        )
        sharedEvaluations = SharedRateLimiter(
            name: "xignin.evaluations",
            perMinute: configuration.evaluationsPerMinute,
            burst: configuration.evaluationsPerMinute,
            storage: storage
        )
        store = try XignInStore(storage: storage)
    }

    /// Answers one request under `/xignin/v1/`: `GET configuration`, and `POST pin/evaluate`,
    /// `registrations` and `activations`. Any other method on those paths gets 405 with `Allow`,
    /// any other path 404. A refusal is a JSON error with its status; an unexpected failure is
    /// logged and answered 500 `server_error`, without its details.
    public func handle(_ request: WireRequest) async -> WireResponse {
        do {
            let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
            switch (request.method, path) {
            case ("GET", "/xignin/v1/configuration"): return try configurationResponse(request)
            case ("POST", "/xignin/v1/pin/evaluate"): return try await evaluatePin(request)
            case ("POST", "/xignin/v1/registrations"): return try await register(request)
            case ("POST", "/xignin/v1/activations"): return try await activate(request)
            case (_, "/xignin/v1/configuration"), (_, "/xignin/v1/pin/evaluate"), (_, "/xignin/v1/registrations"),
                (_, "/xignin/v1/activations"):
                let allowed = path == "/xignin/v1/configuration" ? "GET" : "POST"
                var refusal = Refusal(405, "invalid_request", "\(path) accepts \(allowed) only.")
                refusal.headers["Allow"] = allowed
                throw refusal
            default:
                throw Refusal(404, "not_found", "There is no endpoint \(path).")
            }
        } catch let refusal as Refusal {
            return refusal.response
        } catch {
            logger.error(
                "XignIn request failed",
                metadata: ["path": "\(request.path)", "error": "\(String(reflecting: error))"]
            )
            return Refusal(500, "server_error", "The manager could not complete the request.").response
        }
    }

    // MARK: - Configuration

    func requireOpen() throws {
        guard configuration.registration == .open else {
            throw Refusal(
                403,
                "registration_unavailable",
                "Registration at this manager is managed by \(configuration.thirdPartyName); register there."
            )
        }
    }

    private func configurationResponse(_ request: WireRequest) throws -> WireResponse {
        try requireOpen()
        let query = request.path.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        var mapping: String?
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == "service_mapping_id" { mapping = String(parts[1]).removingPercentEncoding }
        }
        return try json(
            ManagerConfigurationMessage(
                managerURL: managerURL,
                pin: configuration.pin,
                alias: configuration.alias,
                emailMaxLength: configuration.emailMaxLength,
                categories: configuration.categories,
                serviceMappingValid: mapping.map { id in configuration.serviceMappings.contains { $0.id == id } }
                    ?? false
            )
        )
    }

    var now: Double { clock.now.timeIntervalSince1970 }
}

extension XignInManager {
    /// A manager configured by `manifest`'s `xignin` section, keeping its state in `storage` and
    /// sending activation mails with `mail` (an ``OutboxMailSender`` writes them to a folder).
    public convenience init(
        manifest: Manifest,
        storage: ServerStorage,
        mail: any ActivationMailSender,
        provisioner: any LinkedServiceProvisioner = WebhookProvisioner(),
        environment: PluginEnvironment = PluginEnvironment()
    ) throws {
        try self.init(
            configuration: try manifest.section("xignin", as: XignInManagerConfiguration.self),
            storage: storage,
            mail: mail,
            provisioner: provisioner,
            environment: environment
        )
    }

    /// Imports, once, the SQLite file a manager of an earlier version kept in `directory`
    /// (`xignin.sqlite`, its own database beside the server's): its accounts, codes and
    /// activations are copied into the storage in one transaction, then the file is renamed
    /// `xignin.sqlite.imported`, so the next start imports nothing. Returns the rows copied, 0
    /// when there is no such file; throws ``EarlierDatabaseImportFailure`` naming the file when
    /// it cannot be read, copied or renamed.
    @discardableResult
    public func importEarlierDatabase(in directory: URL) async throws -> Int {
        let file = directory.appendingPathComponent("xignin.sqlite")
        guard FileManager.default.fileExists(atPath: file.path) else { return 0 }
        let imported = directory.appendingPathComponent("xignin.sqlite.imported")
        do {
            let copied = try await store.importEarlierFile(at: file.path)
            try FileManager.default.moveItem(at: file, to: imported)
            // What is left of its write-ahead log goes with it, under the name SQLite expects.
            for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: file.path + suffix) {
                try FileManager.default.moveItem(atPath: file.path + suffix, toPath: imported.path + suffix)
            }
            logger.notice(
                "Imported the XignIn manager's earlier database",
                metadata: ["file": "\(file.path)", "rows": "\(copied)", "renamed": "\(imported.path)"]
            )
            return copied
        } catch {
            throw EarlierDatabaseImportFailure(path: file.path, underlying: error)
        }
    }
}

/// The XignIn manager's database from before it kept its state in the server's could not be
/// imported; the server should not start without it (its accounts could not activate).
public struct EarlierDatabaseImportFailure: Error, CustomStringConvertible {
    /// The earlier database's file.
    public var path: String
    /// Why: the file could not be read, a row not copied, or the file not renamed.
    public var underlying: any Error

    /// A sentence naming the file and what to do.
    public var description: String {
        "The XignIn manager's earlier database \(path) could not be imported into the server's database: "
            + "\(underlying). Fix the cause and start again, or move the file away to start without its accounts."
    }
}
