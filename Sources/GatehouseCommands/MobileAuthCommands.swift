import ArgumentParser
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseServerCommand

/// `gatehouse device …`: this terminal as a mobile authenticator.
struct DeviceCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "Use this terminal as a mobile authenticator: enrol, list and answer requests.",
        subcommands: [Enrol.self, Listen.self, Scan.self, Pending.self]
    )

    struct Enrol: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Log in with the PIN, then enrol the profile for mobile authentication and for push."
        )

        @OptionGroup var device: DeviceOptions
        @OptionGroup var manifest: ManifestOptions

        @Option(help: "The profile (default: the only one on this device).")
        var profile: String?

        @Option(help: "The push token; by default this device's id on the events channel.")
        var pushToken: String?

        @Option(help: "Where pushes go: events (this terminal's channel), apns or fcm.")
        var platform: String = "events"

        func run() async throws {
            try await CommandSupport.reportingFailures {
                guard let platform = PushPlatform(rawValue: platform) else {
                    throw ValidationError("--platform is one of events, apns, fcm.")
                }
                let client = try await CommandSupport.client(device, manifest: manifest)
                let chosen = try await CommandSupport.profile(profile, of: client, device: device)
                try await client.authenticateUser(chosen, authenticator: "pin", delegate: TerminalDelegate())
                try await client.enrollForMobileAuth()
                try await client.enrollForPushMobileAuth(
                    deviceToken: pushToken ?? "events-\(chosen.id)",
                    platform: platform
                )
                await client.logout()
                CommandSupport.output(
                    "Profile \(chosen.id) is enrolled for mobile authentication with push (\(platform.rawValue))."
                )
            }
        }
    }

    struct Listen: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show requests as they arrive (server-sent events) and answer each one."
        )

        @OptionGroup var device: DeviceOptions
        @OptionGroup var manifest: ManifestOptions

        @Option(help: "The profile (default: the only one on this device).")
        var profile: String?

        @Option(help: "Stop after answering this many requests (default: run until interrupted).")
        var count: Int?

        func run() async throws {
            try await CommandSupport.reportingFailures {
                let client = try await CommandSupport.client(device, manifest: manifest)
                let chosen = try await CommandSupport.profile(profile, of: client, device: device)
                guard try await client.isUserEnrolledForMobileAuth(chosen) else {
                    throw MobileAuthRequestError(.notEnrolled, message: "Enrol first: gatehouse device enrol.")
                }
                Terminal.say("Listening for requests to \(chosen.id)…")
                var answered = 0
                for try await request in client.mobileAuthRequests(for: chosen) {
                    Terminal.say("\nRequest \(request.transactionID.prefix(8))…: \(request.message)")
                    let result = await client.handlePushMobileAuthRequest(
                        request,
                        delegate: TerminalMobileAuthDelegate()
                    )
                    switch result {
                    case .approved: CommandSupport.output("Approved.")
                    case .denied: CommandSupport.output("Denied.")
                    case .failed(let error):
                        CommandSupport.output("Not handled: \((error as? any DomainError)?.message ?? "\(error)")")
                    }
                    answered += 1
                    if let count, answered >= count { return }
                }
            }
        }
    }

    struct Scan: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Answer the mobile authentication of a scanned code (what a portal or the login shows as a QR code).",
            discussion: """
                Pass the code the QR code holds (a decoder such as zbarimg prints it), or type the \
                code the page shows. The request is then answered as a push would be: confirmation, \
                PIN, biometric or custom, as its type says.
                """
        )

        @OptionGroup var device: DeviceOptions
        @OptionGroup var manifest: ManifestOptions

        @Argument(help: "The scanned code.")
        var code: String

        @Option(help: "The profile (default: the only enrolled one on this device).")
        var profile: String?

        func run() async throws {
            try await CommandSupport.reportingFailures {
                let client = try await CommandSupport.client(device, manifest: manifest)
                guard client.canHandleOTPMobileAuthRequest(otp: code) else {
                    throw MobileAuthRequestError(.notHandleable, message: "This is not a mobile authentication code.")
                }
                // The named profile, else the device's default; else the SDK takes the enrolled one.
                let chosen = (profile ?? DefaultProfiles(device).profile).map { UserProfile(id: $0) }
                let result = await client.handleOTPMobileAuthRequest(
                    otp: code,
                    profile: chosen,
                    delegate: TerminalMobileAuthDelegate(announces: true)
                )
                switch result {
                case .approved: CommandSupport.output("Approved.")
                case .denied: CommandSupport.output("Denied.")
                case .failed(let error): throw error
                }
            }
        }
    }

    struct Pending: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List pending requests from the server, newest first (when pushes are lost)."
        )

        @OptionGroup var device: DeviceOptions
        @OptionGroup var manifest: ManifestOptions

        func run() async throws {
            try await CommandSupport.reportingFailures {
                let client = try await CommandSupport.client(device, manifest: manifest)
                for request in try await client.pendingPushMobileAuthRequests() {
                    CommandSupport.output("\(request.transactionID)  \(request.profile.id)  \(request.message)")
                }
            }
        }
    }
}

/// Asks the terminal's user about a mobile authentication request.
struct TerminalMobileAuthDelegate: MobileAuthRequestDelegate {
    /// Say the request's message first: a scanned code's request was not announced by a push,
    /// and the user must see what they approve (and from where) before anything else.
    var announces = false

    private func announce(_ request: MobileAuthRequest) {
        if announces { Terminal.say("Request: \(request.message)") }
    }

    func confirmation(_ challenge: MobileAuthConfirmationChallenge) -> MobileAuthConfirmationResponse {
        let request = challenge.request
        announce(request)
        if let secure = request.secureMessage { Terminal.say(secure) }
        if let signing = request.signingData { Terminal.say("You sign: \(signing)") }
        if request.numberMatching {
            let answer = Terminal.ask("Type the number the website shows to approve (n to deny, r to report): ")
            switch answer?.lowercased() {
            case nil, "n": return .deny(.notAccepted)
            case "r": return .deny(.notRecognised)
            case let typed?: return .accept(number: Int(typed.trimmingCharacters(in: .whitespaces)))
            }
        }
        switch Terminal.ask("Approve? [y/N/r to report] ")?.lowercased() {
        case "y", "yes": return .accept
        case "r": return .deny(.notRecognised)
        default: return .deny(.notAccepted)
        }
    }

    func pin(_ challenge: PinChallenge, for request: MobileAuthRequest) -> PinResponse {
        // Once: the PIN is asked again after a wrong one, and a number to match came first.
        if challenge.previousFailureCount == 0, !request.numberMatching { announce(request) }
        if let secure = request.secureMessage { Terminal.say(secure) }
        if let signing = request.signingData { Terminal.say("You sign: \(signing)") }
        return TerminalDelegate().pin(challenge)
    }

    func biometric(_ challenge: BiometricChallenge, for request: MobileAuthRequest) -> BiometricResponse {
        if !request.numberMatching { announce(request) }
        return TerminalDelegate().biometric(challenge)
    }

    func customAuthenticator(
        _ challenge: CustomAuthenticatorChallenge,
        for request: MobileAuthRequest
    ) -> CustomAuthenticatorResponse {
        if !request.numberMatching { announce(request) }
        return TerminalDelegate().customAuthenticator(challenge)
    }
}

/// `gatehouse portal …`: what a website does with the portal API.
struct PortalCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "portal",
        abstract: "Act as a portal: start a mobile authentication and wait for the verdict.",
        subcommands: [Push.self, OTP.self]
    )

    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a mobile authentication for a user and wait for the device's answer."
        )

        @OptionGroup var portal: PortalOptions

        @Option(help: "The user, as the identity provider named them (e.g. the e-mail address).")
        var user: String

        func run() async throws {
            try await portal.start(user: user, qrPNG: nil)
        }
    }

    struct OTP: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "otp",
            abstract: "Start an OTP mobile authentication: print the code to scan and wait for the answer.",
            discussion: """
                The type must have `delivery: otp`. Without --user, whichever enrolled user scans \
                the code answers it; the verdict names them. `gatehouse device scan CODE` answers.
                """
        )

        @OptionGroup var portal: PortalOptions

        @Option(help: "The user the code is for (default: whoever scans it).")
        var user: String?

        @Option(help: "Also write the code's QR code to this PNG file.")
        var qrPNG: String?

        func run() async throws {
            try await portal.start(user: user, qrPNG: qrPNG)
        }
    }
}

/// What both portal commands take.
struct PortalOptions: ParsableArguments {
    @Option(
        name: .customLong("server"),
        help: "The token server's URL (default: $GATEHOUSE_SERVER, else http://127.0.0.1:8080)."
    )
    var serverOption: String?

    /// `--server`, else `GATEHOUSE_SERVER`, as the device commands take it.
    var server: String { EnvironmentSettings().resolve(serverOption, "server") ?? "http://127.0.0.1:8080" }

    @Option(help: "The API client's id (server.mobileAuth.apiClients).")
    var clientID: String = "portal"

    @Option(help: "The API client's secret (default: $GATEHOUSE_PORTAL_SECRET).")
    var clientSecret: String?

    @Option(help: "The mobile authentication type (server.mobileAuth.types).")
    var type: String

    @Option(help: "The push message, at most 155 characters (default: the type's).")
    var message: String?

    @Option(help: "A message of any length that only the device can read.")
    var secureMessage: String?

    @Option(help: "What the device signs, for types with transaction signing.")
    var signingData: String?

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Int = 130

    func start(user: String?, qrPNG: String?) async throws {
        guard let secret = clientSecret ?? ProcessInfo.processInfo.environment["GATEHOUSE_PORTAL_SECRET"] else {
            throw ValidationError("Give the API client's secret with --client-secret or $GATEHOUSE_PORTAL_SECRET.")
        }
        try await CommandSupport.reportingFailures {
            let portal = PortalClient(transport: HTTPTransport(baseURL: server), clientID: clientID, secret: secret)
            let started = try await portal.start(
                PortalMobileAuthRequest(
                    userID: user,
                    type: type,
                    message: message,
                    secureMessage: secureMessage,
                    signingData: signingData,
                    qrCode: qrPNG == nil ? nil : .png
                )
            )
            if let otp = started.otp {
                CommandSupport.output(
                    "Transaction \(started.transactionID): scan the code (\(started.authMethod.rawValue))."
                )
                CommandSupport.output("Code: \(otp)")
                if let qrPNG, let image = started.qrCode, let comma = image.firstIndex(of: ","),
                    let png = Data(base64Encoded: String(image[image.index(after: comma)...]))
                {
                    try png.write(to: URL(fileURLWithPath: qrPNG))
                    CommandSupport.output("QR code written to \(qrPNG).")
                }
            } else {
                CommandSupport.output(
                    "Transaction \(started.transactionID) sent to \(started.devices) device(s) (\(started.authMethod.rawValue))."
                )
            }
            if let number = started.number { CommandSupport.output("Number to type on the device: \(number)") }
            let result = try await portal.waitForResult(started.transactionID, timeout: .seconds(timeout))
            var verdict = "\(result.status.rawValue)"
            if let method = result.authenticationMethod { verdict += " with \(method)" }
            if let reason = result.reason { verdict += " (\(reason))" }
            // A signature is news when it approved, or when it did not verify.
            if let verified = result.signatureVerified, result.isAuthenticated || !verified {
                verdict += verified ? "; signature verified" : "; BAD signature"
            }
            if user == nil, let scanned = result.userID { verdict += "; user \(scanned)" }
            CommandSupport.output("Verdict: \(verdict).")
            if !result.isAuthenticated { throw ExitCode(3) }
        }
    }
}
