import ArgumentParser
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseServerCommand

/// `--access`: which token a fetch sends.
enum AccessOption: String, ExpressibleByArgument, CaseIterable {
    case user, implicit, device, anonymous

    var access: ResourceAccess {
        switch self {
        case .user: .user
        case .implicit: .implicit
        case .device: .device
        case .anonymous: .anonymous
        }
    }
}

/// `gatehouse fetch`: calls one of the app's resource servers with a user, implicit or device
/// token, the way an app would.
struct Fetch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Call a resource server with a DPoP-bound token: user (asks for the PIN), implicit, device or anonymous."
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var manifest: ManifestOptions

    @Argument(help: "The resource's URL, e.g. http://127.0.0.1:8090/greeting.")
    var url: String

    @Option(help: "Which token to send: user, implicit, device or anonymous.")
    var access: AccessOption = .user

    @Option(help: "The HTTP method.")
    var method: String = "GET"

    @Option(help: "The profile (user and implicit access; default: the only one on this device).")
    var profile: String?

    func run() async throws {
        guard let target = URL(string: url), ["http", "https"].contains(target.scheme ?? "") else {
            throw ValidationError("\(url) is not an http or https URL.")
        }
        try await CommandSupport.reportingFailures {
            let client = try await CommandSupport.client(device, manifest: manifest)
            switch access {
            case .user:
                let chosen = try await CommandSupport.profile(profile, of: client, device: device)
                _ = try await client.authenticateUser(chosen, delegate: TerminalDelegate())
            case .implicit:
                try await client.authenticateUserImplicitly(
                    try await CommandSupport.profile(profile, of: client, device: device)
                )
            case .device:
                try await client.authenticateDevice()
            case .anonymous:
                break
            }
            let response = try await client.fetchResource(target, method: method.uppercased(), access: access.access)
            if access == .user { await client.logout() }
            CommandSupport.output("HTTP \(response.status)")
            CommandSupport.output(String(decoding: response.body, as: UTF8.self))
            if !(200..<300).contains(response.status) { throw ExitCode(2) }
        }
    }
}

/// `gatehouse web-login`: app-to-web single sign-on from the terminal.
struct WebLogin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web-login",
        abstract: "Authenticate with the PIN, then open a web page signed in (app-to-web single sign-on)."
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var manifest: ManifestOptions

    @Argument(
        help: """
            The web page to land on; it must be among the application's webLoginTargets (default: the server's \
            /web/session).
            """
    )
    var target: String?

    @Option(help: "The profile (default: the only one on this device).")
    var profile: String?

    func run() async throws {
        let target = target ?? device.server + "/web/session"
        guard let targetURL = URL(string: target) else { throw ValidationError("\(target) is not a URL.") }
        try await CommandSupport.reportingFailures {
            let client = try await CommandSupport.client(device, manifest: manifest)
            let chosen = try await CommandSupport.profile(profile, of: client, device: device)
            _ = try await client.authenticateUser(chosen, delegate: TerminalDelegate())
            let login = try await client.appToWebSingleSignOn(targetURL: targetURL)
            // No logout: the web session lasts only as long as the app session it came from, which
            // is left to run out (the refresh token's lifetime).
            CommandSupport.output("Open within a minute (it works once):\n  \(login.redirectURL.absoluteString)")
            SystemBrowser.open(login.redirectURL)
        }
    }
}
