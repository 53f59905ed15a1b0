import Foundation
import GatehouseKernel
import GatehousePlugins
import GatehouseYAML
import Testing

/// A temporary directory that removes itself, for manifest files.
private final class Scratch {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Writes `text` to `name` and returns the path.
    func write(_ name: String, _ text: String) throws -> String {
        let url = directory.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url.path
    }
}

/// The message a host prints for the manifest at `path`, or `nil` if it loads.
private func loadProblem(_ path: String) -> String? {
    do {
        let registry = try PluginRegistry.builtIn
        _ = try registry.load(try ManifestLoader.jsonAndYAML.load(path: path))
        return nil
    } catch {
        return "\(error)"
    }
}

private let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Examples/manifests")

@Suite("Manifest files")
struct ManifestFileTests {
    @Test("the example from the design: a wrong type names file, entry and key path")
    func wrongType() throws {
        let scratch = try Scratch()
        let path = try scratch.write(
            "app.yaml",
            """
            validators:
              - id: email
                type: xignin.email
              - id: alias
                type: xignin.alias
                config:
                  maxLength: ten
            """
        )
        #expect(
            loadProblem(path)
                == #"\#(path): validators[1] (id "alias"): config.maxLength: expected an integer, found "ten""#
        )
    }

    @Test(
        "malformed manifests, each with one clear line",
        arguments: [
            (
                "unknown-type.yaml",
                "validators:\n  - id: zip\n    type: postcode\n",
                #"validators[0] (id "zip"): type: unknown validator type "postcode"; known types: "pin.policy", "xignin.alias", "xignin.email", "xignin.pin""#
            ),
            (
                "duplicate.json",
                #"{"validators": [{"id": "pin", "type": "pin.policy"}, {"id": "pin", "type": "xignin.pin"}]}"#,
                #"validators[1] (id "pin"): id: duplicate id; validators[0] already uses it"#
            ),
            (
                "empty.yaml",
                "# nothing here yet\n",
                "the manifest is empty; it needs at least one of the sections authenticators, identityProviders, validators"
            ),
            (
                "empty.json",
                "  \n",
                "the manifest is empty; it needs at least one of the sections authenticators, identityProviders, validators"
            ),
            (
                "syntax.yaml",
                "validators:\n  - id: email\n   type: xignin.email\n",
                "not valid YAML: line 3, column 4: did not find expected '-' indicator (while parsing a block collection at line 2, column 3)"
            ),
            (
                "syntax.json",
                "{\"validators\": [\n  {\"id\": \"email\", \"type\": \"xignin.email\"},\n]}",
                "not valid JSON: line 2, column 42: a ',' must be followed by another value"
            ),
            (
                "keys.yaml",
                "validators:\n  - id: pin\n    type: pin.policy\n    config:\n      lenght: 6\n",
                #"validators[0] (id "pin"): config.lenght: unknown key; expected one of: blacklist, blocksCommonPins, length, maxSimilarDigits, sequencesAllowed"#
            ),
            (
                "nested.yaml",
                "validators:\n  - id: pin\n    type: pin.policy\n    config:\n      blacklist: [123456, 12345]\n",
                #"validators[0] (id "pin"): config.blacklist[0]: expected a string, found 123456"#
            ),
            (
                "twice.yaml",
                "validators:\n  - id: pin\n    type: pin.policy\n    type: xignin.pin\n",
                #"not valid YAML: line 3, column 5: duplicate keys "type""#
            ),
            (
                "list.yaml",
                "- id: email\n  type: xignin.email\n",
                "expected an object with the sections authenticators, identityProviders, validators; found a list"
            ),
            (
                "manifest.toml",
                "[validators]\n",
                #"unsupported manifest format (".toml"); use .json, .yaml, .yml"#
            ),
        ]
    )
    func malformed(name: String, text: String, expected: String) throws {
        let scratch = try Scratch()
        let path = try scratch.write(name, text)
        let problem = try #require(loadProblem(path))
        #expect(problem.hasPrefix("\(path): \(expected)"), "\(problem)")
        #expect(!problem.contains("\n"), "one line: \(problem)")
    }

    @Test("a missing file or a directory is said so, not dumped")
    func unreadable() throws {
        let scratch = try Scratch()
        let missing = scratch.directory.appendingPathComponent("absent.yaml").path
        #expect(loadProblem(missing) == "\(missing): cannot read the manifest: no such file")
        let directory = scratch.directory.appendingPathComponent("folder.yaml")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        #expect(loadProblem(directory.path) == "\(directory.path): cannot read the manifest: it is a directory")
    }

    @Test("JSON and YAML give the same configuration")
    func sameConfiguration() throws {
        let loader = ManifestLoader.jsonAndYAML
        let yaml = try loader.load(path: examples.appendingPathComponent("validators.yaml").path)
        let json = try loader.load(path: examples.appendingPathComponent("validators.json").path)
        #expect(yaml.entries == json.entries)
        #expect(yaml.entries.count == 4)

        let registry = try PluginRegistry.builtIn
        let fromYAML = try registry.load(yaml)
        let fromJSON = try registry.load(json)
        let samples = ["", "jane@example.com", "J", "Jo", "1234", "123456", "904017", "847291", "12a456", "1111111111"]
        for id in ["email", "alias", "activationPin", "pin"] {
            for sample in samples {
                #expect(
                    fromYAML.validator(id: id)?.validate(sample) == fromJSON.validator(id: id)?.validate(sample),
                    "\(id) \(sample)"
                )
            }
        }
        #expect(fromYAML.validator(id: "pin")?.validate("904017").codes == ["blacklisted"])
    }

    @Test("YAML scalars keep their types: quoted numbers are strings")
    func yamlScalars() throws {
        let value = try YAMLManifestFormat().parse(Data("a: 10\nb: \"10\"\nc: true\nd: ~\ne: 1.5\nf: [x, 2]\n".utf8))
        #expect(value == ["a": 10, "b": "10", "c": true, "d": .null, "e": 1.5, "f": ["x", 2]])
        let json = try JSONManifestFormat().parse(
            Data(#"{"a": 10, "b": "10", "c": true, "d": null, "e": 1.5, "f": ["x", 2]}"#.utf8)
        )
        #expect(json == value)
    }

    @Test("the built-in registry holds every shipped plugin type")
    func builtIn() throws {
        let registry = try PluginRegistry.builtIn
        #expect(registry.types(of: .validator) == ["pin.policy", "xignin.alias", "xignin.email", "xignin.pin"])
    }
}

@Suite("JSON parser")
struct JSONParserTests {
    private func problem(_ text: String) -> String? {
        do {
            _ = try JSONManifestFormat().parse(Data(text.utf8))
            return nil
        } catch {
            return error.problem
        }
    }

    @Test("parses every JSON value kind")
    func values() throws {
        let value = try JSONManifestFormat().parse(
            Data(
                #"{"s": "a\"b\\c\u00e9\ud83d\ude00\n", "i": -12, "d": 1.5e2, "z": 0, "t": true, "f": false, "n": null, "l": [], "o": {}}"#
                    .utf8
            )
        )
        #expect(
            value == [
                "s": "a\"b\\cé😀\n", "i": -12, "d": 150.0, "z": 0, "t": true, "f": false, "n": .null, "l": [], "o": [:],
            ]
        )
        #expect(try JSONManifestFormat().parse(Data("  \n".utf8)) == .null)
    }

    @Test(
        "names the line and column of the problem",
        arguments: [
            (#"{"a": 1,}"#, "line 1, column 8: a ',' must be followed by another key"),
            ("{\n  \"a\": tru\n}", "line 2, column 8: expected a value, found 't'"),
            (#"{"a": 1 "b": 2}"#, #"line 1, column 9: expected ',' or '}' after the value of "a""#),
            (#"{"a": 1, "a": 2}"#, #"line 1, column 10: the key "a" appears twice"#),
            (#"{"a": 01}"#, "line 1, column 7: a number must not start with 0"),
            (#"{"a": "x"#, "line 1, column 7: the string is not closed"),
            ("{\"a\": \"x\ty\"}", "line 1, column 9: a control character must be escaped inside a string"),
            (#"{"a": "\q"}"#, #"line 1, column 8: unknown escape \'q'"#),
            (#"{"a": 1} x"#, "line 1, column 10: unexpected text after the document"),
            (#"[1, 2"#, "line 1, column 6: expected ',' or ']' after a list element"),
            (String(repeating: "[", count: 65), "line 1, column 65: nesting deeper than 64 levels"),
            (#"{'a': 1}"#, "line 1, column 2: expected a quoted key"),
        ]
    )
    func errors(text: String, expected: String) {
        #expect(problem(text) == expected)
    }
}
