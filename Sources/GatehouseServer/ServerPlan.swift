import CoreMetrics
import Foundation
import GatehouseKernel
import GatehouseProtocol

/// What the server is made of but its state: the manifest's plugins and settings, checked
/// before any state is opened, and what the caller mounts and plugs in.
struct ServerPlan {
    var configuration: ServerConfiguration
    var authenticators: [HostedAuthenticator]
    var identityProviders: [HostedIdentityProvider]
    var pinAuthenticator: HostedAuthenticator
    var defaultIdentityProvider: HostedIdentityProvider
    var registrationAuthenticators: [String]
    var publishedConfiguration: [String: ConfigValue]
    var environment: PluginEnvironment
    var extensions: [any ServerExtension]
    var pushTransports: [PushPlatform: any PushTransport]
    var metrics: (any MetricsFactory)?

    var storeSettings: ServerStore.Settings {
        ServerStore.Settings(
            tokenLifetimes: .init(
                access: configuration.accessTokenLifetime,
                refresh: configuration.refreshTokenLifetime
            ),
            maxFailures: configuration.maxPinFailures,
            registrationValidity: Dictionary(
                configuration.clients.compactMap { client in client.registrationValidity.map { (client.id, $0) } },
                uniquingKeysWith: { first, _ in first }
            )
        )
    }
}

extension ServerPlan {
    /// Loads the manifest's server halves and checks what the server needs of them.
    init(
        _ manifest: Manifest,
        _ registry: PluginRegistry,
        _ environment: PluginEnvironment,
        _ extensions: [any ServerExtension],
        _ pushTransports: [PushPlatform: any PushTransport],
        _ metrics: (any MetricsFactory)?
    ) throws {
        let plugins = try registry.load(manifest, environment: environment, sides: .server)
        let configuration = try manifest.section("server", as: ServerConfiguration.self)
        let authenticators = plugins.authenticators.compactMap { loaded in
            loaded.verifier.map { HostedAuthenticator(descriptor: loaded.descriptor, kind: loaded.kind, verifier: $0) }
        }
        let identityProviders = plugins.identityProviders.compactMap { loaded in
            loaded.host.map { HostedIdentityProvider(descriptor: loaded.descriptor, host: $0) }
        }
        func problem(_ path: String, _ text: String) -> ManifestError {
            ManifestError(source: manifest.source, path: path, problem: text)
        }
        guard let pin = authenticators.first(where: { $0.kind == .pin }) else {
            throw problem("authenticators", "a PIN authenticator (type \"pin\") is required")
        }
        guard let firstProvider = identityProviders.first else {
            throw problem("identityProviders", "at least one identity provider is required")
        }
        let defaultProvider: HostedIdentityProvider
        if let name = configuration.defaultIdentityProvider {
            guard let provider = identityProviders.first(where: { $0.descriptor.id == name }) else {
                throw problem("server.defaultIdentityProvider", "no identity provider has the id \"\(name)\"")
            }
            defaultProvider = provider
        } else {
            defaultProvider = firstProvider
        }
        let enrolled = configuration.registrationAuthenticators ?? [pin.descriptor.id]
        for (index, id) in enrolled.enumerated() where !authenticators.contains(where: { $0.descriptor.id == id }) {
            throw problem("server.registrationAuthenticators[\(index)]", "no authenticator has the id \"\(id)\"")
        }
        guard enrolled.first == pin.descriptor.id else {
            throw problem(
                "server.registrationAuthenticators",
                "must start with the PIN authenticator \"\(pin.descriptor.id)\": every user has a PIN, enrolled first"
            )
        }
        for (index, type) in (configuration.mobileAuth?.types ?? []).enumerated() {
            guard let id = type.authenticator else { continue }
            let wanted: AuthenticatorKind = type.method == .biometric ? .biometric : .custom
            guard authenticators.contains(where: { $0.descriptor.id == id && $0.kind == wanted }) else {
                throw problem(
                    "server.mobileAuth.types[\(index)].authenticator",
                    "no \(wanted.rawValue) authenticator has the id \"\(id)\""
                )
            }
        }
        self.init(
            configuration: configuration,
            authenticators: authenticators,
            identityProviders: identityProviders,
            pinAuthenticator: pin,
            defaultIdentityProvider: defaultProvider,
            registrationAuthenticators: enrolled,
            publishedConfiguration: Dictionary(
                manifest.entries.filter { $0.kind != .validator }.compactMap { entry in
                    let published = registry.publishedConfiguration(of: entry)
                    return published == .object([:]) ? nil : (entry.id, published)
                },
                uniquingKeysWith: { first, _ in first }
            ),
            environment: environment,
            extensions: extensions,
            pushTransports: pushTransports,
            metrics: metrics
        )
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
