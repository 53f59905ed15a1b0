import ArgumentParser
import BrowserIdentityProvider
import Foundation
import GatehouseAdminConsole
import GatehouseKernel
import GatehouseLogin
import GatehousePush
import GatehouseServer
import Logging
import XignInManager

/// `${publicURL}` in a manifest's values: where clients reach the server, so one manifest serves
/// on any port. It is `server.publicURL` when the manifest sets one, else the address `serve`
/// listens on (`http://HOST:PORT`), else the embedded server's URL in `demo`.
///
/// ```yaml
/// authorizationURL: ${publicURL}/login/authorize
/// webLoginTargets: ["${publicURL}/web/"]
/// ```
enum ManifestPlaceholders {
    static let publicURL = "${publicURL}"

    /// Whether any value of `manifest` names a placeholder.
    static func uses(_ manifest: Manifest) -> Bool {
        manifest.entries.contains { mentions($0.configuration) } || manifest.sections.values.contains(where: mentions)
    }

    /// `manifest` with `${publicURL}` replaced by `server.publicURL`, else by `served`. Any other
    /// `${…}` is refused with the key that holds it.
    static func resolve(_ manifest: Manifest, served: String, additionalSections: Set<String>) throws -> Manifest {
        let base = configuredPublicURL(manifest) ?? served
        var top: [String: ConfigValue] = [:]
        for (name, value) in manifest.sections {
            top[name] = try replace(value, with: base, source: manifest.source, entry: nil, path: name)
        }
        for kind in PluginKind.allCases {
            let entries = manifest.entries(of: kind).sorted { $0.index < $1.index }
            guard !entries.isEmpty else { continue }
            top[kind.manifestSection] = .list(
                try entries.map { entry in
                    var object: [String: ConfigValue] = [
                        "id": .string(entry.id), "type": .string(entry.type.rawValue),
                        "config": try replace(
                            entry.configuration,
                            with: base,
                            source: manifest.source,
                            entry: entry.location,
                            path: "config"
                        ),
                    ]
                    if let name = entry.name { object["name"] = .string(name) }
                    return .object(object)
                }
            )
        }
        return try Manifest(.object(top), source: manifest.source, additionalSections: additionalSections)
    }

    /// `server.publicURL` as written, without a trailing slash.
    static func configuredPublicURL(_ manifest: Manifest) -> String? {
        guard case .object(let server) = manifest.sections["server"], case .string(let url) = server["publicURL"]
        else { return nil }
        return url.hasSuffix("/") ? String(url.dropLast()) : url
    }

    private static func mentions(_ value: ConfigValue) -> Bool {
        switch value {
        case .string(let text): return text.contains("${")
        case .list(let items): return items.contains(where: mentions)
        case .object(let object): return object.values.contains(where: mentions)
        default: return false
        }
    }

    private static func replace(
        _ value: ConfigValue,
        with base: String,
        source: String,
        entry: String?,
        path: String
    ) throws -> ConfigValue {
        switch value {
        case .string(let text):
            let replaced = text.replacingOccurrences(of: publicURL, with: base)
            if let start = replaced.range(of: "${") {
                let name = replaced[start.lowerBound...].prefix { $0 != "}" } + "}"
                throw ManifestError(
                    source: source,
                    entry: entry,
                    path: path,
                    problem: "unknown placeholder \"\(name)\"; the only one is \(publicURL)"
                )
            }
            return .string(replaced)
        case .list(let items):
            return .list(
                try items.enumerated().map { index, item in
                    try replace(item, with: base, source: source, entry: entry, path: "\(path)[\(index)]")
                }
            )
        case .object(let object):
            return .object(
                try object.reduce(into: [:]) { result, pair in
                    result[pair.key] = try replace(
                        pair.value,
                        with: base,
                        source: source,
                        entry: entry,
                        path: "\(path).\(pair.key)"
                    )
                }
            )
        default:
            return value
        }
    }
}

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
