import GatehouseKernel
import GatehouseTesting
import Synchronization
import Testing

@Suite("Plugin registry", .serialized)
struct PluginRegistryTests {
    @Test("refuses a second plugin with the same type identifier")
    func refusesDuplicateType() throws {
        var registry = try PluginRegistry(validators: [LengthValidatorPlugin.self])
        #expect(throws: PluginRegistryError.self) { try registry.register(ImpostorValidatorPlugin.self) }
        do {
            try registry.register(ImpostorValidatorPlugin.self)
        } catch {
            #expect(
                error.description
                    == #"plugin type "test.length" is already registered by LengthValidatorPlugin (validator)"#
            )
        }
        #expect(throws: PluginRegistryError.self) {
            _ = try PluginRegistry(validators: [LengthValidatorPlugin.self, ImpostorValidatorPlugin.self])
        }
    }

    @Test("lists its types by kind")
    func listsTypes() throws {
        let registry = try PluginRegistry(
            validators: [LengthValidatorPlugin.self],
            authenticators: [FixedAuthenticatorPlugin.self]
        )
        #expect(registry.types(of: .validator) == ["test.length"])
        #expect(registry.types(of: .authenticator) == ["test.fixed"])
        #expect(registry.types(of: .identityProvider).isEmpty)
        #expect(
            registry.catalogue == [
                "authenticator test.fixed: Always succeeds", "validator test.length: Refuses long input",
            ]
        )
    }

    @Test("builds configured plugins and reports what it loaded")
    func loads() throws {
        let registry = try PluginRegistry().registering(LengthValidatorPlugin.self).registering(
            FixedAuthenticatorPlugin.self
        )
        let manifest = try Manifest(
            [
                "validators": [["id": "short", "type": "test.length", "config": ["maxLength": 2]]],
                "authenticators": [["id": "always", "type": "test.fixed", "name": "Always"]],
            ],
            source: "app.yaml"
        )
        let log = RecordingLogger()
        let loaded = try registry.load(manifest, environment: .testing(logger: log))
        #expect(loaded.validator(id: "short")?.validate("abc").code == "tooLong")
        #expect(loaded.validator(id: "short")?.validate("ab").isValid == true)
        #expect(loaded.validator(id: "missing") == nil)
        #expect(
            loaded.authenticators.map(\.descriptor) == [
                AuthenticatorDescriptor(id: "always", type: "test.fixed", name: "Always")
            ]
        )
        #expect(loaded.report == ["validator short (test.length)", "authenticator always (test.fixed)"])
        #expect(log.lines.contains { $0.contains("Loaded plugins") && $0.contains("validator short (test.length)") })
    }

    @Test("refuses an unknown type, listing the known types of that kind")
    func refusesUnknownType() throws {
        let registry = try PluginRegistry(
            validators: [LengthValidatorPlugin.self],
            authenticators: [FixedAuthenticatorPlugin.self]
        )
        let manifest = try Manifest(["validators": [["id": "x", "type": "test.fixed"]]], source: "app.json")
        do {
            _ = try registry.load(manifest)
            Issue.record("an unknown type was accepted")
        } catch {
            #expect(
                error.description
                    == #"app.json: validators[0] (id "x"): type: unknown validator type "test.fixed"; known types: "test.length""#
            )
        }
        let empty = try Manifest(["identityProviders": [["id": "idp", "type": "idp.browser"]]], source: "app.json")
        #expect(throws: ManifestError.self) { try registry.load(empty) }
    }

    @Test("refuses a plugin that publishes a configuration key its configuration never reads")
    func refusesUnreadPublishedKey() throws {
        let registry = try PluginRegistry(validators: [MisspeltPublishingPlugin.self, PublishingPlugin.self])
        // The key is refused whether or not the entry sets it: the configuration never asks for it.
        let misspelt = try Manifest(["validators": [["id": "x", "type": "test.misspelt"]]], source: "app.json")
        do {
            _ = try registry.load(misspelt)
            Issue.record("a misspelt published key was accepted")
        } catch {
            #expect(
                error.description
                    == #"app.json: validators[0] (id "x"): type: MisspeltPublishingPlugin publishes the configuration key "maxLenght", which its configuration never reads; fix its publishedConfigurationKeys"#
            )
        }
        let spelt = try Manifest(["validators": [["id": "y", "type": "test.publishing"]]], source: "app.json")
        _ = try registry.load(spelt)
    }

    @Test("builds nothing when any entry is invalid")
    func buildsNothingOnError() throws {
        let registry = try PluginRegistry(validators: [LengthValidatorPlugin.self])
        let manifest = try Manifest(
            [
                "validators": [
                    ["id": "good", "type": "test.length"],
                    ["id": "bad", "type": "test.length", "config": ["maxLength": "ten"]],
                ]
            ],
            source: "app.yaml"
        )
        let before = LengthValidatorPlugin.built.withLock { $0 }
        do {
            _ = try registry.load(manifest)
            Issue.record("a bad configuration was accepted")
        } catch {
            #expect(
                error.description
                    == #"app.yaml: validators[1] (id "bad"): config.maxLength: expected an integer, found "ten""#
            )
            #expect(error.codeNumber == 10001)
        }
        #expect(LengthValidatorPlugin.built.withLock { $0 } == before)
    }
}
