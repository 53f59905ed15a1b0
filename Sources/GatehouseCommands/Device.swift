import ArgumentParser
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseServerCommand

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads what the user types. PINs are read without echo from a terminal, or as a line from
/// standard input when it is not a terminal (for scripts).
enum Terminal {
    static func ask(_ prompt: String) -> String? {
        FileHandle.standardError.write(Data(prompt.utf8))
        return readLine(strippingNewline: true)
    }

    static var isInteractive: Bool { isatty(STDIN_FILENO) == 1 }

    static func askSecret(_ prompt: String) -> String? {
        guard isInteractive else {
            FileHandle.standardError.write(Data(prompt.utf8))
            return readLine(strippingNewline: true)
        }
        var echoing = termios()
        tcgetattr(STDIN_FILENO, &echoing)
        var silent = echoing
        silent.c_lflag &= ~tcflag_t(ECHO)
        // Ctrl-C while echo is off must not leave the user's terminal silent.
        Interruption.readingSecret(restoring: echoing)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        // Shown once echo is off: what is typed after seeing it is neither echoed nor flushed.
        FileHandle.standardError.write(Data(prompt.utf8))
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &echoing)
            Interruption.readingSecret(restoring: nil)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        return readLine(strippingNewline: true)
    }

    /// A new secret, typed twice at a terminal (nothing is echoed, so a typo would go unseen);
    /// read once from a script.
    static func askNewSecret(_ prompt: String) -> String? {
        while true {
            guard let first = askSecret(prompt) else { return nil }
            guard isInteractive else { return first }
            guard let second = askSecret("Type it again: ") else { return nil }
            if first == second { return first }
            say("The two did not match; try again.")
        }
    }

    static func say(_ line: String) { FileHandle.standardError.write(Data((line + "\n").utf8)) }

    /// Asks as a plugin declared: without echo when the answer is a secret, twice when it
    /// must be confirmed.
    static func ask(_ prompt: String, as declared: CustomAnswerPrompt) -> String? {
        switch (declared.isSecret, declared.confirms) {
        case (true, true): askNewSecret(prompt)
        case (true, false): askSecret(prompt)
        case (false, _): ask(prompt)
        }
    }
}

/// The device commands' delegate: every challenge becomes a prompt.
struct TerminalDelegate: RegistrationDelegate, ChangePinDelegate, AuthenticatorRegistrationDelegate,
    AuthenticatorDeregistrationDelegate
{
    /// `register --headless`: the hosted login signed in from this terminal instead of a browser.
    var signIn: TerminalSignIn?

    func registrationDidStart(identityProvider: IdentityProviderDescriptor) {
        Terminal.say("Registering with \(identityProvider.name).")
    }

    func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse {
        if let error = challenge.error { Terminal.say(error.message) }
        // What the API said; its status number is the protocol's, not for a person.
        if let said = challenge.info?.data, !said.isEmpty { Terminal.say(said) }
        let prompt = challenge.step == .initialize ? "E-mail address: " : "Code: "
        guard let answer = Terminal.ask(prompt) else { return .cancel }
        return .data(answer)
    }

    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        if let error = challenge.error { Terminal.say(error.message) }
        do {
            if let signIn { return .redirect(try await signIn.signIn(challenge)) }
            return .redirect(try await SystemBrowser.login(challenge))
        } catch is CancellationError {
            return .cancel
        } catch {
            let what = signIn == nil ? "No answer from the browser" : "Could not sign in"
            Terminal.say("\(what): \(CommandSupport.sentence(error))")
            return .cancel
        }
    }

    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse {
        if let error = challenge.error { Terminal.say("That PIN cannot be used: \(error.message)") }
        guard let pin = Terminal.askNewSecret("Choose a PIN of \(challenge.pinLength) digits: ") else { return .cancel }
        return .pin(PIN(pin))
    }

    func pin(_ challenge: PinChallenge) -> PinResponse {
        if let error = challenge.error { Terminal.say(error.message) }
        guard let pin = Terminal.askSecret("PIN\(Self.attemptsLeft(challenge.remainingFailureCount)): ") else {
            return .cancel
        }
        return .pin(PIN(pin))
    }

    func biometric(_ challenge: BiometricChallenge) -> BiometricResponse {
        if let error = challenge.error { Terminal.say(error.message) }
        let left = Self.attemptsLeft(challenge.remainingFailureCount)
        let answer = Terminal.ask(
            "\(challenge.authenticator.name)\(left): press Enter to scan, p for the PIN, c to cancel: "
        )
        switch answer?.lowercased() {
        case nil, "c": return .cancel
        case "p": return .fallbackToPin
        default: return .defaultPrompt
        }
    }

    func customAuthenticator(_ challenge: CustomAuthenticatorChallenge) -> CustomAuthenticatorResponse {
        if let error = challenge.error {
            Terminal.say(error.message + (error.details.customInfo?.data.map { " (\($0))" } ?? ""))
        }
        // What the server half sent is for the device half, not for a person to read.
        let prompt =
            "\(challenge.authenticator.name), \(challenge.prompt.label)\(Self.attemptsLeft(challenge.remainingFailureCount))"
            + " (p for the PIN, empty to let the device answer): "
        guard let answer = Terminal.ask(prompt, as: challenge.prompt) else { return .cancel }
        switch answer {
        case "p": return .fallbackToPin
        case "": return .data(nil)
        default: return .data(answer)
        }
    }

    func customAuthenticatorRegistration(
        _ challenge: CustomAuthenticatorRegistrationChallenge
    ) -> CustomAuthenticatorRegistrationResponse {
        if let error = challenge.error { Terminal.say(error.message) }
        let prompt = "\(challenge.authenticator.name), \(challenge.prompt.label) (empty: the device's own): "
        guard let answer = Terminal.ask(prompt, as: challenge.prompt) else { return .cancel }
        return .data(answer.isEmpty ? nil : answer)
    }

    /// " (2 attempts left)", or nothing when the attempts are unlimited or unknown.
    static func attemptsLeft(_ remaining: Int?) -> String {
        remaining.map { " (\($0) \($0 == 1 ? "attempt" : "attempts") left)" } ?? ""
    }

    func customAuthenticatorDeregistration(
        _ challenge: CustomAuthenticatorDeregistrationChallenge
    ) -> CustomAuthenticatorDeregistrationResponse {
        Terminal.ask("Deregister \(challenge.authenticator.name)? [y/N] ")?.lowercased() == "y" ? .proceed : .cancel
    }
}

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Register a user on this device with a running server.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var manifest: ManifestOptions

    @Option(help: "The identity provider's id (default: the server's default).")
    var identityProvider: String?

    @Flag(
        help: """
            For a browser identity provider on a machine without a desktop: sign in on the server's hosted login \
            from this terminal (the username, then the password without echo) instead of in a browser.
            """
    )
    var headless = false

    @Option(help: "With --headless: the username to sign in with (default: asked).")
    var username: String?

    func validate() throws {
        if username != nil, !headless { throw ValidationError("--username goes with --headless.") }
    }

    func run() async throws {
        try await CommandSupport.reportingFailures {
            let client = try await CommandSupport.client(device, manifest: manifest)
            let delegate = TerminalDelegate(
                signIn: headless ? TerminalSignIn(server: device.server, username: username) : nil
            )
            let result = try await client.registerUser(identityProvider: identityProvider, delegate: delegate)
            print("Registered profile \(result.profile.id) with \(result.identityProvider.name).")
        }
    }
}

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Authenticate a profile with its PIN and call the protected resource."
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var manifest: ManifestOptions

    @Option(help: "The profile to authenticate (default: the only one on this device).")
    var profile: String?

    @Option(help: "The authenticator to use (default: the profile's preferred one, the PIN unless set).")
    var authenticator: String?

    @Option(help: "Refresh the session this many times before calling the resource (0 to 100; shows token rotation).")
    var refreshes: Int = 0

    func validate() throws {
        guard (0...100).contains(refreshes) else { throw ValidationError("--refreshes takes 0 to 100") }
    }

    func run() async throws {
        try await CommandSupport.reportingFailures {
            let client = try await CommandSupport.client(device, manifest: manifest)
            let chosen = try await CommandSupport.profile(profile, of: client, device: device)
            let info = try await client.authenticateUser(
                chosen,
                authenticator: authenticator,
                delegate: TerminalDelegate()
            )
            // What the authenticator's service said, if anything; its status number is the protocol's.
            if let said = info?.data, !said.isEmpty { print("The authenticator said: \(said)") }
            for round in 0..<refreshes {
                try await client.refreshSession()
                print("Refreshed the session (\(round + 1) of \(refreshes)): new access and refresh tokens.")
            }
            let resource = try await client.fetchProfileResource()
            print(
                "Authenticated profile \(resource.profileID) (subject \(resource.subject), scope \"\(resource.scope)\")."
            )
            await client.logout()
        }
    }
}

struct Profiles: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the profiles registered on this device, or choose the default one.",
        subcommands: [List.self, Default.self],
        defaultSubcommand: List.self
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the profiles registered on this device for the server (the default marked *)."
        )

        @OptionGroup var device: DeviceOptions
        @OptionGroup var manifest: ManifestOptions

        func run() async throws {
            try await CommandSupport.reportingFailures {
                // Only what this device holds: no server is asked.
                let client = try CommandSupport.offlineClient(device)
                let summaries = try await client.userProfileSummaries()
                if summaries.isEmpty { print("No profiles on this device for \(device.server).") }
                let chosen = DefaultProfiles(device).profile
                for summary in summaries {
                    let registered = summary.registeredAt.formatted(.iso8601.year().month().day())
                    let subject = summary.subject.map { "\($0) at " } ?? ""
                    let mark = summary.profile.id == chosen ? " *" : ""
                    print(
                        "\(summary.profile.id)  \(subject)identity provider \(summary.identityProvider), "
                            + "registered \(registered)\(mark)"
                    )
                }
            }
        }
    }

    struct Default: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "default",
            abstract: "Choose the profile device commands use for this server when --profile is not given."
        )

        @OptionGroup var device: DeviceOptions

        @Argument(help: "The profile's id, as `gatehouse profiles` lists it.")
        var profile: String

        func run() async throws {
            try await CommandSupport.reportingFailures {
                let client = try CommandSupport.offlineClient(device)
                guard try await client.userProfiles().contains(UserProfile(id: profile)) else {
                    throw ValidationError(
                        "This device has no profile \(profile) for \(device.server); `gatehouse profiles` lists them."
                    )
                }
                try DefaultProfiles(device).set(profile)
                print("Device commands for \(device.server) now use profile \(profile) unless --profile names another.")
            }
        }
    }
}

struct Deregister: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deregister a profile: the server revokes its tokens, the device forgets it."
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var manifest: ManifestOptions

    @Option(help: "The profile to deregister (default: the device's default for the server, or its only one).")
    var profile: String?

    func run() async throws {
        try await CommandSupport.reportingFailures {
            let client = try await CommandSupport.client(device, manifest: manifest)
            let chosen = try await CommandSupport.profile(profile, of: client, device: device)
            // Only a profile this device holds can be deregistered: the server is asked with its key.
            guard try await client.userProfiles().contains(chosen) else {
                throw ValidationError(
                    "This device has no profile \(chosen.id); `gatehouse profiles` lists its profiles."
                )
            }
            try await client.deregisterUser(chosen)
            let defaults = DefaultProfiles(device)
            if defaults.profile == chosen.id { try defaults.set(nil) }
            print("Deregistered profile \(chosen.id).")
        }
    }
}
