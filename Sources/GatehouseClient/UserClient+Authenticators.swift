public import GatehouseKernel
import GatehouseProtocol
import Logging

// Authenticator management: list, register (after the PIN), deregister (never the PIN), and the
// preferred authenticator, which registering does not change and deregistering returns to the PIN.

extension UserClient {
    /// Checks `pin` against the server's current PIN policy, as the create-PIN challenge will:
    /// the policy comes from the server's configuration (its PIN authenticator publishes it) and
    /// is checked on the device; the PIN is sent nowhere. Throws the first rule it breaks as a
    /// `PinValidationError` (`tooShort`, `tooLong`, `notNumeric`, `blacklisted`, `sequence`,
    /// `similarDigits`); returns when the policy accepts it.
    public func validatePinWithPolicy(_ pin: PIN) async throws {
        let offered: ServerConfigurationResponse = try await calls.call("GET", Endpoint.configuration)
        guard let published = offered.authenticators.first(where: { $0.kind == .pin }) else {
            throw GenericError(.configurationInvalid, message: "The server offers no PIN authenticator.")
        }
        guard
            let checker = configuration.plugins.authenticators.first(where: { $0.kind == .pin })?.authenticator
                as? any PinPolicyChecker
        else {
            throw GenericError(
                .configurationInvalid,
                message: "The app's PIN authenticator cannot check a PIN against the server's policy."
            )
        }
        if let violation = try checker.violations(of: pin, publishedConfiguration: published.config ?? .object([:]))
            .first
        {
            throw violation
        }
    }

    /// The app's authenticators for `profile`, registered or not, in manifest order.
    public func authenticators(
        _ filter: AuthenticatorFilter = .all,
        for profile: UserProfile
    ) throws
        -> [AuthenticatorInfo]
    {
        let pinID = try pinAuthenticatorID()
        let registered = Set(try store.registeredAuthenticators(profile: profile.id)).union([pinID])
        let preferred = try store.preferredAuthenticator(profile: profile.id) ?? pinID
        let all = configuration.plugins.authenticators.map {
            AuthenticatorInfo(
                descriptor: $0.descriptor,
                kind: $0.kind,
                isRegistered: registered.contains($0.descriptor.id),
                isPreferred: $0.descriptor.id == preferred
            )
        }
        switch filter {
        case .all: return all
        case .registered: return all.filter(\.isRegistered)
        case .nonRegistered: return all.filter { !$0.isRegistered }
        }
    }

    /// The authenticator ``authenticateUser(_:authenticator:delegate:)`` uses when given none.
    public func preferredAuthenticator(for profile: UserProfile) throws -> AuthenticatorInfo {
        let all = try authenticators(.registered, for: profile)
        guard let preferred = all.first(where: \.isPreferred) ?? all.first(where: { $0.kind == .pin }) else {
            throw GenericError(.configurationInvalid, message: "The app's manifest has no PIN authenticator.")
        }
        return preferred
    }

    /// Makes a registered authenticator the profile's preferred one.
    public func setPreferredAuthenticator(_ id: String, for profile: UserProfile) throws {
        guard let info = try authenticators(.all, for: profile).first(where: { $0.id == id }) else {
            throw AuthenticationError(.authenticatorNotSupported, message: "The app has no authenticator \"\(id)\".")
        }
        guard info.isRegistered else {
            throw AuthenticationError(
                .authenticatorNotRegistered,
                message: "\(info.name) is not registered for this user."
            )
        }
        try store.setPreferredAuthenticator(info.kind == .pin ? nil : id, profile: profile.id)
    }

    /// Registers another authenticator (biometric, custom) for the authenticated user: the PIN
    /// first, then what the authenticator needs. It does not become the preferred one. Returns
    /// what a custom authenticator reported.
    @discardableResult
    public func registerAuthenticator(
        _ id: String,
        delegate: any AuthenticatorRegistrationDelegate
    ) async throws -> CustomInfo? {
        try begin()
        defer { end() }
        guard let session else { throw AuthenticationError(.userNotAuthenticated) }
        let info = try descriptorInfo(id, for: session.profile)
        guard !info.isRegistered else {
            throw AuthenticationError(.authenticatorAlreadyRegistered, message: "\(info.name) is already registered.")
        }
        let profile = session.profile
        let start: FlowResponse = try await deregisteringOnRefusal(profile) {
            try await self.authorized { token, key in
                try await self.calls.call(
                    "POST",
                    Endpoint.authenticatorRegistration,
                    body: AuthenticatorRequest(authenticator: id),
                    key: key,
                    accessToken: token
                )
            }
        }
        let outcome = try await deregisteringOnRefusal(profile) {
            try await self.runFlow(
                self.runner(key: session.key, responder: ChallengeResponders.authenticatorRegistration(delegate)),
                start,
                profile: profile
            )
        }
        try store.save(outcome.changes, profile: profile.id, server: server)
        configuration.logger.info(
            "Authenticator registered",
            metadata: ["profile": "\(profile.id)", "authenticator": "\(id)"]
        )
        return outcome.info ?? outcome.final.info
    }

    /// Deregisters an authenticator of the authenticated user. The PIN cannot be deregistered
    /// (deregister the user instead). If it was the preferred one, the PIN is preferred again.
    public func deregisterAuthenticator(
        _ id: String,
        delegate: any AuthenticatorDeregistrationDelegate = ProceedingDeregistrationDelegate()
    ) async throws {
        try begin()
        defer { end() }
        guard let session else { throw AuthenticationError(.userNotAuthenticated) }
        let info = try descriptorInfo(id, for: session.profile)
        guard info.kind != .pin else { throw AuthenticationError(.pinDeregistrationNotPossible) }
        guard info.isRegistered, let authenticator = configuration.plugins.authenticator(id: id)?.authenticator else {
            throw AuthenticationError(.authenticatorNotRegistered, message: "\(info.name) is not registered.")
        }
        let profile = session.profile
        let storage = StagedPluginStorage(try store.pluginValues(profile: profile.id, plugin: id))
        let refusing = ServerConversation { _ in
            throw GenericError(.requestInvalid, message: "Deregistration sends nothing to the server half.")
        }
        try await authenticator.deregister(
            AuthenticatorContext(
                profile: profile,
                storage: storage,
                server: refusing,
                responder: ChallengeResponders.authenticatorDeregistration(delegate)
            )
        )
        do {
            let _: [String: String] = try await authorized { token, key in
                try await self.calls.call(
                    "POST",
                    Endpoint.authenticatorDeregistration,
                    body: AuthenticatorRequest(authenticator: id),
                    key: key,
                    accessToken: token
                )
            }
        } catch let error as AuthenticationError where error.code == .authenticatorNotRegistered {
            // Already gone on the server: forget it here too.
        }
        try store.save(.init(removed: [id]), profile: profile.id, server: server)
    }

    private func descriptorInfo(_ id: String, for profile: UserProfile) throws -> AuthenticatorInfo {
        guard let info = try authenticators(.all, for: profile).first(where: { $0.id == id }) else {
            throw AuthenticationError(.authenticatorNotSupported, message: "The app has no authenticator \"\(id)\".")
        }
        return info
    }
}
