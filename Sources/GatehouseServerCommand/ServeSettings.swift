import Configuration
package import Foundation
import GatehouseProtocol
package import GatehouseServer
import Logging

/// `serve`'s settings, each from its flag, else its `GATEHOUSE_*` environment variable, else its
/// default, and each checked: a value out of range is an error that names where it came from,
/// never a silent fallback.
package struct ServeSettings {
    var manifest: String
    var database: ServerDatabase
    var host: String
    var port: Int
    var logLevel: Logger.Level
    var logFormat: LogFormat
    var limits: HTTPServerLimits
    var shutdownTimeout: Duration
    var metrics: Bool

    enum LogFormat: String, CaseIterable {
        case text, json
    }

    init(_ serve: ServeOptions, environment: EnvironmentSettings) throws {
        manifest = environment.resolve(serve.manifest, "manifest") ?? "Examples/manifests/server.yaml"
        guard FileManager.default.fileExists(atPath: manifest) else {
            throw SettingError(
                "the manifest \(manifest) does not exist (set it with --manifest or GATEHOUSE_MANIFEST; "
                    + "`gatehouse manifest example server > server.yaml` writes the example)"
            )
        }
        host = environment.resolve(serve.host, "host") ?? "127.0.0.1"
        port = try environment.integer(serve.port, "port", in: 0...65535) ?? 8080
        logLevel =
            try environment.choice(serve.logLevel, "logLevel", Logger.Level.allCases.map(\.rawValue))
            .flatMap(Logger.Level.init(rawValue:)) ?? .info
        logFormat =
            try environment.choice(serve.logFormat, "logFormat", LogFormat.allCases.map(\.rawValue))
            .flatMap(LogFormat.init(rawValue:)) ?? .text
        let defaults = HTTPServerLimits()
        limits = HTTPServerLimits(
            requestTimeout: try environment.integer(serve.requestTimeout, "requestTimeout", in: 1...3600)
                .map { .seconds($0) } ?? defaults.requestTimeout,
            maxConnections: try environment.integer(serve.maxConnections, "maxConnections", in: 1...1_000_000)
                ?? defaults.maxConnections,
            maxConnectionsPerAddress: try environment.integer(
                serve.maxConnectionsPerAddress,
                "maxConnectionsPerAddress",
                in: 0...1_000_000
            ) ?? defaults.maxConnectionsPerAddress
        )
        shutdownTimeout = .seconds(
            try environment.integer(serve.shutdownTimeout, "shutdownTimeout", in: 1...3600) ?? 10
        )
        metrics = try environment.boolean(serve.metrics, "metrics") ?? true
        database = try Self.database(environment.resolve(serve.database, "database"))
    }

    /// A `postgres://` URL, or a SQLite file: an explicit path must be in a folder that exists (a
    /// typo must not create folders); the default lives in the XDG data folder, created private.
    package static func database(_ text: String?) throws -> ServerDatabase {
        guard let text else {
            let folder = DataFolders.data.appendingPathComponent("gatehouse")
            try DataFolders.createPrivate(folder)
            return .sqlite(path: folder.appendingPathComponent("server.sqlite").path)
        }
        guard !text.isEmpty else { throw SettingError("the database (--database or GATEHOUSE_DATABASE) is empty") }
        let database: ServerDatabase
        do {
            database = try ServerDatabase(text)
        } catch let error as ServerDatabaseError {
            throw SettingError("--database: \(error.description)")
        }
        guard case .sqlite(let path) = database else { return database }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue else {
            throw SettingError("the database's folder \(folder.path) does not exist; create it first")
        }
        return database
    }

    func logger(_ label: String) -> Logger {
        var logger =
            switch logFormat {
            case .text: Logger(label: label)
            case .json: Logger(label: label, factory: { JSONLogHandler(label: $0) })
            }
        logger.logLevel = logLevel
        return logger
    }
}

/// Environment variables through swift-configuration: the key `requestTimeout` is
/// `GATEHOUSE_REQUEST_TIMEOUT`. Values are read as text and checked here, so a malformed one is
/// reported instead of being taken for a missing one.
package struct EnvironmentSettings {
    private let reader: ConfigReader

    package init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        reader = ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: environment))
    }

    /// The flag's value, else the variable's.
    package func resolve(_ flag: String?, _ key: String) -> String? {
        flag ?? reader.string(forKey: ConfigKey(["gatehouse", key]))
    }

    package func integer(_ flag: Int?, _ key: String, in range: ClosedRange<Int>) throws -> Int? {
        let (text, origin) = try value(flag.map(String.init), key)
        guard let text else { return nil }
        guard let number = Int(text), range.contains(number) else {
            throw SettingError(
                "\(origin) must be a whole number from \(range.lowerBound) to \(range.upperBound), not \"\(text)\""
            )
        }
        return number
    }

    package func choice(_ flag: String?, _ key: String, _ choices: [String]) throws -> String? {
        let (text, origin) = try value(flag, key)
        guard let text else { return nil }
        guard choices.contains(text) else {
            throw SettingError("\(origin) must be one of \(choices.joined(separator: ", ")), not \"\(text)\"")
        }
        return text
    }

    package func boolean(_ flag: Bool?, _ key: String) throws -> Bool? {
        if let flag { return flag }
        let (text, origin) = try value(nil, key)
        guard let text else { return nil }
        switch text.lowercased() {
        case "true", "1", "yes", "on": return true
        case "false", "0", "no", "off": return false
        default: throw SettingError("\(origin) must be true or false, not \"\(text)\"")
        }
    }

    /// The raw value and where it came from, for messages.
    private func value(_ flag: String?, _ key: String) throws -> (String?, String) {
        if let flag { return (flag, "--" + Self.flagName(key)) }
        return (reader.string(forKey: ConfigKey(["gatehouse", key])), Self.variableName(key))
    }

    package static func flagName(_ key: String) -> String {
        key.reduce(into: "") { name, character in
            if character.isUppercase { name += "-" + character.lowercased() } else { name.append(character) }
        }
    }

    package static func variableName(_ key: String) -> String {
        "GATEHOUSE_" + flagName(key).replacingOccurrences(of: "-", with: "_").uppercased()
    }
}

/// A setting that cannot be used, said in one line.
package struct SettingError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// The XDG base directories (Linux; the same layout elsewhere).
package enum DataFolders {
    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    package static var data: URL {
        let environment = ProcessInfo.processInfo.environment
        // The specification ignores a relative path.
        if let path = environment["XDG_DATA_HOME"], path.hasPrefix("/") { return URL(fileURLWithPath: path) }
        return home.appendingPathComponent(".local/share")
    }

    /// `$HOME`, else the account's home directory.
    package static var home: URL {
        if let path = ProcessInfo.processInfo.environment["HOME"], path.hasPrefix("/") {
            return URL(fileURLWithPath: path)
        }
        return FileManager.default.homeDirectoryForCurrentUser
    }

    /// Where a device keeps its profiles and keys: `$XDG_DATA_HOME/gatehouse/device`, unless an
    /// earlier version's `~/.gatehouse` is there (it keeps being used, so no profile is lost).
    package static var device: URL {
        let earlier = home.appendingPathComponent(".gatehouse")
        if FileManager.default.fileExists(atPath: earlier.path) { return earlier }
        return data.appendingPathComponent("gatehouse/device")
    }

    /// Creates `folder` (and missing parents) readable by the user only.
    package static func createPrivate(_ folder: URL) throws {
        try PrivateFiles.createFolder(folder)
    }
}
