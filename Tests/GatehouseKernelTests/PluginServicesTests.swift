import GatehouseKernel
import GatehouseTesting
import Testing

/// The kind of service the tests' validator plugin needs: words it refuses.
private protocol WordList: Sendable {
    func contains(_ word: String) -> Bool
}

private struct FixedWords: WordList {
    var words: Set<String>
    func contains(_ word: String) -> Bool { words.contains(word) }
}

private enum WordListKey: PluginServiceKey {
    typealias Value = any WordList
    static let name = "word list"
}

/// Another key with the same name and a different value type: it must never reach `WordListKey`'s
/// services, nor they its.
private enum LookalikeWordListKey: PluginServiceKey {
    typealias Value = [String]
    static let name = WordListKey.name
}

/// A key whose values the host provides without a name.
private enum CounterKey: PluginServiceKey {
    typealias Value = Int
    static let name = "counter"
}

/// `test.wordList`: refuses the words of the word list its configuration's `list` names.
private enum WordListValidatorPlugin: ValidatorPlugin {
    struct Configuration: Decodable, Sendable {
        var list: String
        private enum CodingKeys: String, CodingKey { case list }
        init(from decoder: any Decoder) throws {
            list = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .list)
        }
    }

    static let typeIdentifier: PluginTypeIdentifier = "test.wordList"
    static let summary = "Refuses the words of a host's word list"

    struct WordListValidator: Validator {
        let words: any WordList
        func validate(_ input: String) -> ValidationReport {
            words.contains(input) ? .invalid("listed", "\(input) is not allowed.") : .valid
        }
    }

    static func makeValidator(configuration: Configuration, context: PluginContext) throws -> any Validator<String> {
        WordListValidator(
            words: try context.services.require(
                WordListKey.self,
                named: configuration.list,
                forConfigurationKey: "list"
            )
        )
    }
}

@Suite("Plugin services")
struct PluginServicesTests {
    @Test("a value set under a key and name is read back as the key's type, and only there")
    func readsBackTyped() throws {
        var services = PluginServices()
        services[WordListKey.self, named: "banned"] = FixedWords(words: ["root"])
        services[CounterKey.self] = 3

        // Read back as `any WordList`: no cast at the call site.
        let banned: (any WordList)? = services[WordListKey.self, named: "banned"]
        #expect(banned?.contains("root") == true)
        #expect(services[CounterKey.self] == 3)
        // Another name, or no name, is another place.
        #expect(services[WordListKey.self, named: "other"] == nil)
        #expect(services[WordListKey.self] == nil)
        #expect(services[CounterKey.self, named: "banned"] == nil)

        services[CounterKey.self] = nil
        #expect(services[CounterKey.self] == nil)
    }

    @Test("two keys with the same name do not collide")
    func sameNameKeysDoNotCollide() throws {
        let services = PluginServices()
            .setting(WordListKey.self, named: "banned", to: FixedWords(words: ["root"]))
            .setting(LookalikeWordListKey.self, named: "banned", to: ["admin"])

        #expect(services[WordListKey.self, named: "banned"]?.contains("root") == true)
        #expect(services[WordListKey.self, named: "banned"]?.contains("admin") == false)
        #expect(services[LookalikeWordListKey.self, named: "banned"] == ["admin"])
        #expect(services.names(of: WordListKey.self) == ["banned"])

        // A look-alike alone does not satisfy a plugin that needs the real key.
        let onlyLookalike = PluginServices().setting(LookalikeWordListKey.self, named: "banned", to: ["admin"])
        #expect(onlyLookalike[WordListKey.self, named: "banned"] == nil)
        #expect(onlyLookalike.names(of: WordListKey.self).isEmpty)
    }

    @Test("names lists a key's named services, sorted, without the unnamed one or other keys'")
    func namesOfAKey() {
        let services = PluginServices()
            .setting(WordListKey.self, named: "zebra", to: FixedWords(words: []))
            .setting(WordListKey.self, named: "apple", to: FixedWords(words: []))
            .setting(WordListKey.self, to: FixedWords(words: []))
            .setting(LookalikeWordListKey.self, named: "mango", to: [])
        #expect(services.names(of: WordListKey.self) == ["apple", "zebra"])
        #expect(services.names(of: LookalikeWordListKey.self) == ["mango"])
        #expect(services.names(of: CounterKey.self).isEmpty)
    }

    @Test("merging keeps both sides' services, the other side's where both have one")
    func merging() {
        let defaults = PluginServices()
            .setting(CounterKey.self, to: 1)
            .setting(CounterKey.self, named: "kept", to: 2)
        let integrators = PluginServices()
            .setting(CounterKey.self, to: 10)
            .setting(CounterKey.self, named: "added", to: 20)
        let merged = defaults.merging(integrators)
        #expect(merged[CounterKey.self] == 10)
        #expect(merged[CounterKey.self, named: "kept"] == 2)
        #expect(merged[CounterKey.self, named: "added"] == 20)
    }

    @Test("require returns the service the host provides")
    func requireFindsTheService() throws {
        let services = PluginServices().setting(CounterKey.self, to: 7)
        #expect(try services.require(CounterKey.self) == 7)
    }

    @Test("a missing service is a configuration error naming its kind, the name asked for and those provided")
    func missingServiceError() {
        let services = PluginServices()
            .setting(WordListKey.self, named: "staff", to: FixedWords(words: []))
            .setting(WordListKey.self, named: "guests", to: FixedWords(words: []))
            .setting(LookalikeWordListKey.self, named: "banned", to: [])

        #expect(
            throws: ConfigurationError(
                path: [.key("list")],
                problem: #"the host provides no word list named "banned"; it provides: guests, staff"#
            )
        ) {
            try services.require(WordListKey.self, named: "banned", forConfigurationKey: "list")
        }
        #expect(throws: ConfigurationError(path: [], problem: #"the host provides no word list named "banned""#)) {
            try PluginServices().require(WordListKey.self, named: "banned")
        }
        #expect(
            throws: ConfigurationError(
                path: [],
                problem: "the host provides no word list; it provides only named ones: guests, staff"
            )
        ) {
            try services.require(WordListKey.self)
        }
        #expect(throws: ConfigurationError(path: [], problem: "the host provides no counter")) {
            try services.require(CounterKey.self)
        }
    }

    @Test("a plugin that needs a missing service is refused at load, with the entry and key named")
    func missingServiceAtLoad() throws {
        let lookalikeOnly = PluginEnvironment(
            services: PluginServices().setting(LookalikeWordListKey.self, named: "banned", to: ["root"])
        )
        #expect(
            PluginHarness.configurationProblem(
                WordListValidatorPlugin.self,
                config: ["list": "banned"],
                environment: lookalikeOnly
            ) == #"config.list: the host provides no word list named "banned""#
        )

        var hosting = PluginEnvironment()
        hosting.services[WordListKey.self, named: "banned"] = FixedWords(words: ["root"])
        let validator = try PluginHarness.validator(
            WordListValidatorPlugin.self,
            config: ["list": "banned"],
            environment: hosting
        )
        #expect(validator.validate("root") != .valid)
        #expect(validator.validate("ann") == .valid)
    }

    @Test("a plugin context hands on the environment's services")
    func contextCarriesServices() {
        var environment = PluginEnvironment()
        environment.services[CounterKey.self, named: "answer"] = 42
        let context = PluginContext(id: "subject", type: "test.wordList", environment: environment)
        #expect(context.services[CounterKey.self, named: "answer"] == 42)
    }
}
