import Crypto
import Foundation
public import GatehouseKernel
import GatehouseProtocol
import Logging

// Registering a user through an identity provider, stored or stateless.

extension UserClient {
    /// Registers a user through `identityProvider` (`nil`: the server's default), asking the
    /// delegate for the provider's data and for what each authenticator the server enrols needs
    /// (a new PIN at least). Registering the same user again reuses the profile. The user is
    /// authenticated afterwards.
    public func registerUser(
        identityProvider: String? = nil,
        scopes: [String] = [],
        delegate: any RegistrationDelegate
    ) async throws -> RegistrationSuccess {
        try await register(identityProvider: identityProvider, scopes: scopes, stateless: false, delegate: delegate)
    }

    /// Registers a user statelessly: the identity provider names them and the session lives in
    /// this object only. Nothing is stored on the device, no authenticator is enrolled, and the
    /// profile cannot authenticate implicitly or enrol for mobile authentication; the app must be
    /// allowed it (`statelessRegistration`). ``isStateless`` is true while the session lasts.
    public func registerStatelessUser(
        identityProvider: String? = nil,
        scopes: [String] = [],
        delegate: any RegistrationDelegate
    ) async throws -> RegistrationSuccess {
        try await register(identityProvider: identityProvider, scopes: scopes, stateless: true, delegate: delegate)
    }

    /// Whether the session is a stateless registration's.
    public var isStateless: Bool { session?.stateless ?? false }

    private func register(
        identityProvider: String?,
        scopes: [String],
        stateless: Bool,
        delegate: any RegistrationDelegate
    ) async throws -> RegistrationSuccess {
        try begin()
        defer { end() }
        let offered: ServerConfigurationResponse = try await calls.call("GET", Endpoint.configuration)
        guard
            let provider = offered.identityProviders.first(where: {
                identityProvider == nil ? $0.isDefault : $0.id == identityProvider
            }),
            let descriptor = configuration.plugins.identityProviders.first(where: { $0.descriptor.id == provider.id })?
                .descriptor
        else {
            throw RegistrationError(
                .invalidIdentityProvider,
                message: "Neither the server nor the app offers the identity provider \"\(identityProvider ?? "")\"."
            )
        }
        do {
            return try await register(
                provider: provider.id,
                descriptor: descriptor,
                scopes: scopes,
                stateless: stateless,
                delegate: delegate
            )
        } catch {
            await delegate.registrationDidFail(identityProvider: descriptor, error: error)
            throw error
        }
    }

    /// Registration once its identity provider is chosen.
    private func register(
        provider: String,
        descriptor: IdentityProviderDescriptor,
        scopes: [String],
        stateless: Bool,
        delegate: any RegistrationDelegate
    ) async throws -> RegistrationSuccess {
        let device = try await registeredDevice()
        let profileKey = P256.Signing.PrivateKey()
        let start: FlowResponse
        do {
            start = try await calls.call(
                "POST",
                Endpoint.registration,
                body: RegistrationStartRequest(
                    clientID: device.clientID,
                    identityProvider: provider,
                    scopes: scopes.isEmpty ? nil : scopes,
                    profileKey: PublicJWK(profileKey.publicKey),
                    stateless: stateless ? true : nil
                ),
                key: device.key
            )
        } catch let error as GenericError where error.code == .deviceDeregistered {
            try store.forgetDevice(server: server)
            throw error
        }
        await delegate.registrationDidStart(identityProvider: descriptor)
        let outcome = try await runFlow(
            runner(key: device.key, responder: ChallengeResponders.registration(delegate), scopes: scopes),
            start,
            profile: nil
        )
        guard let profile = outcome.profile, let tokens = outcome.final.tokens else {
            throw GenericError(.requestInvalid, message: "The server finished the registration without a session.")
        }
        if !stateless {
            var changes = outcome.changes
            changes.profile = ClientStore.StoredProfile(
                profile: profile,
                identityProvider: provider,
                key: profileKey,
                subject: outcome.final.subject
            )
            try store.save(changes, profile: profile.id, server: server)
        }
        session = Session(profile: profile, key: profileKey, tokens: tokens, stateless: stateless)
        configuration.logger.info(
            "User registered",
            metadata: ["profile": "\(profile.id)", "identityProvider": "\(provider)"]
        )
        return RegistrationSuccess(
            profile: profile,
            identityProvider: descriptor,
            info: outcome.identityInfo ?? outcome.final.info
        )
    }
}
