package import ArgumentParser
import BrowserIdentityProvider
import Foundation
import GatehouseAdminConsole
import GatehouseKernel
import GatehouseLogin
import GatehousePlugins
import GatehouseProtocol
import GatehousePush
import GatehouseServer
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization
import UnixSignals
import XignInManager

/// `gatehouse serve` and `gatehouse-server`: the token server over HTTP.
package struct Serve: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        abstract: "Run the token server over HTTP.",
        discussion: ServeOptions.discussion
    )

    @OptionGroup package var options: ServeOptions

    package init() {}

    package func run() async throws { try await options.serve() }
}

/// The server's options, the same for `gatehouse serve` and `gatehouse-server`, and the start.
package struct ServeOptions: ParsableArguments {
    static let discussion = """
        Every option may instead come from an environment variable (the flag wins): \
        GATEHOUSE_MANIFEST, GATEHOUSE_DATABASE, GATEHOUSE_HOST, GATEHOUSE_PORT, GATEHOUSE_LOG_LEVEL, \
        GATEHOUSE_LOG_FORMAT, GATEHOUSE_REQUEST_TIMEOUT, GATEHOUSE_MAX_CONNECTIONS, \
        GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS, GATEHOUSE_SHUTDOWN_TIMEOUT, GATEHOUSE_METRICS (true or false). \
        Traces are exported over OTLP/HTTP when the OpenTelemetry variables ask for them \
        (OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp), and are off otherwise.
        """

    package init() {}

    @Option(help: "The manifest (JSON or YAML) naming the plugins and the server settings.")
    var manifest: String?

    @Option(
        help: """
            The SQLite database file (its folder must exist), or a PostgreSQL database that several instances \
            share: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable&pool=N&schema=NAME]. \
            Default: $XDG_DATA_HOME/gatehouse/server.sqlite.
            """
    )
    var database: String?

    @Option(help: "The address to listen on (default 127.0.0.1).")
    var host: String?

    @Option(
        help: """
            The port to listen on, 0 to 65535 (default 8080). 0 picks a free port before the manifest is read, so \
            ${publicURL} names it; another process could take it in the moment before serve listens (serve then \
            stops with status 64): give a fixed port to a server others rely on.
            """
    )
    var port: Int?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default info).")
    var logLevel: String?

    @Option(help: "Log format: text or json (default text).")
    var logFormat: String?

    @Option(help: "Seconds a connection may take to send a whole request, or stay idle (default 10).")
    var requestTimeout: Int?

    @Option(help: "Open connections at most (default 1024, lowered to fit the file-descriptor limit).")
    var maxConnections: Int?

    @Option(help: "Open connections from one address at most; 0 for no limit (default 128).")
    var maxConnectionsPerAddress: Int?

    @Option(help: "Seconds a graceful shutdown may take before requests still open are cut (default 10).")
    var shutdownTimeout: Int?

    @Flag(inversion: .prefixedNo, help: "Export metrics at GET /metrics (default on).")
    var metrics: Bool?

    /// Starts the server and runs it until SIGTERM or Ctrl-C.
    func serve() async throws {
        let settings: ServeSettings
        do {
            settings = try ServeSettings(self, environment: EnvironmentSettings())
        } catch let error as SettingError {
            throw CommandSupport.usageError(error.description)
        }
        let logger = settings.logger("gatehouse.server")
        // Traces when the OTEL_* variables ask for them (ServeTracing): installed before anything
        // that makes spans, exported by a service that stops last.
        let tracing: (any Service)?
        do {
            tracing = try ServeTracing.bootstrap(version: GatehouseServerCommandLine.version, logger: logger)
        } catch let error as SettingError {
            throw CommandSupport.usageError(error.description)
        }
        let created = CreatedFiles(database: settings.database)
        // One process per SQLite database: a second one would not hear the first one's
        // announcements (docs/PRODUCTION.md). Held until the process ends.
        let lock: DatabaseLock?
        do {
            lock = try DatabaseLock.acquire(for: settings.database)
        } catch let error as DatabaseLock.Held {
            created.remove()
            FileHandle.standardError.write(Data("error: \(error.description)\n".utf8))
            throw ExitCode(ExitStatus.temporaryFailure)
        } catch {
            created.remove()
            throw CommandSupport.usageError("\(error)")
        }
        // `${publicURL}` in the manifest is the address served, so its port must be known before
        // the manifest is read: port 0 takes a free port first.
        let port: Int
        do {
            port = settings.port == 0 ? try await Self.freePort(host: settings.host) : settings.port
        } catch {
            created.remove()
            throw CommandSupport.usageError(Self.listenFailure(error, host: settings.host, port: 0))
        }
        let shownHost = settings.host.contains(":") ? "[\(settings.host)]" : settings.host
        let servedURL = "http://\(shownHost):\(port)"
        let registry = PrometheusCollectorRegistry()
        if settings.metrics {
            registry.makeGauge(
                descriptor: MetricNameDescriptor(
                    namespace: "gatehouse",
                    metricName: "build",
                    unitName: "info",
                    helpText: "The version running, as a label (the value is always 1)."
                ),
                labels: [("version", GatehouseServerCommandLine.version)]
            ).set(to: 1)
        }
        let server: TokenServer
        var storage: ServerStorage?
        var xignin: XignInManager?
        var hostedLogin: LoginServer?
        var pushSenders: PushSenders?
        do {
            var environment = CommandSupport.environment(logger: logger)
            environment.cpuWork = ThreadPoolCPUWork(pool: NIOThreadPool.singleton)
            let loaded = try CommandSupport.manifest(settings.manifest, publicURL: servedURL)
            // The database first, with the tables of the extensions the manifest mounts: they
            // keep their state in it beside the server's, on SQLite or PostgreSQL alike.
            let opened = try await ServerStorage.open(
                settings.database,
                migrations: CommandSupport.migrations(for: loaded)
                    + (loaded.sections["xignin"] != nil ? [XignInManager.migrations] : []),
                logger: logger
            )
            storage = opened
            var extensions: [any ServerExtension] = []
            // The hosted login is mounted when the manifest has a `login` section, and offered to
            // `idp.browser` as the service "gatehouse-login".
            if let login = try await CommandSupport.login(
                loaded,
                storage: opened,
                environment: environment,
                servedURL: URL(string: servedURL)
            ) {
                extensions.append(login)
                hostedLogin = login
                environment.services[BrowserLoginServiceKey.self, named: CommandSupport.loginService] = login
            }
            // The admin console is mounted under /admin/ when the manifest has an `adminConsole`
            // section: operators sign in at the hosted login, and act through the server's admin
            // service, which the server hands it once built.
            if let console = try CommandSupport.adminConsole(
                loaded,
                login: hostedLogin,
                storage: opened,
                environment: environment
            ) {
                extensions.append(console)
            }
            // The XignIn manager is mounted when the manifest has an `xignin` section: its state
            // is in the storage, its activation mails go to this instance's outbox folder.
            if loaded.sections["xignin"] != nil {
                let folder = Self.xigninFolder(settings.database)
                let manager = try XignInManager(
                    manifest: loaded,
                    storage: opened,
                    mail: OutboxMailSender(directory: folder.appendingPathComponent("outbox")),
                    environment: environment
                )
                // What an earlier version kept in `xignin/xignin.sqlite` is imported once.
                if case .sqlite = settings.database { try await manager.importEarlierDatabase(in: folder) }
                extensions.append(manager)
                xignin = manager
            }
            // APNs and FCM as `server.mobileAuth.push` names them: a key file that is missing, open
            // to others or not a key stops the start here, in one line.
            let senders = try await PushSenders(manifest: loaded, logger: logger)
            pushSenders = senders
            server = try await TokenServer(
                manifest: loaded,
                registry: try CommandSupport.registry,
                storage: opened,
                environment: environment,
                extensions: extensions,
                pushTransports: senders.transports,
                metrics: settings.metrics ? PrometheusMetricsFactory(registry: registry) : nil
            )
        } catch let error where error is ServerDatabaseError || error is DatabaseFailure {
            await pushSenders?.shutdown()
            await storage?.shutdown()
            // The database may come back: a failure worth a service manager's restart.
            created.remove()
            _ = CommandSupport.fail(error)
            throw ExitCode(ExitStatus.unavailable)
        } catch {
            await pushSenders?.shutdown()
            await storage?.shutdown()
            created.remove()
            // A manifest that cannot be used is a configuration error (EX_CONFIG), not worth a
            // service manager's restart.
            _ = CommandSupport.fail(error)
            throw ExitCode(ExitStatus.configuration)
        }
        if server.configuration.publicURL == nil, ["0.0.0.0", "::", "[::]"].contains(settings.host) {
            logger.warning(
                """
                Listening on every address without server.publicURL: DPoP proofs are checked against \
                \(servedURL), which no client uses. Set server.publicURL to the URL clients reach.
                """
            )
        }
        let host = settings.host
        let listening = Listening()
        let manager = xignin
        let application = HTTPTokenServer.application(
            server: server,
            host: host,
            port: port,
            limits: settings.limits,
            metrics: settings.metrics ? registry : nil,
            logger: logger
        ) { port in
            listening.mark()
            // Told after the server learnt its own address: the manager's URL derives from it.
            manager?.served(at: server.publicURL)
            logger.info(
                "Serving",
                metadata: [
                    "version": "\(GatehouseServerCommandLine.version)", "manifest": "\(settings.manifest)",
                    "database": "\(settings.database.description)", "address": "\(servedURL)",
                    "public_url": "\(server.publicURL)",
                ]
            )
            // Unbuffered, so scripts waiting for this line see it at once.
            FileHandle.standardOutput.write(Data("Gatehouse token server listening on \(servedURL)\n".utf8))
        }
        // The HTTP server and the janitor that keeps its tables from growing, stopped together;
        // a shutdown waits for open requests at most `shutdownTimeout`.
        var configuration = ServiceGroupConfiguration(
            services: (tracing.map { [$0] } ?? []) + [application, TokenJanitor(server: server)]
                + (hostedLogin.map { [LoginBackgroundWork(login: $0)] } ?? []),
            gracefulShutdownSignals: [.sigterm],
            logger: logger
        )
        configuration.maximumGracefulShutdownDuration = settings.shutdownTimeout
        configuration.maximumCancellationDuration = .seconds(2)
        let group = ServiceGroup(configuration: configuration)
        // Ctrl-C: the first drains (and says so), a second stops at once.
        let interrupts = ServeInterrupts.install(shutdownTimeout: settings.shutdownTimeout) {
            Task { await group.triggerGracefulShutdown() }
        }
        defer { interrupts.cancel() }
        do {
            try await group.run()
            await server.shutdown()
            await pushSenders?.shutdown()
            await storage?.shutdown()
            withExtendedLifetime(lock) {}
        } catch {
            await server.shutdown()
            await pushSenders?.shutdown()
            await storage?.shutdown()
            guard !listening.happened else { throw error }
            // It never listened: nothing it created is worth keeping.
            created.remove()
            throw CommandSupport.usageError(Self.listenFailure(error, host: host, port: port))
        }
    }

    /// A port free on `host` now, for `--port 0`. It is released until `serve` listens on it, so
    /// it is drawn from 20000–32767 first: below the range the system hands out to outgoing
    /// connections and to port-0 sockets (Linux: 32768–60999), where a connection made in that
    /// moment cannot take it. The system's own pick when none of the draws is free.
    static func freePort(host: String) async throws -> Int {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<32 {
            let candidate = Int.random(in: 20000...32767, using: &generator)
            if let port = try? await bound(host: host, port: candidate) { return port }
        }
        return try await bound(host: host, port: 0)
    }

    /// Binds `host`:`port` (0: any), closes it again, and returns the port it had.
    private static func bound(host: String, port: Int) async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: host, port: port).get()
        let port = channel.localAddress?.port
        try await channel.close().get()
        guard let port else { throw IOError(errnoCode: EADDRNOTAVAIL, reason: "bind") }
        return port
    }

    /// The XignIn manager's folder, for its outbox (and an earlier version's database): beside a
    /// SQLite database; with PostgreSQL, in the data folder of the user running this instance.
    static func xigninFolder(_ database: ServerDatabase) -> URL {
        switch database {
        case .sqlite(let path): URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("xignin")
        case .postgres: DataFolders.data.appendingPathComponent("gatehouse/xignin")
        }
    }

    /// One readable line for a socket that could not be opened.
    static func listenFailure(_ error: any Error, host: String, port: Int) -> String {
        let address = "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        if let error = error as? IOError {
            switch error.errnoCode {
            case EADDRINUSE: return "cannot listen on \(address): the address is already in use"
            case EACCES: return "cannot listen on \(address): permission denied (ports below 1024 need privileges)"
            case EADDRNOTAVAIL: return "cannot listen on \(address): no such address on this machine"
            default: return "cannot listen on \(address): \(error.description)"
            }
        }
        return "cannot listen on \(address): \(error)"
    }
}

/// Whether the server got as far as listening.
private final class Listening: Sendable {
    private let flag = Mutex(false)
    func mark() { flag.withLock { $0 = true } }
    var happened: Bool { flag.withLock { $0 } }
}

/// What a start creates beside the database, so a start that fails can take it away again.
/// Only what did not exist before is removed.
struct CreatedFiles {
    private let paths: [String]

    init(database: ServerDatabase) {
        // PostgreSQL's tables are created in the database, not beside it: nothing to take away.
        guard case .sqlite(let database) = database else {
            paths = []
            return
        }
        // The extensions' state is in the database; the XignIn outbox is made by its first mail.
        let candidates = ["", "-wal", "-shm", ".lock"].map { database + $0 }
        paths = candidates.filter { !FileManager.default.fileExists(atPath: $0) }
    }

    func remove() {
        for path in paths { try? FileManager.default.removeItem(atPath: path) }
    }
}

/// The advisory lock `serve` holds on `DATABASE.lock` beside a SQLite database, so a second
/// process on the same file is refused instead of starting without a word. The kernel releases
/// it when the process ends, however it ends; the file stays.
final class DatabaseLock: Sendable {
    private let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Another process holds the lock.
    struct Held: Error, CustomStringConvertible {
        var database: String
        var description: String {
            "the database \(database) is in use by another gatehouse serve (it holds \(database).lock); "
                + "stop that one first, or use PostgreSQL for several instances"
        }
    }

    /// The lock for `database`; nil for PostgreSQL, where several instances are meant to share it.
    static func acquire(for database: ServerDatabase) throws -> DatabaseLock? {
        guard case .sqlite(let path) = database else { return nil }
        let lockPath = path + ".lock"
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw SettingError("cannot open the lock file \(lockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(descriptor)
            if code == EWOULDBLOCK { throw Held(database: path) }
            throw SettingError("cannot lock \(lockPath): \(String(cString: strerror(code)))")
        }
        return DatabaseLock(descriptor: descriptor)
    }
}
