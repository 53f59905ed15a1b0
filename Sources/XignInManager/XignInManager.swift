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
    public let configuration: XignInManagerConfiguration
    public var pathPrefix: String { "/xignin/" }
    let store: XignInStore
    let mail: any ActivationMailSender
    let provisioner: any LinkedServiceProvisioner
    let clock: any WallClock
    let cpuWork: any CPUWorkExecutor
    let logger: Logger
    /// Anonymous PIN evaluations per client address.
    let evaluationLimiter: RateLimiter
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

    public init(
        configuration: XignInManagerConfiguration,
        databasePath: String,
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
        store = try XignInStore(sqlitePath: databasePath)
    }

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
    /// A manager configured by `manifest`'s `xignin` section, keeping its state in `directory`
    /// (`xignin.sqlite`) and writing activation mails to `directory/outbox` unless `mail` is given.
    public convenience init(
        manifest: Manifest,
        directory: URL,
        mail: (any ActivationMailSender)? = nil,
        provisioner: any LinkedServiceProvisioner = WebhookProvisioner(),
        environment: PluginEnvironment = PluginEnvironment()
    ) throws {
        try PrivateFiles.createFolder(directory)
        try self.init(
            configuration: try manifest.section("xignin", as: XignInManagerConfiguration.self),
            databasePath: directory.appendingPathComponent("xignin.sqlite").path,
            mail: mail ?? OutboxMailSender(directory: directory.appendingPathComponent("outbox")),
            provisioner: provisioner,
            environment: environment
        )
    }
}
