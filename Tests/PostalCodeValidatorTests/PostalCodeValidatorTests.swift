import GatehouseKernel
import GatehouseTesting
import PostalCodeValidator
import Testing

@Suite("Example third-party validator")
struct PostalCodeValidatorTests {
    @Test(
        "checks Dutch postal codes",
        arguments: [
            ("1234 AB", "valid"), ("1234ab", "valid"), ("0123 AB", "badNumber"), ("12A4 AB", "badNumber"),
            ("1234 SS", "badLetters"), ("1234 A", "badLetters"), ("1234 A1", "badLetters"), ("1234  AB", "badSpacing"),
        ]
    )
    func codes(input: String, expected: String) throws {
        let validator = try PluginHarness.validator(PostalCodeValidatorPlugin.self)
        #expect(validator.validate(input).code.rawValue == expected)
    }

    @Test("can require the space")
    func requiresSpace() throws {
        let validator = try PluginHarness.validator(PostalCodeValidatorPlugin.self, config: ["requiresSpace": true])
        #expect(validator.validate("1234AB").code == "badSpacing")
        #expect(validator.validate("1234 AB").isValid)
        #expect(
            PluginHarness.configurationProblem(PostalCodeValidatorPlugin.self, config: ["requiresSpace": 1])
                == "config.requiresSpace: expected true or false, found 1"
        )
    }
}
