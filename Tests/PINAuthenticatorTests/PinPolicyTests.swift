import GatehouseKernel
import GatehouseTesting
import PINAuthenticator
import Testing

private func codes(_ pin: String, _ policy: PinPolicy = PinPolicy()) -> [String] {
    policy.violations(of: PIN(pin)).map(\.code.name)
}

@Suite("PIN policy")
struct PinPolicyTests {
    @Test("accepts a PIN that breaks no rule")
    func acceptsGoodPins() {
        for pin in ["847291", "305718", "112394", "640264"] {
            #expect(codes(pin).isEmpty, "\(pin)")
        }
    }

    @Test(
        "reports each rule",
        arguments: [
            ("12345", ["tooShort", "blacklisted", "sequence"]),
            ("84729", ["tooShort"]),
            ("8472913", ["tooLong"]),
            ("84a291", ["notNumeric"]),
            ("", ["tooShort"]),
            ("121212", ["blacklisted", "similarDigits"]),
            ("147258", ["blacklisted"]),
            ("135791", []),  // steps 2, 2, 2, 2, −8: not a sequence
        ]
    )
    func rules(pin: String, expected: [String]) {
        #expect(codes(pin) == expected)
    }

    @Test("sequences: a constant non-zero step, or ±1 wrapping from 9 to 0")
    func sequences() {
        for pin in ["123456", "654321", "456789", "987654"] {
            #expect(codes(pin).contains("sequence"), "\(pin)")
        }
        #expect(codes("013579").contains("sequence") == false)  // 0-1, then steps of 2
        #expect(codes("246802").contains("sequence") == false)  // steps of 2, then −8
        #expect(codes("975310").contains("sequence") == false)
        #expect(codes("789012").contains("sequence"))
        #expect(codes("321098").contains("sequence"))
        #expect(codes("963074", PinPolicy(maxSimilarDigits: 6, blocksCommonPins: false)).isEmpty)
        #expect(codes("159371", PinPolicy(maxSimilarDigits: 6, blocksCommonPins: false)).isEmpty)
        #expect(codes("123456", PinPolicy(sequencesAllowed: true, blocksCommonPins: false)).isEmpty)
        #expect(codes("13579", PinPolicy(length: 5, blocksCommonPins: false)) == ["sequence"])
        #expect(codes("97531", PinPolicy(length: 5, blocksCommonPins: false)) == ["sequence"])
    }

    @Test("similar digits counts every occurrence of a digit, and carries the allowed maximum")
    func similarDigits() {
        #expect(codes("113425").isEmpty)  // two 1s
        #expect(codes("111425") == ["similarDigits"])  // three adjacent 1s
        #expect(codes("141516") == ["similarDigits"])  // three 1s apart
        #expect(codes("141516", PinPolicy(maxSimilarDigits: 3)).isEmpty)
        let error = PinPolicy().violations(of: PIN("141516")).first
        #expect(error?.code == .similarDigits)
        #expect(error?.details.maxSimilarDigits == 2)
        #expect(error?.message == "No digit may occur more than 2 times in the PIN.")
    }

    @Test("the blocklist: configured PINs, built-in common PINs, repeated groups")
    func blocklist() {
        let policy = PinPolicy(blacklist: ["847291"])
        #expect(codes("847291", policy) == ["blacklisted"])
        #expect(codes("847291").isEmpty)
        for common in ["123123", "696969", "159753", "520520", "789456", "102030", "451451"] {
            #expect(codes(common).contains("blacklisted"), "\(common)")
        }
        #expect(codes("159753", PinPolicy(maxSimilarDigits: 2, blocksCommonPins: false)).isEmpty)
        #expect(codes("12341234", PinPolicy(length: 8)).contains("blacklisted"))
    }

    @Test("reports every rule broken, most important first, with the required length")
    func combinations() {
        #expect(codes("1111") == ["tooShort", "blacklisted", "similarDigits"])
        #expect(codes("1111111") == ["tooLong", "blacklisted", "similarDigits"])
        #expect(codes("12 456") == ["notNumeric"])
        #expect(codes("abc") == ["notNumeric", "tooShort"])
        #expect(codes("000000") == ["blacklisted", "similarDigits"])
        #expect(codes("1234567") == ["tooLong", "blacklisted", "sequence"])
        let tooShort = PinPolicy().violations(of: PIN("1234")).first
        #expect(tooShort?.code == .tooShort)
        #expect(tooShort?.details.requiredLength == 6)
        #expect(tooShort?.message == "The PIN must have 6 digits; it has 4.")
    }

    @Test("as a validator plugin: configured from the manifest, every code reported")
    func plugin() throws {
        let validator = try PluginHarness.validator(
            PinPolicyValidatorPlugin.self,
            config: ["length": 5, "maxSimilarDigits": 3, "blacklist": ["24680"]]
        )
        #expect(validator.validate("24680").codes == ["blacklisted"])
        #expect(validator.validate("11125").isValid)
        #expect(validator.validate("12345").codes == ["blacklisted", "sequence"])
        #expect(validator.validate("111").codes == ["tooShort", "blacklisted"])
        #expect(PinPolicyValidatorPlugin.typeIdentifier == "pin.policy")
    }

    @Test(
        "refuses a policy no PIN could satisfy or that contradicts itself",
        arguments: [
            (["length": 4], "config.length: expected a value from 5 to 32, found 4"),
            (["length": 33], "config.length: expected a value from 5 to 32, found 33"),
            (["length": 6, "maxSimilarDigits": 7], "config.maxSimilarDigits: expected a value from 1 to 6, found 7"),
            (
                ["length": 12, "maxSimilarDigits": 1],
                "config.maxSimilarDigits: no PIN of 12 digits can use each digit at most 1 times; use at least 2"
            ),
            (["blacklist": ["123456", "12345"]], #"config.blacklist[1]: expected a PIN of 6 digits, found "12345""#),
            (["blacklist": ["12a456"]], #"config.blacklist[0]: expected a PIN of 6 digits, found "12a456""#),
            (["blacklist": "123456"], #"config.blacklist: expected a list, found "123456""#),
            (["sequencesAllowed": "no"], #"config.sequencesAllowed: expected true or false, found "no""#),
            (
                ["maxSimilar": 2],
                "config.maxSimilar: unknown key; expected one of: blacklist, blocksCommonPins, length, maxSimilarDigits, sequencesAllowed"
            ),
        ] as [([String: ConfigValue], String)]
    )
    func refusesBadPolicy(config: [String: ConfigValue], expected: String) {
        #expect(PluginHarness.configurationProblem(PinPolicyValidatorPlugin.self, config: config) == expected)
    }
}
