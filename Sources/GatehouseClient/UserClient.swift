import Crypto
import Foundation
public import GatehouseKernel
public import GatehouseProtocol
import Logging

/// The SDK an app embeds: registers users through identity providers, authenticates them with
/// any registered authenticator (the PIN always), keeps a DPoP-bound session, manages
/// authenticators, changes the PIN, calls protected resources and deregisters. One action at a
/// time: a second one started while the first runs fails with `GenericError.actionAlreadyInProgress`.
public actor UserClient {
    /// How the client was set up.
    public nonisolated let configuration: ClientConfiguration
    let store: ClientStore
    let calls: ServerCalls
    var session: Session?
    /// The implicit token: one profile's, without user interaction (non-sensitive data).
    var implicitSession: ImplicitSession?
    /// The device token: the installation's own, no user.
    var deviceSession: DeviceSession?
    private var busy = false
    /// The flow the running action has open, for ``cancelFlowInProgress(timeout:)``.
    let flows = FlowsInProgress()
    /// Payloads the events channel brought, by transaction, until the request is handled.
    var receivedPayloads: [String: SealedBox] = [:]

    struct Session {
        var profile: UserProfile
        var key: P256.Signing.PrivateKey
        var tokens: TokenResponse
        /// A stateless registration's: nothing of it is stored.
        var stateless = false
    }

    struct ImplicitSession {
        var profile: UserProfile
        var key: P256.Signing.PrivateKey
        var token: AccessTokenResponse
    }

    struct DeviceSession {
        var key: P256.Signing.PrivateKey
        var token: AccessTokenResponse
    }

    /// Opens (or creates) the client's database in the configuration's data directory. Throws a `DatabaseFailure`
    /// when it cannot be opened, or the key store's error.
    public init(configuration: ClientConfiguration) throws {
        try PrivateFiles.createFolder(configuration.dataDirectory)
        self.configuration = configuration
        let path = configuration.dataDirectory.appendingPathComponent("client.sqlite").path
        do {
            store = try ClientStore(path: path, keyStore: configuration.keyStore)
        } catch {
            throw DatabaseFailure.sqlite(path, .opening, error)
        }
        calls = ServerCalls(transport: configuration.transport, clock: configuration.clock)
    }

    nonisolated var server: String { configuration.transport.baseURL }

    // MARK: - Profiles

    /// The profiles registered on this device for this server.
    public func userProfiles() throws -> [UserProfile] { try store.profiles(server: server) }

    /// The profiles on this device with the identity provider each registered with, oldest first.
    public func userProfileSummaries() throws -> [ProfileSummary] { try store.profileSummaries(server: server) }

    /// The profile with a session, if any.
    public var authenticatedUserProfile: UserProfile? { session?.profile }

    /// The identity providers the server offers; `isDefault` marks the one `nil` picks.
    public func identityProviders() async throws -> [ServerConfigurationResponse.Provider] {
        let configuration: ServerConfigurationResponse = try await calls.call("GET", Endpoint.configuration)
        return configuration.identityProviders
    }

    // MARK: - Authentication

    /// Authenticates `profile` with `authenticator` (`nil`: the profile's preferred one, the PIN
    /// unless set otherwise). The user may fall back to the PIN; a wrong answer asks again with
    /// the remaining attempts; at the maximum the server deregisters the user, this device
    /// removes the profile and `GenericError.userDeregistered` is thrown. Starting while a
    /// session exists logs out first. Returns what a custom authenticator reported.
    @discardableResult
    public func authenticateUser(
        _ profile: UserProfile,
        authenticator authenticatorID: String? = nil,
        delegate: any AuthenticationDelegate
    ) async throws -> CustomInfo? {
        try begin()
        defer { end() }
        guard let stored = try store.profile(profile.id, server: server) else {
            throw GenericError(
                .userDeregistered,
                message: "The profile \(profile.id) is not registered on this device."
            )
        }
        if session != nil { await endSession() }
        let pinID = try pinAuthenticatorID()
        let chosen = try authenticatorID ?? store.preferredAuthenticator(profile: profile.id) ?? pinID
        if chosen != pinID, !(try store.registeredAuthenticators(profile: profile.id).contains(chosen)) {
            throw AuthenticationError(
                .authenticatorNotRegistered,
                message: "\(chosen) is not registered for this user."
            )
        }
        await delegate.authenticationDidStart(profile: profile, authenticator: try descriptor(chosen))
        func start(with authenticator: String) async throws -> FlowResponse {
            try await deregisteringOnRefusal(profile) {
                try await self.calls.call(
                    "POST",
                    Endpoint.authentication,
                    body: AuthenticationStartRequest(profileID: profile.id, authenticator: authenticator),
                    key: stored.key
                )
            }
        }
        let started: FlowResponse
        do {
            started = try await start(with: chosen)
        } catch let error as AuthenticationError where error.code == .authenticatorNotRegistered && chosen != pinID {
            // The server no longer has it (deregistered elsewhere): forget it here, use the PIN.
            try store.save(.init(removed: [chosen]), profile: profile.id, server: server)
            started = try await start(with: pinID)
        }
        let outcome = try await deregisteringOnRefusal(profile) {
            try await self.runFlow(
                self.runner(key: stored.key, responder: ChallengeResponders.authentication(delegate)),
                started,
                profile: profile
            )
        }
        guard let tokens = outcome.final.tokens else {
            throw GenericError(.requestInvalid, message: "The server finished the authentication without a session.")
        }
        try store.save(outcome.changes, profile: profile.id, server: server)
        session = Session(profile: profile, key: stored.key, tokens: tokens)
        return outcome.info ?? outcome.final.info
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
        defer { end() }
        guard let stored = try store.profile(profile.id, server: server) else { return }
        if session?.profile == profile { session = nil }
        if implicitSession?.profile == profile { implicitSession = nil }
        var failure: (any Error)?
        do {
            let _: [String: String] = try await calls.call(
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
        defer { end() }
        guard let current = session else { throw ChangePinError(.userNotAuthenticated) }
        guard !current.stateless else { throw ChangePinError(.statelessUser) }
        let profile = current.profile
        let start: FlowResponse = try await deregisteringOnRefusal(profile) {
            try await self.authorized { token, key in
                try await self.calls.call("POST", Endpoint.changePin, key: key, accessToken: token)
            }
        }
        let outcome = try await deregisteringOnRefusal(profile) {
            try await self.runFlow(
                self.runner(key: current.key, responder: ChallengeResponders.changePin(delegate)),
                start,
                profile: profile
            )
        }
        try store.save(outcome.changes, profile: profile.id, server: server)
    }

    // MARK: - Internals

    func begin() throws {
        guard !busy else { throw GenericError(.actionAlreadyInProgress) }
        busy = true
        flows.begin()
    }

    func end() {
        busy = false
        flows.end()
    }

    func runner(key: P256.Signing.PrivateKey, responder: any ChallengeResponder, scopes: [String] = []) -> FlowRunner {
        FlowRunner(
            calls: calls,
            plugins: configuration.plugins,
            key: key,
            responder: responder,
            scopes: scopes,
            storedValues: { [store] profile, plugin in try store.pluginValues(profile: profile.id, plugin: plugin) },
            forget: { [store, server] profile, plugin in
                try store.save(.init(removed: [plugin]), profile: profile.id, server: server)
            }
        )
    }

    private func endSession() async {
        guard let current = session else { return }
        session = nil
        let _: [String: String]? = try? await calls.call(
            "POST",
            Endpoint.revoke,
            body: RevocationRequest(token: current.tokens.refreshToken, tokenTypeHint: "refresh_token"),
            key: current.key
        )
    }

    /// Runs `body`; when the server says the user is deregistered, removes the profile here too.
    func deregisteringOnRefusal<T>(_ profile: UserProfile, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as GenericError where error.code == .userDeregistered {
            try store.removeProfile(profile.id)
            if session?.profile == profile { session = nil }
            if implicitSession?.profile == profile { implicitSession = nil }
            configuration.logger.notice(
                "Profile removed: the server deregistered the user",
                metadata: ["profile": "\(profile.id)"]
            )
            throw error
        }
    }

    /// Calls with the session's token, refreshing it once if the server says it is no longer valid.
    func authorized<T>(_ body: (String, P256.Signing.PrivateKey) async throws -> T) async throws -> T {
        guard let current = session else { throw AuthenticationError(.userNotAuthenticated) }
        do {
            return try await body(current.tokens.accessToken, current.key)
        } catch let error as AuthenticationError where error.code == .userNotAuthenticated {
            try await refreshSession()
            guard let refreshed = session else { throw error }
            return try await body(refreshed.tokens.accessToken, refreshed.key)
        }
    }

    func registeredDevice() async throws -> ClientStore.Device {
        if let device = try store.device(server: server) { return device }
        let key = P256.Signing.PrivateKey()
        let response: ClientRegistrationResponse = try await calls.call(
            "POST",
            Endpoint.clients,
            body: ClientRegistrationRequest(appID: configuration.appID, publicKey: PublicJWK(key.publicKey)),
            key: key
        )
        let device = ClientStore.Device(clientID: response.clientID, key: key)
        try store.saveDevice(device, server: server)
        return device
    }

    func pinAuthenticatorID() throws -> String {
        guard let pin = configuration.plugins.pinAuthenticator else {
            throw GenericError(.configurationInvalid, message: "The app's manifest has no PIN authenticator.")
        }
        return pin.descriptor.id
    }

    func descriptor(_ id: String) throws -> AuthenticatorDescriptor {
        guard let loaded = configuration.plugins.authenticator(id: id) else {
            throw AuthenticationError(.authenticatorNotSupported, message: "The app has no authenticator \"\(id)\".")
        }
        return loaded.descriptor
    }
}
