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
/// It is transport-free: ``handle(_:)`` takes a ``WireRequest`` and returns a ``WireResponse``.
/// ``HTTPTokenServer`` serves it over HTTP; ``EmbeddedTokenServer`` calls it in-process. Both
/// therefore validate, refuse and answer identically.
public final class TokenServer: Sendable {
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
    let hub: EventChannelHub
    /// Sends the portal's callbacks (with mobile authentication configured).
    let callbacks: CallbackDispatcher?
    let nonces: DPoPNonces
    /// What each authenticator and identity provider publishes for its client half, by id.
    let publishedConfiguration: [String: ConfigValue]
    /// Installations registered per client address.
    let registrationLimiter: RateLimiter
    /// Wrong HTTP Basic secrets per client address.
    let clientAuthenticationLimiter: RateLimiter
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

    /// Checks `manifest` as a server would load it — every plugin's server and client halves built,
    /// the `server` section read and cross-checked — without opening any state. Throws the first
    /// problem, as a start would.
    public static func check(manifest: Manifest, registry: PluginRegistry, environment: PluginEnvironment) throws {
        _ = try ServerPlan(manifest, registry, environment, [], [:], nil)
        _ = try registry.load(manifest, environment: environment, sides: .client)
    }

    /// Closes the database connections (PostgreSQL); the server answers nothing after.
    public func shutdown() async { await store.engine.shutdown() }

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
        clientAuthenticationLimiter = RateLimiter(
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
        store.engine.subscribe { [hub] announcement in hub.hear(announcement) }
        // Callbacks left due by an earlier run go out now.
        callbacks?.wake()
    }

    /// Answers one request. Never throws: every problem becomes an error response.
    public func handle(_ request: WireRequest) async -> WireResponse {
        let started = ContinuousClock.now
        var response = await answer(request)
        if configuration.requireDPoPNonce { response.headers["DPoP-Nonce"] = nonces.current(now: now) }
        let duration = ContinuousClock.now - started
        let endpoint = endpointLabel(request.path)
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

    /// How long `/ready` waits for the database: a probe must get its answer before the
    /// orchestrator's own timeout, whatever the database does.
    static let readinessTimeout: Duration = .seconds(2)

    /// Whether the database answers a lookup within `limit`; a lookup still running then is
    /// cancelled (on PostgreSQL, its connection closed).
    func checkReadiness(within limit: Duration) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.store.checkReadiness() }
            group.addTask {
                try await Task.sleep(for: limit)
                throw ServerDatabaseError("no answer within \(limit)")
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    /// The endpoint `path` belongs to, from a closed set: a template, a mounted extension's
    /// prefix, or "unknown".
    func endpointLabel(_ path: String) -> String {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        if let template = Endpoint.template(of: path) { return template }
        if let mounted = extensions.first(where: { path.hasPrefix($0.pathPrefix) }) { return mounted.pathPrefix + "*" }
        return "unknown"
    }

    private func answer(_ request: WireRequest) async -> WireResponse {
        do {
            do {
                return try await route(request)
            } catch let refusal as StoreRefusal {
                throw ServerError(refusal)
            }
        } catch var error as ServerError {
            // A request that presents an access token is a protected resource's (RFC 9449 §7.1).
            if request.header("Authorization")?.lowercased().hasPrefix("dpop ") == true { error = error.atResource() }
            logger.debug(
                "Refused",
                metadata: [
                    "endpoint": "\(endpointLabel(request.path))", "status": "\(error.status)",
                    "error": "\(error.body.error)",
                ]
            )
            return error.response
        } catch let error as any DomainError {
            return ServerError(error).response
        } catch {
            logger.error(
                "Request failed",
                metadata: ["endpoint": "\(endpointLabel(request.path))", "error": "\(String(reflecting: error))"]
            )
            return ServerError(500, "server_error", "The server could not complete the request.").response
        }
    }

    private func route(_ request: WireRequest) async throws -> WireResponse {
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        if let mounted = extensions.first(where: { path.hasPrefix($0.pathPrefix) }) {
            return await mounted.handle(request)
        }
        switch Self.routes.match(method: request.method, path: path) {
        case .handler(let handler): return try await handler(self, request)
        case .prefix(let handler, let rest): return try await handler(self, request, rest)
        case .methodNotAllowed(let allowed): throw Self.methodNotAllowed(request, allowed: allowed)
        case .notFound: throw ServerError(404, "not_found", "There is no endpoint \(path).")
        }
    }

    // MARK: - Requests

    /// Refuses a request whose method is not `method` (for the routes that serve a path prefix).
    func require(_ method: String, _ request: WireRequest) throws {
        guard request.method == method else { throw Self.methodNotAllowed(request, allowed: method) }
    }

    /// 405, naming the methods the path accepts in `Allow`.
    static func methodNotAllowed(_ request: WireRequest, allowed: String) -> ServerError {
        var error = ServerError(405, "invalid_request", "\(request.path) accepts \(allowed) only.")
        error.headers["Allow"] = allowed
        return error
    }

    /// Decodes a JSON body strictly: size, media type, syntax, and every field's type, with the
    /// field named in the message. Unknown fields are refused.
    func decodeBody<T: Decodable>(_ type: T.Type, _ request: WireRequest, oauth: Bool = false) throws -> T {
        do {
            return try RequestBody.decode(
                type,
                from: request,
                maxBytes: configuration.maxRequestBytes,
                allowingForm: oauth
            )
        } catch {
            throw ServerError(error.status, "invalid_request", error.description)
        }
    }

    /// Checks the request's DPoP proof (not yet its single use: the store records it with the
    /// change it authorises).
    func proof(_ request: WireRequest, accessToken: String? = nil) throws -> ServerStore.ProofUse {
        guard let header = request.header("DPoP") else { throw ServerError.invalidProof("A DPoP proof is required.") }
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        let verified: DPoP.VerifiedProof
        do {
            verified = try DPoP.verify(
                header,
                method: request.method,
                url: publicURL + path,
                accessToken: accessToken,
                now: clock.now
            )
        } catch {
            throw ServerError.invalidProof("The DPoP proof is not valid: \(error.reason).")
        }
        if configuration.requireDPoPNonce {
            guard let nonce = verified.nonce, nonces.accepts(nonce, now: now) else {
                throw ServerError.useDPoPNonce(
                    "The DPoP proof must carry the nonce from the DPoP-Nonce response header."
                )
            }
        }
        return ServerStore.ProofUse(keyThumbprint: verified.keyThumbprint, jti: verified.jti, now: now)
    }

    /// Refuses the request with 429 and `Retry-After` when its address has used up `limiter`.
    func limit(_ request: WireRequest, by limiter: RateLimiter) throws {
        guard let seconds = limiter.retryAfter(forAddress: request.clientAddress, now: now) else { return }
        metrics.event("rate_limited")
        var error = ServerError(
            429,
            "too_many_requests",
            "Too many requests from this address; try again in \(seconds) s."
        )
        error.headers["Retry-After"] = String(seconds)
        throw error
    }

    func json(_ value: some Encodable, status: Int = 200) throws -> WireResponse {
        WireResponse(
            status: status,
            headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: try WireCoding.encode(value)
        )
    }

    var now: Double { clock.now.timeIntervalSince1970 }

    // MARK: - Configuration and clients

    func serverConfiguration() -> ServerConfigurationResponse {
        ServerConfigurationResponse(
            identityProviders: identityProviders.map {
                .init(
                    id: $0.descriptor.id,
                    type: $0.descriptor.type.rawValue,
                    name: $0.descriptor.name,
                    isDefault: $0.descriptor.id == defaultIdentityProvider.descriptor.id,
                    config: publishedConfiguration[$0.descriptor.id]
                )
            },
            authenticators: authenticators.map {
                .init(
                    id: $0.descriptor.id,
                    type: $0.descriptor.type.rawValue,
                    name: $0.descriptor.name,
                    kind: $0.kind,
                    config: publishedConfiguration[$0.descriptor.id]
                )
            },
            maxPinFailures: configuration.maxPinFailures
        )
    }

    func registerClient(_ request: WireRequest) async throws -> WireResponse {
        try limit(request, by: registrationLimiter)
        let body = try decodeBody(ClientRegistrationRequest.self, request)
        let proof = try proof(request)
        guard body.publicKey.verifyingKey() != nil else {
            throw ServerError.invalidRequest("public_key is not a P-256, P-384 or Ed25519 public key.")
        }
        guard proof.keyThumbprint == body.publicKey.thumbprint else {
            throw ServerError.invalidProof("The DPoP proof must be signed by the key being registered.")
        }
        // A configuration problem, not a removed device: the app must not wipe its data (the seed's 10001).
        guard configuration.clients.contains(where: { $0.id == body.appID }) else {
            throw ServerError(
                400,
                "invalid_client_metadata",
                "The server knows no application \"\(body.appID.prefix(64))\"; check the app id in the app's configuration.",
                code: GenericError.Code.configurationInvalid
            )
        }
        let clientID = try await store.registerClient(appID: body.appID, proof: proof)
        return try json(ClientRegistrationResponse(clientID: clientID), status: 201)
    }
}

/// An identity provider's server half with its descriptor.
struct HostedIdentityProvider: Sendable {
    var descriptor: IdentityProviderDescriptor
    var host: any IdentityProviderHost
}

/// An authenticator's server half with its descriptor and kind.
struct HostedAuthenticator: Sendable {
    var descriptor: AuthenticatorDescriptor
    var kind: AuthenticatorKind
    var verifier: any AuthenticatorVerifier
}
