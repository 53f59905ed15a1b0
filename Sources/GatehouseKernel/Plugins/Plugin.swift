public import Logging

/// A plugin type: a stable type identifier, a typed configuration and factories for instances.
///
/// Conform a type (usually an enum without cases) to ``ValidatorPlugin``,
/// ``AuthenticatorPlugin`` or ``IdentityProviderPlugin`` and register it in a
/// ``PluginRegistry``; manifests then refer to it by ``typeIdentifier``.
public protocol Plugin: Sendable {
    /// The plugin's configuration, decoded from a manifest entry's `config`. Give every option a
    /// documented default and check ranges in `init(from:)`, so a manifest is checked before
    /// anything runs.
    associatedtype Configuration: Decodable & Sendable

    /// The name manifests use, e.g. `"xignin.email"`. Never change it once published.
    static var typeIdentifier: PluginTypeIdentifier { get }
    /// One line saying what the plugin does, for listings and start-up reports.
    static var summary: String { get }
    /// The keys of `config` the token server publishes at `/v1/configuration`, so an app can
    /// build this plugin's client half from the server alone. Only what is not secret and what
    /// the client half reads; the default publishes nothing. Each must be a key the
    /// configuration reads: a manifest naming the plugin is refused at load otherwise.
    static var publishedConfigurationKeys: Set<String> { get }
}

extension Plugin {
    /// None: a plugin publishes no configuration unless it names the keys.
    public static var publishedConfigurationKeys: Set<String> { [] }
}

/// A plugin that makes validators of strings.
public protocol ValidatorPlugin: Plugin {
    /// Makes a validator from the entry's checked configuration; throw a ``ConfigurationError`` for
    /// a value `init(from:)` could not check alone.
    static func makeValidator(configuration: Configuration, context: PluginContext) throws -> any Validator<String>
}

/// A plugin that makes both halves of an authenticator.
public protocol AuthenticatorPlugin: Plugin {
    /// PIN, biometric or custom. Default: custom. A manifest holds exactly one PIN authenticator.
    static var authenticatorKind: AuthenticatorKind { get }
    /// The client half, used by the SDK on the device.
    static func makeAuthenticator(configuration: Configuration, context: PluginContext) throws -> any Authenticator
    /// The server half, used by the token server.
    static func makeVerifier(configuration: Configuration, context: PluginContext) throws -> any AuthenticatorVerifier
}

extension AuthenticatorPlugin {
    /// ``AuthenticatorKind/custom``: only the built-in PIN and biometric plugins say otherwise.
    public static var authenticatorKind: AuthenticatorKind { .custom }
}

/// A plugin that makes both halves of an identity provider.
public protocol IdentityProviderPlugin: Plugin {
    /// The client half, used by the SDK on the device.
    static func makeIdentityProvider(
        configuration: Configuration,
        context: PluginContext
    ) throws -> any IdentityProvider
    /// The server half, used by the token server.
    static func makeHost(configuration: Configuration, context: PluginContext) throws -> any IdentityProviderHost
}

/// What a host hands every plugin: logging, time, a place for CPU-heavy work, and services.
/// Dependencies come in here, never from globals.
public struct PluginEnvironment: Sendable {
    /// The host's logger; each plugin gets it with its entry's id and type as metadata.
    public var logger: Logger
    /// The host's clock; plugins read the time from it, never from `Date()`, so tests can move it.
    public var clock: any WallClock
    /// Where plugins run CPU-heavy work (hashing, key derivation), away from the host's event
    /// loops.
    public var cpuWork: any CPUWorkExecutor
    /// Services the host provides, each under a typed key and, where a manifest picks among
    /// several, an instance name (e.g. an in-process custom registration API named by an identity
    /// provider's configuration).
    public var services: PluginServices

    /// Makes an environment; the defaults log as "gatehouse", read the system clock, run CPU work
    /// on Dispatch's global queue (off the cooperative pool) and provide no services.
    public init(
        logger: Logger = Logger(label: "gatehouse"),
        clock: any WallClock = SystemWallClock(),
        cpuWork: any CPUWorkExecutor = DispatchCPUWorkExecutor(),
        services: PluginServices = PluginServices()
    ) {
        self.logger = logger
        self.clock = clock
        self.cpuWork = cpuWork
        self.services = services
    }
}

/// What one plugin instance is given: its manifest entry and the host's environment.
public struct PluginContext: Sendable {
    /// The manifest entry's id.
    public var id: String
    /// The manifest entry's display name, or its id.
    public var name: String
    /// The plugin type the entry names.
    public var type: PluginTypeIdentifier
    /// The host's logger, with the entry's id and type as metadata.
    public var logger: Logger
    /// The host's clock; read the time from it, never from `Date()`, so tests can move it.
    public var clock: any WallClock
    /// Where to run CPU-heavy work (hashing, key derivation), away from the host's event loops.
    public var cpuWork: any CPUWorkExecutor
    /// The host's services (``PluginEnvironment/services``): read one with
    /// ``PluginServices/require(_:named:forConfigurationKey:)``.
    public var services: PluginServices

    /// Makes the context of the manifest entry `id`; `name` defaults to the id.
    public init(id: String, name: String? = nil, type: PluginTypeIdentifier, environment: PluginEnvironment) {
        self.id = id
        self.name = name ?? id
        self.type = type
        var logger = environment.logger
        logger[metadataKey: "plugin.id"] = "\(id)"
        logger[metadataKey: "plugin.type"] = "\(type)"
        self.logger = logger
        self.clock = environment.clock
        self.cpuWork = environment.cpuWork
        self.services = environment.services
    }

    /// How the app will see the authenticator or identity provider made for this entry.
    public var descriptor: PluginDescriptor { PluginDescriptor(id: id, type: type, name: name) }
}
