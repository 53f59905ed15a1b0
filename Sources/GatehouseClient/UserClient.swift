import Crypto
public import Foundation
public import GatehouseKernel
public import GatehouseProtocol
public import Logging

/// How a ``UserClient`` is set up.
public struct ClientConfiguration: Sendable {
    /// Where the client keeps its database and, by default, its key file.
    public var dataDirectory: URL
    /// How the token server is reached: ``HTTPTransport`` or an embedded server.
    public var transport: any TokenServerTransport
    /// The application id the server knows (a `clients` entry of its manifest).
    public var appID: String
    /// The app's plugins; only their client halves are used (load with `sides: .client`).
    public var plugins: LoadedPlugins
    /// Where the key sealing the client's secrets comes from. Default: a 0600 key file in
    /// ``dataDirectory``.
    public var keyStore: any KeyStore
    public var clock: any WallClock
    public var logger: Logger

    public init(
        dataDirectory: URL,
        transport: any TokenServerTransport,
        appID: String,
        plugins: LoadedPlugins,
        keyStore: (any KeyStore)? = nil,
        clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "gatehouse.client")
    ) {
        self.dataDirectory = dataDirectory
        self.transport = transport
        self.appID = appID
        self.plugins = plugins
        self.keyStore = keyStore ?? FileKeyStore(path: dataDirectory.appendingPathComponent("client.key").path)
        self.clock = clock
        self.logger = logger
    }
}

/// A successful registration.
public struct RegistrationSuccess: Sendable {
    public var profile: UserProfile
    public var identityProvider: IdentityProviderDescriptor
    /// What a custom-API identity provider reported.
    public var info: CustomInfo?
}

/// The SDK an app embeds: registers users through identity providers, authenticates them with
/// the PIN (or another authenticator), keeps a DPoP-bound session, changes the PIN, calls
/// protected resources and deregisters. One action at a time: a second one started while the
/// first runs fails with `GenericError.actionAlreadyInProgress`.
public actor UserClient {
    public nonisolated let configuration: ClientConfiguration
    let store: ClientStore
    private var session: Session?
    private var busy = false

    struct Session {
        var profile: UserProfile
        var key: P256.Signing.PrivateKey
        var tokens: TokenResponse
    }

    public init(configuration: ClientConfiguration) throws {
        try FileManager.default.createDirectory(at: configuration.dataDirectory, withIntermediateDirectories: true)
        self.configuration = configuration
        store = try ClientStore(
            path: configuration.dataDirectory.appendingPathComponent("client.sqlite").path,
            keyStore: configuration.keyStore
        )
    }

    private nonisolated var server: String { configuration.transport.baseURL }

    // MARK: - Profiles

    /// The profiles registered on this device for this server.
    public func userProfiles() throws -> [UserProfile] { try store.profiles(server: server) }

    /// The profile with a session, if any.
    public var authenticatedUserProfile: UserProfile? { session?.profile }

    /// The identity providers the server offers; `isDefault` marks the one `nil` picks.
    public func identityProviders() async throws -> [ServerConfigurationResponse.Provider] {
        let configuration: ServerConfigurationResponse = try await call("GET", Endpoint.configuration)
        return configuration.identityProviders
    }

    // MARK: - Registration

    /// Registers a user through `identityProvider` (`nil`: the server's default), asking the
    /// delegate for the provider's data and a new PIN. Registering the same user again reuses
    /// the profile. The user is authenticated afterwards.
    public func registerUser(
        identityProvider: String? = nil,
        scopes: [String] = [],
        delegate: any RegistrationDelegate
    ) async throws -> RegistrationSuccess {
        try begin()
        defer { busy = false }
        let device = try await registeredDevice()
        let offered: ServerConfigurationResponse = try await call("GET", Endpoint.configuration)
        guard
            let provider = offered.identityProviders.first(where: {
                identityProvider == nil ? $0.isDefault : $0.id == identityProvider
            })
        else {
            throw RegistrationError(
                .invalidIdentityProvider,
                message: "The server offers no identity provider \"\(identityProvider ?? "")\"."
            )
        }
        guard
            let clientHalf = configuration.plugins.identityProviders.first(where: { $0.descriptor.id == provider.id }),
            let registrar = clientHalf.identityProvider
        else {
            throw RegistrationError(
                .invalidIdentityProvider,
                message: "The app has no plugin for the identity provider \"\(provider.id)\"."
            )
        }
        let profileKey = P256.Signing.PrivateKey()
        let start: FlowResponse
        do {
            start = try await call(
                "POST",
                Endpoint.registration,
                body: RegistrationStartRequest(
                    clientID: device.clientID,
                    identityProvider: provider.id,
                    scopes: scopes.isEmpty ? nil : scopes,
                    profileKey: PublicJWK(profileKey.publicKey)
                ),
                key: device.key
            )
        } catch let error as GenericError where error.code == .deviceDeregistered {
            try store.forgetDevice(server: server)
            throw error
        }
        await delegate.registrationDidStart(identityProvider: clientHalf.descriptor)
        let responder = ChallengeResponders.registration(delegate)
        let channel = FlowChannel(start, key: device.key)
        let result = try await registrar.register(
            RegistrationContext(scopes: scopes, server: conversation(channel), responder: responder)
        )
        let afterIdentity = await channel.last
        guard afterIdentity.stage == .pinEnrolment, let profileID = afterIdentity.profileID,
            let pinID = afterIdentity.plugin
        else {
            throw GenericError(.requestInvalid, message: "The server did not move the registration on to the PIN.")
        }
        let profile = UserProfile(id: profileID)
        let staged = StagedPluginStorage([:])
        _ = try await authenticator(pinID).enroll(
            AuthenticatorContext(profile: profile, storage: staged, server: conversation(channel), responder: responder)
        )
        let done = await channel.last
        guard done.stage == .done, let tokens = done.tokens else {
            throw GenericError(.requestInvalid, message: "The server finished the registration without a session.")
        }
        try store.saveProfile(
            ClientStore.StoredProfile(profile: profile, identityProvider: provider.id, key: profileKey),
            server: server,
            pluginValues: [pinID: await staged.values],
            replacingValues: true
        )
        session = Session(profile: profile, key: profileKey, tokens: tokens)
        configuration.logger.info(
            "User registered",
            metadata: ["profile": "\(profileID)", "identityProvider": "\(provider.id)"]
        )
        return RegistrationSuccess(
            profile: profile,
            identityProvider: clientHalf.descriptor,
            info: result.info ?? afterIdentity.info
        )
    }

    // MARK: - Authentication

    /// Authenticates `profile` with `authenticator` (`nil`: the PIN). A wrong PIN asks again with
    /// the remaining attempts; at the maximum the server deregisters the user, this device removes
    /// the profile and `GenericError.userDeregistered` is thrown. Starting while a session exists
    /// logs out first.
    @discardableResult
    public func authenticateUser(
        _ profile: UserProfile,
        authenticator authenticatorID: String? = nil,
        delegate: any AuthenticationDelegate
    ) async throws -> CustomInfo? {
        try begin()
        defer { busy = false }
        guard let stored = try store.profile(profile.id, server: server) else {
            throw GenericError(
                .userDeregistered,
                message: "The profile \(profile.id) is not registered on this device."
            )
        }
        if session != nil { await endSession() }
        let pinID = try pinAuthenticatorID()
        var currentID = authenticatorID ?? pinID
        var previousError: (any DomainError)?
        let responder = ChallengeResponders.authentication(delegate)
        await delegate.authenticationDidStart(profile: profile, authenticator: try descriptor(currentID))
        while true {
            let start: FlowResponse = try await deregisteringOnRefusal(profile) {
                try await self.call(
                    "POST",
                    Endpoint.authentication,
                    body: AuthenticationStartRequest(profileID: profile.id, authenticator: currentID),
                    key: stored.key
                )
            }
            let channel = FlowChannel(start, key: stored.key)
            let storage = StagedPluginStorage(try store.pluginValues(profile: profile.id, plugin: currentID))
            let context = AuthenticatorContext(
                profile: profile,
                storage: storage,
                server: conversation(channel),
                responder: responder,
                failureCounts: start.failureCounts,
                previousError: previousError
            )
            let result: AuthenticatorResult
            do {
                result = try await deregisteringOnRefusal(profile) {
                    try await self.authenticator(currentID).authenticate(context)
                }
            } catch let error as AuthenticationError where error.code == .invalidPin {
                previousError = error
                continue
            }
            switch result {
            case .completed(let info):
                let done = await channel.last
                guard let tokens = done.tokens else {
                    throw GenericError(
                        .requestInvalid,
                        message: "The server finished the authentication without a session."
                    )
                }
                session = Session(profile: profile, key: stored.key, tokens: tokens)
                return info ?? done.info
            case .fallbackToPin(let reason):
                guard currentID != pinID else { throw GenericError(.actionCancelled) }
                previousError = reason.map {
                    AuthenticationError(.customAuthenticatorFailure, details: ErrorDetails(customInfo: $0))
                }
                currentID = pinID
            }
        }
    }

    /// Ends the session: the server revokes its tokens; the profile stays registered.
    public func logout() async {
        await endSession()
    }

    /// Deregisters `profile`: the server revokes all its tokens and forgets it, and this device
    /// removes it. When the server cannot be told, the profile is still removed here and
    /// `DeregistrationError.localDeregistration` says so.
    public func deregisterUser(_ profile: UserProfile) async throws {
        try begin()
        defer { busy = false }
        guard let stored = try store.profile(profile.id, server: server) else { return }
        if session?.profile == profile { session = nil }
        var failure: (any Error)?
        do {
            let _: [String: String] = try await call(
                "POST",
                Endpoint.deregister,
                body: DeregistrationRequest(profileID: profile.id),
                key: stored.key
            )
        } catch {
            failure = error
        }
        try store.removeProfile(profile.id)
        if let failure {
            throw DeregistrationError(
                .localDeregistration,
                message: "The profile was removed from this device, but the server could not be told: \(failure)",
                underlying: failure
            )
        }
    }

    // MARK: - Change PIN

    /// Changes the PIN of the authenticated user: the current PIN first, then a new one that meets
    /// the server's policy. A failed change leaves the old PIN working.
    public func changePin(delegate: any ChangePinDelegate) async throws {
        try begin()
        defer { busy = false }
        guard let current = session else { throw ChangePinError(.userNotAuthenticated) }
        let profile = current.profile
        let pinID = try pinAuthenticatorID()
        let responder = ChallengeResponders.changePin(delegate)
        var previousError: (any DomainError)?
        while true {
            let start: FlowResponse = try await deregisteringOnRefusal(profile) {
                try await self.authorized { token, key in
                    try await self.call("POST", Endpoint.changePin, key: key, accessToken: token)
                }
            }
            let channel = FlowChannel(start, key: current.key)
            let storage = StagedPluginStorage(try store.pluginValues(profile: profile.id, plugin: pinID))
            do {
                _ = try await deregisteringOnRefusal(profile) {
                    try await self.authenticator(pinID).authenticate(
                        AuthenticatorContext(
                            profile: profile,
                            storage: storage,
                            server: self.conversation(channel),
                            responder: responder,
                            failureCounts: start.failureCounts,
                            previousError: previousError
                        )
                    )
                }
            } catch let error as AuthenticationError where error.code == .invalidPin {
                previousError = error
                continue
            }
            let staged = StagedPluginStorage([:])
            _ = try await authenticator(pinID).enroll(
                AuthenticatorContext(
                    profile: profile,
                    storage: staged,
                    server: conversation(channel),
                    responder: responder
                )
            )
            guard await channel.last.stage == .done, let stored = try store.profile(profile.id, server: server) else {
                throw GenericError(.requestInvalid, message: "The server did not finish the PIN change.")
            }
            try store.saveProfile(
                stored,
                server: server,
                pluginValues: [pinID: await staged.values],
                replacingValues: true
            )
            return
        }
    }

    // MARK: - Resources and tokens

    /// Calls the server's example protected resource with the session's DPoP-bound token.
    public func fetchProfileResource() async throws -> ProfileResource {
        try await authorized { token, key in
            try await self.call("GET", Endpoint.profileResource, key: key, accessToken: token)
        }
    }

    /// Rotates the session's tokens with its refresh token.
    public func refreshSession() async throws {
        guard let current = session else { throw AuthenticationError(.userNotAuthenticated) }
        do {
            let tokens: TokenResponse = try await call(
                "POST",
                Endpoint.token,
                body: TokenRequest(grantType: "refresh_token", refreshToken: current.tokens.refreshToken),
                key: current.key
            )
            session?.tokens = tokens
        } catch let error as any DomainError where error.codeName != GenericError.Code.serverNotReachable.name {
            session = nil
            throw AuthenticationError(
                .userNotAuthenticated,
                message: "The session ended (\(error.message)); authenticate again."
            )
        }
    }

    /// The session's current tokens, for apps that call their own resource servers with DPoP.
    public var sessionTokens: TokenResponse? { session?.tokens }

    /// A DPoP proof for a request to one of the app's own resource servers.
    public func dpopProof(method: String, url: String) throws -> String {
        guard let current = session else { throw AuthenticationError(.userNotAuthenticated) }
        return try DPoP.proof(
            method: method,
            url: url,
            accessToken: current.tokens.accessToken,
            key: current.key,
            now: configuration.clock.now
        )
    }

    // MARK: - Internals

    private func begin() throws {
        guard !busy else { throw GenericError(.actionAlreadyInProgress) }
        busy = true
    }

    private func endSession() async {
        guard let current = session else { return }
        session = nil
        let _: [String: String]? = try? await call(
            "POST",
            Endpoint.revoke,
            body: RevocationRequest(token: current.tokens.refreshToken, tokenTypeHint: "refresh_token"),
            key: current.key
        )
    }

    /// Runs `body`; when the server says the user is deregistered, removes the profile here too.
    private func deregisteringOnRefusal<T>(_ profile: UserProfile, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as GenericError where error.code == .userDeregistered {
            try store.removeProfile(profile.id)
            if session?.profile == profile { session = nil }
            configuration.logger.notice(
                "Profile removed: the server deregistered the user",
                metadata: ["profile": "\(profile.id)"]
            )
            throw error
        }
    }

    /// Calls with the session's token, refreshing it once if the server says it is no longer valid.
    private func authorized<T>(_ body: (String, P256.Signing.PrivateKey) async throws -> T) async throws -> T {
        guard let current = session else { throw AuthenticationError(.userNotAuthenticated) }
        do {
            return try await body(current.tokens.accessToken, current.key)
        } catch let error as AuthenticationError where error.code == .userNotAuthenticated {
            try await refreshSession()
            guard let refreshed = session else { throw error }
            return try await body(refreshed.tokens.accessToken, refreshed.key)
        }
    }

    private func registeredDevice() async throws -> ClientStore.Device {
        if let device = try store.device(server: server) { return device }
        let key = P256.Signing.PrivateKey()
        let response: ClientRegistrationResponse = try await call(
            "POST",
            Endpoint.clients,
            body: ClientRegistrationRequest(appID: configuration.appID, publicKey: PublicJWK(key.publicKey)),
            key: key
        )
        let device = ClientStore.Device(clientID: response.clientID, key: key)
        try store.saveDevice(device, server: server)
        return device
    }

    private func pinAuthenticatorID() throws -> String {
        guard let pin = configuration.plugins.authenticators.first(where: { $0.descriptor.type == "pin" }) else {
            throw GenericError(.configurationInvalid, message: "The app's manifest has no \"pin\" authenticator.")
        }
        return pin.descriptor.id
    }

    private func authenticator(_ id: String) throws -> any Authenticator {
        guard
            let authenticator = configuration.plugins.authenticators.first(where: { $0.descriptor.id == id })?
                .authenticator
        else {
            throw AuthenticationError(.authenticatorNotRegistered, message: "The app has no authenticator \"\(id)\".")
        }
        return authenticator
    }

    private func descriptor(_ id: String) throws -> AuthenticatorDescriptor {
        guard let loaded = configuration.plugins.authenticators.first(where: { $0.descriptor.id == id }) else {
            throw AuthenticationError(.authenticatorNotRegistered, message: "The app has no authenticator \"\(id)\".")
        }
        return loaded.descriptor
    }

    /// The channel a plugin's client half uses to reach its server half within one flow.
    private nonisolated func conversation(_ channel: FlowChannel) -> ServerConversation {
        ServerConversation { message in
            let response: FlowResponse = try await self.call(
                "POST",
                Endpoint.flow(await channel.last.flowID),
                body: FlowMessageRequest(message: message),
                key: channel.key
            )
            await channel.update(response)
            if let challenge = response.challenge { return .challenge(challenge.data) }
            return .completed(nil, info: response.info)
        }
    }

    /// One request: JSON body, DPoP proof, access token; a refusal becomes the domain error it
    /// stands for.
    nonisolated func call<Response: Decodable>(
        _ method: String,
        _ path: String,
        body: (some Encodable & Sendable)? = String?.none,
        key: P256.Signing.PrivateKey? = nil,
        accessToken: String? = nil
    ) async throws -> Response {
        var headers: [String: String] = ["Accept": "application/json"]
        var data = Data()
        if let body {
            data = try WireCoding.encode(body)
            headers["Content-Type"] = "application/json"
        }
        if let key {
            headers["DPoP"] = try DPoP.proof(
                method: method,
                url: configuration.transport.baseURL + path,
                accessToken: accessToken,
                key: key,
                now: configuration.clock.now
            )
        }
        if let accessToken { headers["Authorization"] = "DPoP \(accessToken)" }
        let response = try await configuration.transport.send(
            WireRequest(method: method, path: path, headers: headers, body: data)
        )
        guard (200..<300).contains(response.status) else {
            guard let error = try? WireCoding.decode(ErrorBody.self, from: response.body) else {
                throw GenericError(.unknown, message: "The server answered HTTP \(response.status).")
            }
            throw WireErrors.domainError(error, status: response.status)
        }
        do {
            return try WireCoding.decode(Response.self, from: response.body)
        } catch {
            throw GenericError(.requestInvalid, message: "The server's answer to \(path) is malformed.")
        }
    }
}

/// The state of one flow as the client sees it: the last response and the key that signs.
actor FlowChannel {
    private(set) var last: FlowResponse
    nonisolated let key: P256.Signing.PrivateKey

    init(_ start: FlowResponse, key: P256.Signing.PrivateKey) {
        last = start
        self.key = key
    }

    func update(_ response: FlowResponse) { last = response }
}
