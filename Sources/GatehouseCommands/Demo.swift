import ArgumentParser
import BiometricAuthenticator
import BrowserIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehousePlugins
import GatehouseProtocol
import GatehouseServer
import GatehouseServerCommand
import Logging

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run every flow against an embedded token server, printing each step."
    )

    @OptionGroup var manifest: ManifestOptions

    @Option(help: "Where the embedded server and the device keep their state (default: a new temporary directory).")
    var dataDir: String?

    @Option(
        help:
            "The identity provider to register with (default: the server's default; `web` signs in on the hosted login)."
    )
    var identityProvider: String?

    @Option(help: "Log lines besides the story: trace, debug, info, notice, warning, error, critical (default error).")
    var logLevel: String = "error"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    func run() async throws {
        try await CommandSupport.reportingFailures {
            try await demo()
        }
    }

    private func demo() async throws {
        let directory =
            dataDir.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent(
                "gatehouse-demo-\(UUID().uuidString.prefix(8))"
            )
        let level = Logger.Level(rawValue: logLevel) ?? .error
        let logger = Logger.story(label: "gatehouse.demo", level: level)
        let manifest = try manifest.demoManifest()
        let registry = try CommandSupport.registry
        var environment = CommandSupport.environment(logger: logger)
        // The hosted login, when the manifest has one, as `gatehouse serve` mounts it.
        var extensions: [any ServerExtension] = []
        try PrivateFiles.createFolder(directory.appendingPathComponent("server"))
        let storage = try await ServerStorage.open(
            .sqlite(path: directory.appendingPathComponent("server/server.sqlite").path),
            migrations: CommandSupport.migrations(for: manifest),
            logger: logger
        )
        let login = try await CommandSupport.login(manifest, storage: storage, environment: environment)
        if let login {
            extensions.append(login)
            environment.services[BrowserLoginServiceKey.self, named: CommandSupport.loginService] = login
        }
        let server = try await EmbeddedTokenServer(
            storage: storage,
            manifest: manifest,
            registry: registry,
            environment: environment,
            extensions: extensions
        )
        let client = try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: directory.appendingPathComponent("device"),
                transport: server,
                appID: server.server.configuration.clients[0].id,
                plugins: try registry.load(manifest, environment: environment, sides: .client),
                logger: logger
            )
        )
        print("Gatehouse demo: an embedded token server and a device, state in \(directory.path)")
        var browser: HeadlessLoginBrowser?
        if let login {
            // The hosted login's demo user, signed in by a browser without a screen.
            try await login.addUser("jane@example.com", password: "demo password")
            browser = HeadlessLoginBrowser(transport: server, username: "jane@example.com", password: "demo password")
        }
        let delegate = DemoDelegate(email: "jane@example.com", browser: browser)

        print(
            "\n1. Register through \(identityProvider.map { "the identity provider \($0)" } ?? "the server's default identity provider")"
        )
        await delegate.plan(createPins: [.weak("123456"), .strong("258147")])
        let registration = try await client.registerUser(
            identityProvider: identityProvider,
            scopes: ["read"],
            delegate: delegate
        )
        print(
            "   ✓ registered profile \(registration.profile.id) with \(registration.identityProvider.name)"
                + (registration.info.map { " — the API said: \($0.data ?? "") (status \($0.status))" } ?? "")
        )

        print("\n2. Authenticate with the PIN")
        await delegate.plan(pins: [.strong("258147")])
        try await client.authenticateUser(registration.profile, delegate: delegate)
        print("   ✓ authenticated")

        print("\n3. Authenticate with a wrong PIN first")
        await delegate.plan(pins: [.wrong("111222"), .strong("258147")])
        try await client.authenticateUser(registration.profile, delegate: delegate)
        print("   ✓ authenticated on the second try")

        print("\n4. Register the biometric authenticator (simulated sensor): the PIN first")
        await delegate.plan(pins: [.strong("258147")])
        try await client.registerAuthenticator("face", delegate: delegate)
        let registered = try await client.authenticators(.registered, for: registration.profile).map(\.name)
        print("   ✓ registered; the profile's authenticators: \(registered.joined(separator: ", "))")

        print("\n5. Authenticate with the biometric authenticator, with a custom prompt")
        try await client.authenticateUser(registration.profile, authenticator: "face", delegate: delegate)
        print("   ✓ authenticated: the sensor matched, the released device key signed the server's nonce")

        print("\n6. The sensor locks out: the authenticator is deregistered and the PIN takes over")
        await CommandSupport.simulatedSensor.enqueue(.lockout)
        await delegate.plan(pins: [.strong("258147")])
        try await client.authenticateUser(registration.profile, authenticator: "face", delegate: delegate)
        let left = try await client.authenticators(.registered, for: registration.profile).map(\.name)
        print("   ✓ authenticated with the PIN; the profile's authenticators: \(left.joined(separator: ", "))")

        print("\n7. Change the PIN")
        await delegate.plan(createPins: [.strong("914736")], pins: [.strong("258147")])
        try await client.changePin(delegate: delegate)
        print("   ✓ PIN changed")

        print("\n8. Call the protected resource with the DPoP-bound access token")
        let resource = try await client.fetchProfileResource()
        print(
            "   ✓ GET /v1/resource/profile: profile \(resource.profileID), subject \(resource.subject), scope \"\(resource.scope)\""
        )

        print("\n9. Deregister")
        try await client.deregisterUser(registration.profile)
        let remaining = try await client.userProfiles()
        print("   ✓ deregistered; profiles left on the device: \(remaining.count)")
        print("\nDone.")
    }
}

/// Answers the demo's challenges from a plan and prints each one. PINs are described, never
/// printed.
actor DemoDelegate: RegistrationDelegate, ChangePinDelegate, AuthenticatorRegistrationDelegate {
    enum PlannedPin {
        case weak(String)
        case strong(String)
        case wrong(String)

        var digits: String {
            switch self {
            case .weak(let pin), .strong(let pin), .wrong(let pin): pin
            }
        }

        var description: String {
            switch self {
            case .weak: "a weak PIN"
            case .strong: "the PIN"
            case .wrong: "a wrong PIN"
            }
        }
    }

    let email: String
    let browser: HeadlessLoginBrowser?
    private var createPins: [PlannedPin] = []
    private var pins: [PlannedPin] = []

    init(email: String, browser: HeadlessLoginBrowser? = nil) {
        self.email = email
        self.browser = browser
    }

    func browserRegistration(_ challenge: BrowserRegistrationChallenge) async -> BrowserRegistrationResponse {
        guard let browser else { return .cancel }
        print("   → browser: opening \(challenge.url.path)?… (PKCE S256, state)")
        do {
            let redirect = try await browser.signIn(at: challenge.url)
            print("   → browser: signed in as \(browser.username); the login sent it back to \(challenge.redirectURI)")
            return .redirect(redirect)
        } catch {
            print("   ← browser: \(CommandSupport.sentence(error))")
            return .cancel
        }
    }

    func plan(createPins: [PlannedPin] = [], pins: [PlannedPin] = []) {
        self.createPins = createPins
        self.pins = pins
    }

    func registrationDidStart(identityProvider: IdentityProviderDescriptor) {
        print("   registration started with \"\(identityProvider.name)\" (\(identityProvider.type))")
    }

    func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse {
        switch challenge.step {
        case .initialize:
            print("   → custom API, step 1: sending the e-mail address \(email)")
            return .data(email)
        case .finish:
            let said = challenge.info?.data ?? ""
            print("   ← the API answered: \(said) (status \(challenge.info?.status ?? 0))")
            let code = String(said.suffix(6))
            print("   → custom API, step 2: sending the code")
            return .data(code)
        }
    }

    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse {
        if let error = challenge.error {
            print("   ← PIN refused: \(error.message) [\(error.domainName).\(error.codeName) \(error.codeNumber)]")
        }
        guard !createPins.isEmpty else { return .cancel }
        let next = createPins.removeFirst()
        let choice = if case .weak = next { "a weak PIN" } else { "a strong PIN" }
        print("   → create-PIN challenge (\(challenge.pinLength) digits): choosing \(choice)")
        return .pin(PIN(next.digits))
    }

    func biometric(_ challenge: BiometricChallenge) -> BiometricResponse {
        if let error = challenge.error {
            print("   ← refused: \(error.message) [\(error.codeName) \(error.codeNumber)]")
        }
        print("   → biometric challenge: scanning with the prompt \"Log in to the demo\"")
        return .prompt("Log in to the demo")
    }

    func pin(_ challenge: PinChallenge) -> PinResponse {
        if let error = challenge.error {
            print("   ← refused: \(error.message) [\(error.domainName).\(error.codeName) \(error.codeNumber)]")
        }
        let left =
            challenge.remainingFailureCount.map {
                "\($0) of \(challenge.maxFailureCount) \(challenge.maxFailureCount == 1 ? "attempt" : "attempts") left"
            }
            ?? "no attempt limit"
        guard !pins.isEmpty else { return .cancel }
        let next = pins.removeFirst()
        print("   → PIN challenge (\(left)): entering \(next.description)")
        return .pin(PIN(next.digits))
    }
}
