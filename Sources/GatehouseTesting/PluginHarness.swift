public import GatehouseKernel

/// Loads one plugin alone, the way a host would, from a configuration given in the test.
///
/// ```swift
/// let validator = try PluginHarness.validator(XignInAliasValidatorPlugin.self, config: ["maxLength": 10])
/// let problem = PluginHarness.configurationProblem(XignInAliasValidatorPlugin.self, config: ["maxLength": "ten"])
/// #expect(problem == #"config.maxLength: expected an integer, found "ten""#)
/// ```
public enum PluginHarness {
    /// Builds the validator `plugin` makes from `config`, through a registry and a manifest.
    public static func validator<P: ValidatorPlugin>(
        _ plugin: P.Type,
        config: [String: ConfigValue] = [:],
        environment: PluginEnvironment = .testing()
    ) throws -> any Validator<String> {
        let loaded = try load(
            try PluginRegistry().registering(plugin),
            .validator,
            P.typeIdentifier,
            config,
            environment
        )
        guard let validator = loaded.validator(id: "subject") else {
            throw ManifestError(source: "test", problem: "the registry did not build the validator")
        }
        return validator
    }

    /// Builds both halves of the authenticator `plugin` makes from `config`.
    public static func authenticator<P: AuthenticatorPlugin>(
        _ plugin: P.Type,
        config: [String: ConfigValue] = [:],
        environment: PluginEnvironment = .testing()
    ) throws -> LoadedPlugins.LoadedAuthenticator {
        let loaded = try load(
            try PluginRegistry().registering(plugin),
            .authenticator,
            P.typeIdentifier,
            config,
            environment
        )
        guard let authenticator = loaded.authenticators.first else {
            throw ManifestError(source: "test", problem: "the registry did not build the authenticator")
        }
        return authenticator
    }

    /// Builds both halves of the identity provider `plugin` makes from `config`.
    public static func identityProvider<P: IdentityProviderPlugin>(
        _ plugin: P.Type,
        config: [String: ConfigValue] = [:],
        environment: PluginEnvironment = .testing()
    ) throws -> LoadedPlugins.LoadedIdentityProvider {
        let loaded = try load(
            try PluginRegistry().registering(plugin),
            .identityProvider,
            P.typeIdentifier,
            config,
            environment
        )
        guard let identityProvider = loaded.identityProviders.first else {
            throw ManifestError(source: "test", problem: "the registry did not build the identity provider")
        }
        return identityProvider
    }

    /// The problem decoding `config` into the plugin's configuration, after the entry's location;
    /// `nil` when it decodes. Only decodes, for a plugin whose factory needs what a test cannot
    /// give it: `configurationProblem(_:config:environment:)` (validators, authenticators,
    /// identity providers) also builds the plugin, so what its factory refuses is reported too.
    public static func decodingProblem<P: Plugin>(_ plugin: P.Type, config: [String: ConfigValue]) -> String? {
        do {
            _ = try ConfigurationDecoder().decode(P.Configuration.self, from: .object(config))
            return nil
        } catch {
            return ConfigurationError(path: [.key("config")] + error.path, problem: error.problem).description
        }
    }

    /// The problem a host would report for `config` — decoding it or building the validator —
    /// after the entry's location; `nil` when it is accepted.
    public static func configurationProblem<P: ValidatorPlugin>(
        _ plugin: P.Type,
        config: [String: ConfigValue],
        environment: PluginEnvironment = .testing()
    ) -> String? {
        problem { _ = try validator(plugin, config: config, environment: environment) }
    }

    /// The problem a host would report for `config` — decoding it or building either half of
    /// the authenticator — after the entry's location; `nil` when it is accepted.
    public static func configurationProblem<P: AuthenticatorPlugin>(
        _ plugin: P.Type,
        config: [String: ConfigValue],
        environment: PluginEnvironment = .testing()
    ) -> String? {
        problem { _ = try authenticator(plugin, config: config, environment: environment) }
    }

    /// The problem a host would report for `config` — decoding it or building either half of
    /// the identity provider — after the entry's location; `nil` when it is accepted.
    public static func configurationProblem<P: IdentityProviderPlugin>(
        _ plugin: P.Type,
        config: [String: ConfigValue],
        environment: PluginEnvironment = .testing()
    ) -> String? {
        problem { _ = try identityProvider(plugin, config: config, environment: environment) }
    }

    /// What `load` threw, as a host reports it after the entry's location.
    private static func problem(_ load: () throws -> Void) -> String? {
        do {
            try load()
            return nil
        } catch let error as ManifestError {
            return error.path.map { "\($0): \(error.problem)" } ?? error.problem
        } catch {
            return "\(error)"
        }
    }

    /// Loads a one-entry manifest (id `subject`) through `registry`, as a host would.
    private static func load(
        _ registry: PluginRegistry,
        _ kind: PluginKind,
        _ type: PluginTypeIdentifier,
        _ config: [String: ConfigValue],
        _ environment: PluginEnvironment
    ) throws -> LoadedPlugins {
        let entry: ConfigValue = ["id": "subject", "type": .string(type.rawValue), "config": .object(config)]
        return try registry.load(
            try Manifest([kind.manifestSection: [entry]], source: "test"),
            environment: environment
        )
    }
}
