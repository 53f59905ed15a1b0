import ArgumentParser
import Foundation
import GatehouseKernel
import GatehouseLogin
import GatehousePlugins
import GatehouseServer
import Hummingbird
import Logging
import NIOPosix
import ServiceLifecycle
import UnixSignals
import XignInManager

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the token server over HTTP.")

    @OptionGroup var manifest: ManifestOptions

    @Option(help: "The SQLite database file for the server's state.")
    var database: String = "gatehouse-server.sqlite"

    @Option(help: "The address to listen on (loopback by default).")
    var host: String = "127.0.0.1"

    @Option(help: "The port to listen on; 0 picks a free one.")
    var port: Int = 8080

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    func run() async throws {
        let logger = CommandSupport.logger("gatehouse.server", level: Logger.Level(rawValue: logLevel) ?? .info)
        let server: TokenServer
        do {
            var environment = CommandSupport.environment(logger: logger)
            environment.cpuWork = ThreadPoolCPUWork(pool: NIOThreadPool.singleton)
            let loaded = try CommandSupport.manifest(manifest.manifest)
            // The XignIn manager is mounted when the manifest has an `xignin` section; its state
            // and outbox sit beside the server's database.
            var extensions: [any ServerExtension] = []
            // The hosted login is mounted when the manifest has a `login` section, and offered to
            // `idp.browser` as the service "gatehouse-login".
            if let login = try CommandSupport.login(loaded, database: database, environment: environment) {
                extensions.append(login)
                environment.services[CommandSupport.loginService] = login
            }
            if loaded.sections["xignin"] != nil {
                let directory = URL(fileURLWithPath: database).deletingLastPathComponent().appendingPathComponent(
                    "xignin"
                )
                extensions.append(try XignInManager(manifest: loaded, directory: directory, environment: environment))
            }
            server = try TokenServer(
                manifest: loaded,
                registry: try CommandSupport.registry,
                databasePath: database,
                environment: environment,
                extensions: extensions
            )
        } catch {
            throw CommandSupport.fail(error)
        }
        let host = host
        let application = HTTPTokenServer.application(server: server, host: host, port: port, logger: logger) { port in
            // Unbuffered, so scripts waiting for this line see it at once.
            FileHandle.standardOutput.write(Data("Gatehouse token server listening on http://\(host):\(port)\n".utf8))
        }
        // The HTTP server and the janitor that keeps its tables from growing, stopped together.
        let group = ServiceGroup(
            configuration: .init(
                services: [application, TokenJanitor(server: server)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        try await group.run()
    }
}
