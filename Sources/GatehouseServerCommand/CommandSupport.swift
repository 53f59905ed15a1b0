package import ArgumentParser
package import BiometricAuthenticator
import CustomAPIIdentityProvider
package import Foundation
package import GatehouseAdminConsole
package import GatehouseKernel
package import GatehouseLogin
import GatehousePlugins
import GatehouseProtocol
package import GatehouseServer
import GatehouseYAML
package import Logging

/// What the server's command and the other commands share: the plugins and services of the
/// running command line, the manifest as a server reads it, the hosted login and admin console a
/// manifest mounts, and failures as one sentence with the README's exit status.
package enum CommandSupport {
    /// Services that manifests may name: the demo's in-process custom registration API and
    /// simulated sensor, with the integrator's laid over them.
    package static var services: PluginServices {
        PluginServices()
            .setting(CustomRegistrationAPIKey.self, named: "one-time-code", to: OneTimeCodeRegistrationAPI())
            .setting(SimulatedBiometricSensorKey.self, named: "simulated-sensor", to: simulatedSensor)
            .merging(GatehouseServerCommandLine.context?.services ?? PluginServices())
    }

    /// The simulated biometric sensor manifests may name as `simulated-sensor`: it matches unless
    /// the demo scripts it otherwise.
    package static let simulatedSensor = SimulatedBiometricSensor()

    /// The plugin types the running command knows.
    package static var registry: PluginRegistry {
        get throws {
            if let registry = GatehouseServerCommandLine.context?.registry { return registry }
            return try PluginRegistry.builtIn
        }
    }

    package static func logger(_ label: String, level: Logger.Level = .warning) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }

    /// The sections a server-side manifest may have besides the plugins.
    package static let serverSections: Set<String> = ["server", "xignin", "login", "adminConsole"]

    /// The manifest at `path`, with `${publicURL}` resolved to its `server.publicURL`, else to
    /// `publicURL` (where the server is reached).
    package static func manifest(_ path: String, publicURL: String = EmbeddedTokenServer.defaultURL) throws -> Manifest
    {
        guard FileManager.default.fileExists(atPath: path) else {
            throw ManifestError(
                source: path,
                problem: "the manifest does not exist; name one with --manifest or GATEHOUSE_MANIFEST "
                    + "(`gatehouse manifest example server > server.yaml` writes the example)"
            )
        }
        let loaded = try ManifestLoader.jsonAndYAML.load(path: path, additionalSections: serverSections)
        guard ManifestPlaceholders.uses(loaded) else { return loaded }
        return try ManifestPlaceholders.resolve(loaded, served: publicURL, additionalSections: serverSections)
    }

    /// The name under which the hosted login is offered to `idp.browser`, under
    /// `BrowserLoginServiceKey`.
    package static let loginService = "gatehouse-login"

    /// The tables of the extensions `manifest` mounts, to open the server's storage with.
    package static func migrations(for manifest: Manifest) -> [MigrationGroup] {
        (manifest.sections["login"] != nil ? [LoginStore.migrations] : [])
            + (manifest.sections["adminConsole"] != nil ? [AdminConsoleStore.migrations] : [])
    }

    /// The admin console of `manifest`'s `adminConsole` section, signing operators in at `login`;
    /// nil without the section. A console without the hosted login is a manifest error.
    package static func adminConsole(
        _ manifest: Manifest,
        login: LoginServer?,
        storage: ServerStorage,
        environment: PluginEnvironment
    ) throws -> AdminConsole? {
        guard manifest.sections["adminConsole"] != nil else { return nil }
        guard let login else {
            throw ManifestError(
                source: manifest.source,
                path: "adminConsole",
                problem: "the admin console signs operators in at the hosted login: add a login section"
            )
        }
        return try AdminConsole(manifest: manifest, login: login, storage: storage, environment: environment)
    }

    /// The hosted login of `manifest`'s `login` section, its state in the server's `storage`. On
    /// SQLite, the users an earlier version kept in `login/login.sqlite` beside the database are
    /// imported first, once (the file is then renamed `login.sqlite.imported`).
    package static func login(
        _ manifest: Manifest,
        storage: ServerStorage,
        environment: PluginEnvironment,
        servedURL: URL? = nil
    ) async throws -> LoginServer? {
        guard manifest.sections["login"] != nil else { return nil }
        let login = try LoginServer(
            manifest: manifest,
            storage: storage,
            environment: environment,
            servedURL: servedURL
        )
        if case .sqlite(let path) = storage.database {
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("login")
            do {
                _ = try await login.importEarlierUsers(from: folder)
            } catch {
                throw DatabaseFailure.sqlite(folder.appendingPathComponent("login.sqlite").path, .opening, error)
            }
        }
        return login
    }

    package static func environment(logger: Logger) -> PluginEnvironment {
        PluginEnvironment(logger: logger, services: services)
    }

    /// Prints a usage problem (a setting out of range, a port in use) as one line, and exits 64
    /// (EX_USAGE).
    package static func usageError(_ message: String) -> ExitCode {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
        return ExitCode(64)
    }

    /// Prints an error as one line (a Gatehouse error with its code), and exits with its status
    /// from the table in the README.
    package static func fail(_ error: any Error) -> ExitCode {
        FileHandle.standardError.write(Data("error: \(sentence(error))\n".utf8))
        return ExitCode(status(of: error))
    }

    /// What a person reads about `error`: its message, never a Swift description.
    package static func sentence(_ error: any Error) -> String {
        switch error {
        case let error as any DomainError:
            return "\(error.message) [\(error.domainName).\(error.codeName) \(error.codeNumber)]"
        case let error as ValidationError:
            return error.message
        case let error as SettingError:
            return error.description
        case let error as DatabaseLock.Held:
            return error.description
        case let error as ServerDatabaseError:
            return error.description
        case let error as PrivateFileError:
            return "Cannot write \(error.path): \(error.problem.prefix(1).lowercased() + error.problem.dropFirst())."
        case let error as any LocalizedError:
            if let description = error.errorDescription { return description }
        default:
            break
        }
        return "something unexpected failed (\(String(reflecting: type(of: error))))."
    }

    /// The exit status for `error` (README, "Exit statuses").
    package static func status(of error: any Error) -> Int32 {
        switch error {
        case is ValidationError, is SettingError: return ExitStatus.usage
        case is ManifestError: return ExitStatus.configuration
        case is ServerDatabaseError, is DatabaseFailure, is PrivateFileError: return ExitStatus.unavailable
        case is DatabaseLock.Held: return ExitStatus.temporaryFailure
        case let error as GenericError:
            switch error.code {
            case .networkConnectivityFailure, .serverNotReachable, .dataStorageNotAvailable:
                return ExitStatus.unavailable
            case .configurationInvalid: return ExitStatus.configuration
            case .unknown, .unrecoverableDataState: return ExitStatus.software
            default: return ExitStatus.refused
            }
        case is any DomainError: return ExitStatus.refused
        default: return ExitStatus.software
        }
    }
}

/// The exit statuses every command uses, after BSD's sysexits (README, "Exit statuses").
package enum ExitStatus {
    /// The server or the device refused what was asked: a wrong PIN, a refused registration.
    package static let refused: Int32 = 1
    /// `fetch`: the resource answered, with a status outside 2xx.
    package static let resourceRefused: Int32 = 2
    /// `portal push`: the user denied the request, or it expired.
    package static let denied: Int32 = 3
    /// EX_USAGE: a flag, an argument or a setting is wrong; the address cannot be listened on.
    package static let usage: Int32 = 64
    /// EX_UNAVAILABLE: the server or the database cannot be reached.
    package static let unavailable: Int32 = 69
    /// EX_SOFTWARE: something failed that should not (a server's 500, an unexpected answer).
    package static let software: Int32 = 70
    /// EX_TEMPFAIL: try again later: the SQLite database is in use by another `serve`.
    package static let temporaryFailure: Int32 = 75
    /// EX_CONFIG: the manifest cannot be used.
    package static let configuration: Int32 = 78
    /// Ctrl-C stopped a device command (its flow cancelled at the server), or a second one
    /// stopped `serve` at once (128 + SIGINT, as shells report it).
    package static let interrupted: Int32 = 130
}
