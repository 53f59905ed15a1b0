import ArgumentParser
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseLogin
import GatehouseProtocol
import GatehouseServer
import GatehouseServerCommand
import Hummingbird
import Logging
import NIOPosix
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `gatehouse users …`: the hosted login's user directory.
struct UserCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "Manage the hosted login's users (the manifest's login section).",
        subcommands: [Add.self, List.self]
    )

    struct Options: ParsableArguments {
        @OptionGroup var manifest: ManifestOptions

        @Option(
            help: """
                The token server's database, as `serve` takes it (default: $GATEHOUSE_DATABASE, else \
                $XDG_DATA_HOME/gatehouse/server.sqlite): a SQLite file or a postgres:// URL. The login keeps its \
                users in it.
                """
        )
        var database: String?

        /// Runs `body` with the hosted login on the server's database (migrated as `serve` would),
        /// and closes the database after.
        func withLogin<T: Sendable>(_ body: (LoginServer) async throws -> T) async throws -> T {
            var environment = CommandSupport.environment(logger: CommandSupport.logger("gatehouse.login"))
            environment.cpuWork = ThreadPoolCPUWork(pool: NIOThreadPool.singleton)
            let (loaded, source) = try manifest.serverManifest()
            guard loaded.sections["login"] != nil else {
                throw ManifestError(
                    source: source,
                    problem: "it has no login section, so there is no hosted login to add users to"
                )
            }
            let database = try ServeSettings.database(EnvironmentSettings().resolve(self.database, "database"))
            let storage = try await ServerStorage.open(
                database,
                migrations: CommandSupport.migrations(for: loaded),
                logger: environment.logger
            )
            do {
                guard let login = try await CommandSupport.login(loaded, storage: storage, environment: environment)
                else { throw ValidationError("The manifest has no login section.") }
                let result = try await body(login)
                await storage.shutdown()
                return result
            } catch {
                await storage.shutdown()
                throw error
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a user; the password is asked twice, without echo (or read from standard input)."
        )

        @OptionGroup var options: Options

        @Option(help: "The user's e-mail address.")
        var username: String

        func run() async throws {
            do {
                try await options.withLogin { login in
                    guard let password = Terminal.askSecret("Password for \(username) (8 or more characters): "),
                        Terminal.askSecret("The same password again: ") == password
                    else { throw ValidationError("The passwords differ.") }
                    try await login.addUser(username, password: password)
                }
                CommandSupport.output("Added \(LoginStore.normalized(username)).")
            } catch let error as ValidationError {
                throw error
            } catch {
                throw CommandSupport.fail(error)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the users.")

        @OptionGroup var options: Options

        func run() async throws {
            do {
                for name in try await options.withLogin({ try await $0.usernames() }) { CommandSupport.output(name) }
            } catch let error as ValidationError {
                throw error
            } catch {
                throw CommandSupport.fail(error)
            }
        }
    }
}

/// `gatehouse signing-keys …`: the hosted login's OpenID signing keys.
struct SigningKeyCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signing-keys",
        abstract: "List or rotate the hosted login's OpenID signing keys (in the server's database).",
        subcommands: [List.self, Rotate.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the published keys: the one that signs, the next one, and retired ones still published."
        )

        @OptionGroup var options: UserCommands.Options

        func run() async throws {
            do {
                for key in try await options.withLogin({ try await $0.signingKeyStatus() }) {
                    let until = key.publishedUntil.map { " until \($0.formatted(.iso8601))" } ?? ""
                    CommandSupport.output("\(key.algorithm) \(key.kid) \(key.state)\(until)")
                }
            } catch let error as ValidationError {
                throw error
            } catch {
                throw CommandSupport.fail(error)
            }
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: """
                Rotate now: the next keys, published already, sign from now on; the keys that signed stay published \
                until what they signed has expired. Running servers follow within 10 seconds.
                """
        )

        @OptionGroup var options: UserCommands.Options

        func run() async throws {
            do {
                let keys = try await options.withLogin { login in
                    try await login.rotateSigningKeys()
                    return try await login.signingKeyStatus()
                }
                for key in keys where key.state == "signing" {
                    CommandSupport.output("\(key.algorithm) now signs with \(key.kid).")
                }
            } catch let error as ValidationError {
                throw error
            } catch {
                throw CommandSupport.fail(error)
            }
        }
    }
}

/// The system browser as RFC 8252 has a native app use it: print and open the address, then
/// listen on the loopback redirect URI until the login sends the browser back.
enum SystemBrowser {
    /// Opens `url` with the desktop's opener (xdg-open, open), unless GATEHOUSE_NO_BROWSER is set
    /// or there is no desktop (on Linux: neither DISPLAY nor WAYLAND_DISPLAY, where xdg-open would
    /// start a text browser or nothing); returns whether an opener was started.
    @discardableResult
    static func open(_ url: URL) -> Bool {
        let environment = ProcessInfo.processInfo.environment
        guard environment["GATEHOUSE_NO_BROWSER"] == nil else { return false }
        #if os(Linux)
        guard environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil else { return false }
        #endif
        for opener in ["/usr/bin/xdg-open", "/usr/bin/open"] where FileManager.default.isExecutableFile(atPath: opener)
        {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: opener)
            process.arguments = [url.absoluteString]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do {
                try process.run()
                return true
            } catch {
                return false
            }
        }
        return false
    }

    /// Opens the login for `challenge` and waits (at most `timeout`) for the browser to come back:
    /// on a loopback redirect URI it listens on a port the system picks (RFC 8252 §7.3), otherwise
    /// on the configured one. The browser is shown a page saying it may be closed.
    static func login(_ challenge: BrowserRegistrationChallenge, timeout: Duration = .seconds(300)) async throws -> URL
    {
        let listener = try await RedirectListener(
            redirectURI: challenge.redirectURI,
            anyPort: challenge.allowsAnyLoopbackPort
        )
        guard let url = listener.anyPort ? challenge.url(redirectingTo: listener.redirectURI) : challenge.url else {
            await listener.stop()
            throw ValidationError("The login address cannot be pointed at \(listener.redirectURI).")
        }
        Terminal.say("Sign in with \(challenge.identityProvider.name) in your browser:\n  \(url.absoluteString)")
        if !open(url) {
            Terminal.say(
                "No browser was opened (no desktop here). Open the address in a browser on this machine, or stop "
                    + "(Ctrl-C) and run register again with --headless to sign in from this terminal."
            )
        }
        let arrived = await listener.next(timeout: timeout)
        await listener.stop()
        guard let arrived else { throw ValidationError("The browser did not come back within \(timeout).") }
        return arrived
    }
}

/// `register --headless`: signs in on the token server's own hosted login from this terminal —
/// the username, then the password without echo (or lines of standard input from a script) —
/// through ``HeadlessLoginBrowser``, for a machine without a desktop browser. The login's
/// redirect is taken as the browser would have delivered it; nothing listens for it.
struct TerminalSignIn: Sendable {
    /// The token server, as the device reaches it; the hosted login is mounted on it.
    var server: String
    /// The username given with `--username`; asked for when nil.
    var username: String?
    /// Wrong passwords the user may type before the command gives up (the login locks the
    /// account after its own `maxFailedLogins`).
    static let attempts = 3

    func signIn(_ challenge: BrowserRegistrationChallenge) async throws -> URL {
        guard Self.sameServer(challenge.url, server) else {
            throw SettingError(
                "--headless signs in on the token server's own hosted login (\(server)/login/), but "
                    + "\(challenge.identityProvider.name) signs in at \(challenge.url.host ?? challenge.url.absoluteString): "
                    + "register without --headless and sign in in a browser"
            )
        }
        let browserTransport = HTTPTransport(baseURL: server)
        Terminal.say("Signing in with \(challenge.identityProvider.name) at \(server)/login/.")
        var attempt = 1
        while true {
            guard let username = username ?? Terminal.ask("Username (e-mail address): "), !username.isEmpty,
                let password = Terminal.askSecret("Password for \(username): ")
            else { throw CancellationError() }
            let browser = HeadlessLoginBrowser(transport: browserTransport, username: username, password: password)
            do {
                return try await browser.signIn(at: challenge.url)
            } catch HeadlessLoginBrowser.Failure.page(status: 401, let text) where attempt < Self.attempts {
                // A wrong password: the login said so; ask again.
                Terminal.say(text.isEmpty ? "The login refused the username or password." : text)
                attempt += 1
            }
        }
    }

    /// Whether `url` is on `server`: the same scheme and port, and the same host, any loopback
    /// name counting as one.
    static func sameServer(_ url: URL, _ server: String) -> Bool {
        guard let base = URL(string: server) else { return false }
        func port(_ url: URL) -> Int? { url.port ?? (url.scheme == "https" ? 443 : url.scheme == "http" ? 80 : nil) }
        func host(_ url: URL) -> String {
            let host = (url.host ?? "").lowercased()
            return ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host) ? "loopback" : host
        }
        return url.scheme == base.scheme && port(url) == port(base) && host(url) == host(base)
    }
}

/// A one-shot HTTP listener for the login's redirect.
struct RedirectListener: Sendable {
    /// The redirect URI it listens on, with the port it was given.
    let redirectURI: URL
    let anyPort: Bool
    private let arrivals: AsyncStream<String>
    private let group: ServiceGroup
    private let running: Task<Void, any Error>

    init(redirectURI configured: URL, anyPort: Bool) async throws {
        guard let host = configured.host, let configuredPort = configured.port ?? (anyPort ? 0 : nil) else {
            throw ValidationError("The redirect URI \(configured) names no loopback port to listen on.")
        }
        let (arrivals, arrived) = AsyncStream.makeStream(of: String.self)
        let router = Router()
        router.get(RouterPath(configured.path)) { request, _ -> Response in
            arrived.yield(request.uri.description)
            return Response(
                status: .ok,
                headers: [.contentType: "text/html; charset=utf-8"],
                body: ResponseBody(
                    byteBuffer: .init(
                        string:
                            "<!doctype html><title>Signed in</title><p>You can close this window and return to the app.</p>"
                    )
                )
            )
        }
        var logger = Logger(label: "gatehouse.redirect")
        logger.logLevel = .error
        let (bound, reportBound) = AsyncStream.makeStream(of: Int.self)
        let application = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: anyPort ? 0 : configuredPort)),
            onServerRunning: { channel in
                reportBound.yield(channel.localAddress?.port ?? configuredPort)
                reportBound.finish()
            },
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        let running = Task {
            // A socket that cannot be bound ends the group; the waiting caller must hear of it.
            defer { reportBound.finish() }
            try await group.run()
        }
        var ports = bound.makeAsyncIterator()
        guard let port = await ports.next(),
            var components = URLComponents(url: configured, resolvingAgainstBaseURL: false)
        else {
            let failure = await running.result
            throw ValidationError("Cannot listen for the browser at \(configured): \(failure).")
        }
        components.port = port
        guard let actual = components.url else { throw ValidationError("Cannot listen at \(configured).") }
        redirectURI = actual
        self.anyPort = anyPort
        self.arrivals = arrivals
        self.group = group
        self.running = running
    }

    /// The full URL the browser arrived with, or nil after `timeout`.
    func next(timeout: Duration) async -> URL? {
        let arrivals = arrivals
        let received = await withTaskGroup(of: String?.self) { race in
            race.addTask {
                var iterator = arrivals.makeAsyncIterator()
                return await iterator.next()
            }
            race.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await race.next() ?? nil
            race.cancelAll()
            return first
        }
        guard let received, let host = redirectURI.host, let port = redirectURI.port else { return nil }
        let authority = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return URL(string: "\(redirectURI.scheme ?? "http")://\(authority)\(received)")
    }

    /// A graceful shutdown lets the page the browser is waiting for go out before the socket closes.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await running.value
    }
}
