import ArgumentParser
import BrowserIdentityProvider
import Foundation
import GatehouseAdminConsole
import GatehouseKernel
import GatehouseLogin
import GatehousePush
import GatehouseServer
import GatehouseServerCommand
import Logging
import XignInManager

struct ManifestCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "manifest",
        abstract: "Work with manifests without starting a server.",
        subcommands: [Check.self, ManifestExample.self]
    )

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a manifest as `serve` would load it; prints one line and exits 0, or the problem and 78.",
            discussion: """
                Every plugin is built with its configuration, the server, login, XignIn and admin console \
                sections are read, the push senders' key files are read and checked, and ${publicURL} is \
                resolved (to server.publicURL, else http://127.0.0.1:8080). No database is opened and \
                nothing is created.
                """
        )

        @Argument(help: "The manifest file (JSON or YAML).")
        var file: String

        func run() async throws {
            do {
                try await ManifestCheck.check(file)
            } catch {
                _ = CommandSupport.fail(error)
                throw ExitCode(ExitStatus.configuration)
            }
            print("\(file): the manifest is valid.")
        }
    }
}

/// What `manifest check` does: everything `serve` does with a manifest before it opens a database.
enum ManifestCheck {
    static func check(_ path: String) async throws {
        let manifest = try CommandSupport.manifest(path, publicURL: "http://127.0.0.1:8080")
        let logger = CommandSupport.logger("gatehouse.manifest", level: .critical)
        var environment = CommandSupport.environment(logger: logger)
        _ = try manifest.section("server", as: ServerConfiguration.self)
        // The hosted login's service is offered by `serve` when the manifest has a login section.
        if manifest.sections["login"] != nil {
            _ = try manifest.section("login", as: LoginConfiguration.self)
            environment.services[BrowserLoginServiceKey.self, named: CommandSupport.loginService] = UncheckedLogin()
        }
        if manifest.sections["xignin"] != nil {
            _ = try manifest.section("xignin", as: XignInManagerConfiguration.self)
        }
        // The admin console's operators sign in at the hosted login, as one of its clients.
        if manifest.sections["adminConsole"] != nil {
            let console = try manifest.section("adminConsole", as: AdminConsoleConfiguration.self)
            guard let login = try? manifest.section("login", as: LoginConfiguration.self),
                login.clients.contains(where: { $0.id == console.loginClient })
            else {
                throw ManifestError(
                    source: manifest.source,
                    path: "adminConsole.loginClient",
                    problem: "the login section has no client \"\(console.loginClient)\" for the admin console"
                )
            }
        }
        try TokenServer.check(manifest: manifest, registry: try CommandSupport.registry, environment: environment)
        // The push senders' key files, read as `serve` reads them (missing, open to others, no key).
        let senders = try await PushSenders(manifest: manifest, logger: logger)
        await senders.shutdown()
    }

    /// Stands in for the hosted login while a manifest is checked: nothing is ever redeemed.
    private struct UncheckedLogin: BrowserLoginService {
        func redeem(code: String, clientID: String, redirectURI: String, verifier: String) async throws -> String {
            throw CancellationError()
        }
    }
}
