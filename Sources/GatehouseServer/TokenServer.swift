public import CoreMetrics
import Foundation
public import GatehouseKernel
public import GatehouseProtocol
import Logging
import Synchronization

/// The token server: registration through identity providers, PIN enrolment and authentication,
/// DPoP-bound tokens with rotation and reuse detection, revocation, deregistration and an
/// example protected resource.
///
/// It is transport-free: ``handle(_:)`` takes a `WireRequest` and returns a `WireResponse`.
/// ``HTTPTokenServer`` serves it over HTTP; ``EmbeddedTokenServer`` calls it in-process. Both
/// therefore validate, refuse and answer identically.
public final class TokenServer: Sendable {
    /// The manifest's `server` section as decoded, every missing setting at its default.
    public let configuration: ServerConfiguration
    let store: ServerStore
    let identityProviders: [HostedIdentityProvider]
    let authenticators: [HostedAuthenticator]
    /// The PIN: every profile has it, every other authenticator falls back to it.
    let pinAuthenticator: HostedAuthenticator
    /// What a registration enrols, in order (the manifest's `server.registration.authenticators`).
    let registrationAuthenticators: [String]
    let defaultIdentityProvider: HostedIdentityProvider
    let clock: any WallClock
    let logger: Logger
    /// Registrations, deregistrations, lockouts, PIN changes and refresh-token reuse, with
    /// profile ids and never a secret: the trail an operator keeps.
    let audit: Logger
    let metrics: ServerMetrics
    let extensions: [any ServerExtension]
    /// Where pushes go, by the device's platform; the events channel is the server's own.
    let pushTransports: [PushPlatform: any PushTransport]
    /// Sends the pushes through `pushTransports`, tries them again, and disenrols dead tokens.
    let pushDispatcher: PushDispatcher
    let hub: EventChannelHub
    /// Sends the portal's callbacks (with mobile authentication configured).
    let callbacks: CallbackDispatcher?
    let nonces: DPoPNonces
    /// What each authenticator and identity provider publishes for its client half, by id.
    let publishedConfiguration: [String: ConfigValue]
    /// Installations registered per client address.
    let registrationLimiter: RateLimiter
    /// The same limit on installations, shared by every instance on the database: the local one
    /// turns a flood away before its proofs are checked, this one holds across instances.
    let installationLimit: SharedRateLimit
    /// Wrong HTTP Basic secrets per client address, at this instance: turns a flood away before
    /// the shared bucket is asked.
    let clientAuthenticationLimiter: RateLimiter
    /// The same limit shared by every instance on the database (`client-authentication`).
    let clientAuthenticationLimit: SharedRateLimit
    /// Credentials that passed lately, and addresses locked out, at this instance.
    let clientAuthentications: ClientAuthenticationMemory
    /// The resource servers', admin clients' and portal API clients' Basic credentials.
    let resourceServerCredentials: BasicCredentialSet
    let adminCredentials: BasicCredentialSet
    let portalCredentials: BasicCredentialSet
    /// Where the transport serving this server listens, when `server.publicURL` is not set.
    private let servedAt = Mutex<String?>(nil)

    /// The URL clients reach the server at, without a trailing slash: `server.publicURL`, else
    /// the address ``HTTPTokenServer`` listens on, else the embedded server's. DPoP proofs name
    /// it (`htu`), and it is the issuer in the server's metadata.
    public var publicURL: String {
        configuration.publicURL?.absoluteString ?? servedAt.withLock { $0 } ?? EmbeddedTokenServer.defaultURL
    }

    /// Tells the server the address it is served at (the first one told is kept).
    func served(at url: String) {
        servedAt.withLock { current in
            if current == nil { current = url }
        }
    }

    /// A server for `manifest`'s plugins and `server` section, with its state in the SQLite file
    /// at `databasePath`, and `extensions` mounted under their path prefixes.
    public convenience init(
        manifest: Manifest,
        registry: PluginRegistry,
        databasePath: String,
        environment: PluginEnvironment,
        extensions: [any ServerExtension] = [],
        pushTransports: [PushPlatform: any PushTransport] = [:],
        metrics: (any MetricsFactory)? = nil
    ) throws {
        let plan = try ServerPlan(manifest, registry, environment, extensions, pushTransports, metrics)
        self.init(plan: plan, store: try ServerStore(sqlitePath: databasePath, settings: plan.storeSettings))
    }

    /// A server for `manifest`'s plugins and `server` section, with its state in `database`
    /// (a SQLite file, or a PostgreSQL database several instances share), and `extensions`
    /// mounted under their path prefixes. Call ``shutdown()`` when done with it.
    public convenience init(
        manifest: Manifest,
        registry: PluginRegistry,
        database: ServerDatabase,
        environment: PluginEnvironment,
        extensions: [any ServerExtension] = [],
        pushTransports: [PushPlatform: any PushTransport] = [:],
        metrics: (any MetricsFactory)? = nil
    ) async throws {
        let plan = try ServerPlan(manifest, registry, environment, extensions, pushTransports, metrics)
        let store = try await ServerStore.open(database, settings: plan.storeSettings, logger: environment.logger)
        self.init(plan: plan, store: store)
    }

    /// A server for `manifest`'s plugins and `server` section, with its state in `storage`, the
    /// database its extensions' stores share (open it with their migration groups first). The
    /// server does not close `storage`: shut it down after ``shutdown()``.
    public convenience init(
        manifest: Manifest,
        registry: PluginRegistry,
        storage: ServerStorage,
        environment: PluginEnvironment,
        extensions: [any ServerExtension] = [],
        pushTransports: [PushPlatform: any PushTransport] = [:],
        metrics: (any MetricsFactory)? = nil
    ) async throws {
        let plan = try ServerPlan(manifest, registry, environment, extensions, pushTransports, metrics)
        self.init(
            plan: plan,
            store: try await ServerStore.open(on: storage, settings: plan.storeSettings, ownsEngine: false)
        )
    }

    /// Checks `manifest` as a server would load it — every plugin's server and client halves built,
    /// the `server` section read and cross-checked — without opening any state. Throws the first
    /// problem, as a start would.
    public static func check(manifest: Manifest, registry: PluginRegistry, environment: PluginEnvironment) throws {
        _ = try ServerPlan(manifest, registry, environment, [], [:], nil)
        _ = try registry.load(manifest, environment: environment, sides: .client)
    }

    /// Stops the pushes still being tried, and closes the database connections (PostgreSQL) it
    /// opened itself (not a ``ServerStorage`` it was given); the server answers nothing after.
    public func shutdown() async {
        // Pushes still being tried stop first: they read and write the store.
        await pushDispatcher.shutdown()
        if store.ownsEngine { await store.engine.shutdown() }
    }

    private init(plan: ServerPlan, store: ServerStore) {
        let environment = plan.environment
        configuration = plan.configuration
        authenticators = plan.authenticators
        identityProviders = plan.identityProviders
        pinAuthenticator = plan.pinAuthenticator
        defaultIdentityProvider = plan.defaultIdentityProvider
        registrationAuthenticators = plan.registrationAuthenticators
        self.store = store
        hub = EventChannelHub(maxChannels: configuration.maxEventChannels)
        nonces = DPoPNonces(secret: store.dpopNonceSecret)
        publishedConfiguration = plan.publishedConfiguration
        registrationLimiter = RateLimiter(
            perMinute: configuration.rateLimitPerMinute,
            burst: configuration.rateLimitBurst
        )
        installationLimit = SharedRateLimit(
            "installations",
            perMinute: configuration.rateLimitPerMinute,
            burst: configuration.rateLimitBurst
        )
        clientAuthenticationLimiter = RateLimiter(
            perMinute: configuration.clientAuthenticationFailuresPerMinute,
            burst: configuration.clientAuthenticationFailuresPerMinute
        )
        resourceServerCredentials = BasicCredentialSet(configuration.resourceServers.map { ($0.id, $0.secret) })
        adminCredentials = BasicCredentialSet(configuration.admin.clients.map { ($0.id, $0.secret) })
        portalCredentials = BasicCredentialSet(configuration.mobileAuth?.apiClients.map { ($0.id, $0.secret) } ?? [])
        clientAuthentications = ClientAuthenticationMemory { [clock = environment.clock] in
            clock.now.timeIntervalSince1970
        }
        clientAuthenticationLimit = SharedRateLimit(
            "client-authentication",
            perMinute: configuration.clientAuthenticationFailuresPerMinute,
            burst: configuration.clientAuthenticationFailuresPerMinute
        )
        clock = environment.clock
        logger = environment.logger
        var audit = environment.logger
        audit[metadataKey: "log"] = "audit"
        // The audit trail is kept whatever level the rest of the log is set to.
        audit.logLevel = min(audit.logLevel, .notice)
        self.audit = audit
        metrics = ServerMetrics(factory: plan.metrics ?? MetricsSystem.factory)
        extensions = plan.extensions
        pushTransports = plan.pushTransports
        callbacks = configuration.mobileAuth.map {
            CallbackDispatcher(store: store, configuration: $0, clock: environment.clock, logger: environment.logger)
        }
        pushDispatcher = PushDispatcher(
            transports: plan.pushTransports,
            store: store,
            clock: environment.clock,
            logger: environment.logger,
            audit: audit,
            policy: PushRetryPolicy(
                attempts: configuration.mobileAuth?.push?.attempts ?? PushConfiguration.defaultAttempts
            ),
            disenrolled: { [callbacks] in callbacks?.wake() }
        )
        store.engine.subscribe { [hub, clientAuthentications] announcement in
            hub.hear(announcement)
            clientAuthentications.hear(announcement)
        }
        // Callbacks left due by an earlier run go out now.
        callbacks?.wake()
        for case let mounted as any PhoneSignInExtension in extensions { mounted.mounted(with: PhoneSignIn(self)) }
        for case let mounted as any AdminServiceExtension in extensions { mounted.mounted(with: admin) }
    }

    /// Answers one request. Never throws: every problem becomes an error response.
    public func handle(_ request: WireRequest) async -> WireResponse {
        let started = ContinuousClock.now
        let endpoint = endpointLabel(request.path)
        // A server span named by the endpoint's template, when a tracer is installed.
        var response = await ServerTracing.request(request, route: endpoint) { await answer(request) }
        if configuration.requireDPoPNonce { response.headers["DPoP-Nonce"] = nonces.current(now: now) }
        let duration = ContinuousClock.now - started
        metrics.request(endpoint: endpoint, method: request.method, status: response.status, duration: duration)
        // The endpoint's template, never the path: paths carry flow and transaction ids. Probes
        // (health, readiness) only at debug, so they do not drown the log.
        logger.log(
            level: [Endpoint.health, Endpoint.ready].contains(endpoint) ? .debug : .info,
            "Request",
            metadata: [
                "method": "\(request.method.prefix(16))", "endpoint": "\(endpoint)", "status": "\(response.status)",
                "duration_ms": "\(duration.milliseconds)",
            ]
        )
        return response
    }

    /// Lowers the cap on events channels open at once (the HTTP server keeps half its
    /// connection slots for other requests).
    func limitEventChannels(to channels: Int) { hub.limit(to: channels) }

    /// The endpoint `path` belongs to, from a closed set: a template, a mounted extension's
    /// prefix, or "unknown".
    func endpointLabel(_ path: String) -> String {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        if let template = Endpoint.template(of: path) { return template }
        if let mounted = extensions.first(where: { path.hasPrefix($0.pathPrefix) }) { return mounted.pathPrefix + "*" }
        return "unknown"
    }
}
