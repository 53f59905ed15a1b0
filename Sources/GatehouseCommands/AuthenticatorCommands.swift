import ArgumentParser
import GatehouseClient
import GatehouseKernel
import GatehouseServerCommand

/// `gatehouse authenticators list|register|deregister|prefer`.
struct Authenticators: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, register, deregister and choose the preferred authenticator of a profile.",
        subcommands: [List.self, RegisterAuthenticator.self, DeregisterAuthenticator.self, Prefer.self]
    )

    /// Options every authenticator command shares.
    struct Options: ParsableArguments {
        @OptionGroup var device: DeviceOptions
        @OptionGroup var manifest: ManifestOptions

        @Option(help: "The profile (default: the only one on this device).")
        var profile: String?
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the profile's authenticators.")

        @OptionGroup var options: Options

        @Option(help: "registered, non-registered or all.")
        var show: String = "all"

        func run() async throws {
            let filter: AuthenticatorFilter
            switch show {
            case "registered": filter = .registered
            case "non-registered": filter = .nonRegistered
            case "all": filter = .all
            default: throw ValidationError("--show takes registered, non-registered or all.")
            }
            try await CommandSupport.reportingFailures {
                let client = try await CommandSupport.client(options.device, manifest: options.manifest)
                let profile = try await CommandSupport.profile(options.profile, of: client, device: options.device)
                for info in try await client.authenticators(filter, for: profile) {
                    let marks =
                        [info.isRegistered ? "registered" : "not registered"] + (info.isPreferred ? ["preferred"] : [])
                    print("\(info.id)\t\(info.kind.rawValue)\t\(info.name)\t\(marks.joined(separator: ", "))")
                }
            }
        }
    }

    struct RegisterAuthenticator: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "register",
            abstract: "Log in, then register an authenticator (the PIN is asked again, as the server requires)."
        )

        @OptionGroup var options: Options

        @Argument(help: "The authenticator's manifest id.")
        var authenticator: String

        func run() async throws {
            try await CommandSupport.withSession(options) { client, _ in
                let info = try await client.registerAuthenticator(authenticator, delegate: TerminalDelegate())
                let said = info?.data.flatMap { $0.isEmpty ? nil : " The authenticator said: \($0)" } ?? ""
                print("Registered \(authenticator).\(said)")
            }
        }
    }

    struct DeregisterAuthenticator: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "deregister",
            abstract: "Log in, then deregister an authenticator (never the PIN)."
        )

        @OptionGroup var options: Options

        @Argument(help: "The authenticator's manifest id.")
        var authenticator: String

        func run() async throws {
            try await CommandSupport.withSession(options) { client, _ in
                try await client.deregisterAuthenticator(authenticator, delegate: TerminalDelegate())
                print("Deregistered \(authenticator).")
            }
        }
    }

    struct Prefer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a registered authenticator the one login uses by default."
        )

        @OptionGroup var options: Options

        @Argument(help: "The authenticator's manifest id.")
        var authenticator: String

        func run() async throws {
            try await CommandSupport.reportingFailures {
                let client = try await CommandSupport.client(options.device, manifest: options.manifest)
                let profile = try await CommandSupport.profile(options.profile, of: client, device: options.device)
                try await client.setPreferredAuthenticator(authenticator, for: profile)
                print("\(authenticator) is now preferred for \(profile.id).")
            }
        }
    }
}

/// `gatehouse change-pin`: log in, then choose a new PIN.
struct ChangePin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "change-pin",
        abstract: "Log in, then change the PIN: the current one, then a new one."
    )

    @OptionGroup var options: Authenticators.Options

    func run() async throws {
        try await CommandSupport.withSession(options) { client, profile in
            try await client.changePin(delegate: TerminalDelegate())
            print("Changed the PIN of \(profile.id).")
        }
    }
}

extension CommandSupport {
    /// Logs the profile in (its preferred authenticator), runs `body`, logs out; errors as one line.
    static func withSession(
        _ options: Authenticators.Options,
        _ body: (UserClient, UserProfile) async throws -> Void
    ) async throws {
        try await CommandSupport.reportingFailures {
            let client = try await CommandSupport.client(options.device, manifest: options.manifest)
            let profile = try await CommandSupport.profile(options.profile, of: client, device: options.device)
            try await client.authenticateUser(profile, delegate: TerminalDelegate())
            try await body(client, profile)
            await client.logout()
        }
    }
}
