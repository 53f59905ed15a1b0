import Crypto
import Foundation
import GRDB
public import GatehouseKernel
public import GatehouseProtocol
import Logging

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
    let pinAuthenticator: HostedAuthenticator
    let defaultIdentityProvider: HostedIdentityProvider
    let clock: any WallClock
    let logger: Logger
    let extensions: [any ServerExtension]

    /// A server for `manifest`'s plugins and `server` section, with its state at `databasePath`,
    /// and `extensions` mounted under their path prefixes.
    public init(
        manifest: Manifest,
        registry: PluginRegistry,
        databasePath: String,
        environment: PluginEnvironment,
        extensions: [any ServerExtension] = []
    ) throws {
        let plugins = try registry.load(manifest, environment: environment, sides: .server)
        configuration = try manifest.section("server", as: ServerConfiguration.self)
        let authenticators = plugins.authenticators.compactMap { loaded in
            loaded.verifier.map { HostedAuthenticator(descriptor: loaded.descriptor, verifier: $0) }
        }
        let identityProviders = plugins.identityProviders.compactMap { loaded in
            loaded.host.map { HostedIdentityProvider(descriptor: loaded.descriptor, host: $0) }
        }
        guard let pin = authenticators.first(where: { $0.descriptor.type == "pin" }) else {
            throw ManifestError(
                source: manifest.source,
                path: "authenticators",
                problem: "a \"pin\" authenticator is required"
            )
        }
        guard let firstProvider = identityProviders.first else {
            throw ManifestError(
                source: manifest.source,
                path: "identityProviders",
                problem: "at least one identity provider is required"
            )
        }
        if let name = configuration.defaultIdentityProvider {
            guard let provider = identityProviders.first(where: { $0.descriptor.id == name }) else {
                throw ManifestError(
                    source: manifest.source,
                    path: "server.defaultIdentityProvider",
                    problem: "no identity provider has the id \"\(name)\""
                )
            }
            defaultIdentityProvider = provider
        } else {
            defaultIdentityProvider = firstProvider
        }
        pinAuthenticator = pin
        self.identityProviders = identityProviders
        self.authenticators = authenticators
        store = try ServerStore(path: databasePath)
        clock = environment.clock
        logger = environment.logger
        self.extensions = extensions
    }

    /// Answers one request. Never throws: every problem becomes an error response.
    public func handle(_ request: WireRequest) async -> WireResponse {
        do {
            return try await route(request)
        } catch let error as ServerError {
            logger.debug(
                "Refused",
                metadata: ["path": "\(request.path)", "status": "\(error.status)", "error": "\(error.body.error)"]
            )
            return error.response
        } catch let error as any DomainError {
            return ServerError(error).response
        } catch {
            logger.error(
                "Request failed",
                metadata: ["path": "\(request.path)", "error": "\(String(reflecting: error))"]
            )
            return ServerError(500, "server_error", "The server could not complete the request.").response
        }
    }

    private func route(_ request: WireRequest) async throws -> WireResponse {
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        if let mounted = extensions.first(where: { path.hasPrefix($0.pathPrefix) }) {
            return await mounted.handle(request)
        }
        switch path {
        case Endpoint.health:
            try require("GET", request)
            return try json(["status": "ok"])
        case Endpoint.configuration:
            try require("GET", request)
            return try json(serverConfiguration())
        case Endpoint.clients:
            try require("POST", request)
            return try await registerClient(request)
        case Endpoint.registration:
            try require("POST", request)
            return try await startRegistration(request)
        case Endpoint.authentication:
            try require("POST", request)
            return try await startAuthentication(request)
        case Endpoint.changePin:
            try require("POST", request)
            return try await startChangePin(request)
        case Endpoint.token:
            try require("POST", request)
            return try await refresh(request)
        case Endpoint.revoke:
            try require("POST", request)
            return try await revoke(request)
        case Endpoint.deregister:
            try require("POST", request)
            return try await deregister(request)
        case Endpoint.profileResource:
            try require("GET", request)
            return try await profileResource(request)
        default:
            if path.hasPrefix(Endpoint.flowPrefix) {
                let id = String(path.dropFirst(Endpoint.flowPrefix.count))
                try require("POST", request)
                return try await flowMessage(id: id, request)
            }
            throw ServerError(404, "not_found", "There is no endpoint \(path).")
        }
    }

    // MARK: - Requests

    private func require(_ method: String, _ request: WireRequest) throws {
        guard request.method == method else {
            var error = ServerError(405, "invalid_request", "\(request.path) accepts \(method) only.")
            error.headers["Allow"] = method
            throw error
        }
    }

    /// Decodes a JSON body strictly: size, media type, syntax, and every field's type, with the
    /// field named in the message. Unknown fields are refused.
    func decodeBody<T: Decodable>(_ type: T.Type, _ request: WireRequest) throws -> T {
        do {
            return try RequestBody.decode(type, from: request, maxBytes: configuration.maxRequestBytes)
        } catch {
            throw ServerError(error.status, "invalid_request", error.description)
        }
    }

    /// Checks the request's DPoP proof (not yet its single use: see ``recordProof(_:_:)``).
    func proof(_ request: WireRequest, accessToken: String? = nil) throws -> DPoP.VerifiedProof {
        guard let header = request.header("DPoP") else { throw ServerError.invalidProof("A DPoP proof is required.") }
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        do {
            return try DPoP.verify(header, method: request.method, path: path, accessToken: accessToken, now: clock.now)
        } catch {
            throw ServerError.invalidProof("The DPoP proof is not valid: \(error.reason).")
        }
    }

    /// Records a proof's `jti` in the same transaction as the change it authorises, so a replayed
    /// proof is refused and a refused request leaves nothing behind.
    func recordProof(_ proof: DPoP.VerifiedProof, _ db: Database) throws {
        let now = clock.now.timeIntervalSince1970
        try db.execute(sql: "DELETE FROM dpop_proofs WHERE expires_at < ?", arguments: [now])
        do {
            try db.execute(
                sql: "INSERT INTO dpop_proofs (jti, expires_at) VALUES (?, ?)",
                arguments: [proof.keyThumbprint + ":" + proof.jti, now + 2 * DPoP.allowedClockSkew]
            )
        } catch DatabaseError.SQLITE_CONSTRAINT_PRIMARYKEY {
            throw ServerError.invalidProof("The DPoP proof was already used.")
        }
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

    private func serverConfiguration() -> ServerConfigurationResponse {
        ServerConfigurationResponse(
            identityProviders: identityProviders.map {
                .init(
                    id: $0.descriptor.id,
                    type: $0.descriptor.type.rawValue,
                    name: $0.descriptor.name,
                    isDefault: $0.descriptor.id == defaultIdentityProvider.descriptor.id
                )
            },
            authenticators: authenticators.map {
                .init(id: $0.descriptor.id, type: $0.descriptor.type.rawValue, name: $0.descriptor.name)
            },
            maxPinFailures: configuration.maxPinFailures
        )
    }

    private func registerClient(_ request: WireRequest) async throws -> WireResponse {
        let body = try decodeBody(ClientRegistrationRequest.self, request)
        let proof = try proof(request)
        guard body.publicKey.publicKey() != nil else {
            throw ServerError.invalidRequest("public_key is not a P-256 key.")
        }
        guard proof.keyThumbprint == body.publicKey.thumbprint else {
            throw ServerError.invalidProof("The DPoP proof must be signed by the key being registered.")
        }
        guard configuration.clients.contains(where: { $0.id == body.appID }) else {
            throw ServerError(401, "invalid_client", "The application \"\(body.appID)\" may not register.")
        }
        let now = now
        let clientID = try await store.pool.write { db -> String in
            try self.recordProof(proof, db)
            if let existing = try String.fetchOne(
                db,
                sql: "SELECT id FROM clients WHERE key_thumbprint = ?",
                arguments: [proof.keyThumbprint]
            ) {
                return existing
            }
            let id = Data.random(count: 16).base64URLEncodedString
            try db.execute(
                sql: "INSERT INTO clients (id, app_id, key_thumbprint, created_at) VALUES (?, ?, ?, ?)",
                arguments: [id, body.appID, proof.keyThumbprint, now]
            )
            return id
        }
        return try json(ClientRegistrationResponse(clientID: clientID), status: 201)
    }
}

/// An identity provider's server half with its descriptor.
struct HostedIdentityProvider: Sendable {
    var descriptor: IdentityProviderDescriptor
    var host: any IdentityProviderHost
}

/// An authenticator's server half with its descriptor.
struct HostedAuthenticator: Sendable {
    var descriptor: AuthenticatorDescriptor
    var verifier: any AuthenticatorVerifier
}
