import GatehouseKernel
import GatehouseTesting
import Testing
import XignInValidators

@Suite("XignIn validator plugins")
struct PluginConfigurationTests {
    @Test("build with documented defaults")
    func defaults() throws {
        let pin = try PluginHarness.validator(XignInPinValidatorPlugin.self)
        #expect(pin.validate("1234").code == "tooShort")
        #expect(pin.validate("12345").isValid)
        #expect(pin.validate(String(repeating: "7", count: 32)).isValid)
        #expect(pin.validate(String(repeating: "7", count: 33)).code == "tooLong")

        let alias = try PluginHarness.validator(XignInAliasValidatorPlugin.self)
        #expect(alias.validate("a").code == "tooShort")
        #expect(alias.validate(String(repeating: "a", count: 50)).isValid)
        #expect(alias.validate(String(repeating: "a", count: 51)).code == "tooLong")

        let email = try PluginHarness.validator(XignInEmailValidatorPlugin.self)
        #expect(email.validate("jane@example.com").isValid)
    }

    @Test("take their limits from the manifest")
    func configured() throws {
        let alias = try PluginHarness.validator(
            XignInAliasValidatorPlugin.self,
            config: ["minLength": 4, "maxLength": 6]
        )
        #expect(alias.validate("abc").code == "tooShort")
        #expect(alias.validate("abcdefg").code == "tooLong")
        let pin = try PluginHarness.validator(XignInPinValidatorPlugin.self, config: ["minLength": 6, "maxLength": 6])
        #expect(pin.validate("12345").code == "tooShort")
        let email = try PluginHarness.validator(XignInEmailValidatorPlugin.self, config: ["maxLength": 20])
        #expect(email.validate("someone.long@example.com").code == "invalid")
    }

    @Test(
        "refuse bad configuration with the key path",
        arguments: [
            ("alias", ["maxLength": "ten"], #"config.maxLength: expected an integer, found "ten""#),
            ("alias", ["minLength": 0], "config.minLength: expected a value from 1 to 256, found 0"),
            (
                "alias", ["minLength": 8, "maxLength": 4],
                "config.maxLength: must not be less than minLength (8), found 4"
            ),
            ("alias", ["maxlength": 4], "config.maxlength: unknown key; expected one of: maxLength, minLength"),
            ("pin", ["minLength": 65], "config.minLength: expected a value from 1 to 64, found 65"),
            (
                "pin", ["minLength": 6, "maxLength": 5],
                "config.maxLength: must not be less than minLength (6), found 5"
            ),
            ("email", ["maxLength": 500], "config.maxLength: expected a value from 6 to 254, found 500"),
            ("email", ["strict": true], "config.strict: unknown key; expected one of: maxLength"),
        ] as [(String, [String: ConfigValue], String)]
    )
    func refusesBadConfiguration(plugin: String, config: [String: ConfigValue], expected: String) {
        let problem =
            switch plugin {
            case "alias": PluginHarness.configurationProblem(XignInAliasValidatorPlugin.self, config: config)
            case "pin": PluginHarness.configurationProblem(XignInPinValidatorPlugin.self, config: config)
            default: PluginHarness.configurationProblem(XignInEmailValidatorPlugin.self, config: config)
            }
        #expect(problem == expected)
    }

    @Test("have stable type identifiers")
    func identifiers() {
        #expect(XignInValidators.plugins.map { $0.typeIdentifier } == ["xignin.pin", "xignin.email", "xignin.alias"])
    }
}
