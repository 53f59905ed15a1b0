import GatehouseKernel
import Testing

private struct Limits: Decodable, Equatable {
    var minLength: Int
    var maxLength: Int
    var names: [String]
    var strict: Bool
    var ratio: Double
    var nested: Nested?

    struct Nested: Decodable, Equatable {
        var small: Int8
    }

    private enum CodingKeys: String, CodingKey { case minLength, maxLength, names, strict, ratio, nested }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        minLength = try container.decode(Int.self, forKey: .minLength, default: 1, in: 1...10)
        maxLength = try container.decode(Int.self, forKey: .maxLength)
        names = try container.decode([String].self, forKey: .names, default: [])
        strict = try container.decode(Bool.self, forKey: .strict, default: false)
        ratio = try container.decode(Double.self, forKey: .ratio, default: 0.5)
        nested = try container.decodeIfPresent(Nested.self, forKey: .nested)
    }
}

private func problem(_ value: ConfigValue) -> String? {
    do {
        _ = try ConfigurationDecoder().decode(Limits.self, from: value)
        return nil
    } catch {
        return error.description
    }
}

@Suite("Configuration decoder")
struct ConfigurationDecoderTests {
    @Test("decodes values and applies defaults")
    func decodesWithDefaults() throws {
        let limits = try ConfigurationDecoder().decode(Limits.self, from: ["maxLength": 8, "ratio": 2])
        #expect(limits.minLength == 1)
        #expect(limits.maxLength == 8)
        #expect(limits.names.isEmpty)
        #expect(limits.strict == false)
        #expect(limits.ratio == 2.0)
        #expect(limits.nested == nil)
    }

    @Test(
        "names the key path and says what was expected and found",
        arguments: [
            (["maxLength": "ten"], #"maxLength: expected an integer, found "ten""#),
            (["maxLength": 1.5], "maxLength: expected an integer, found 1.5"),
            (["maxLength": 5, "strict": "yes"], #"strict: expected true or false, found "yes""#),
            (["maxLength": 5, "names": "bob"], #"names: expected a list, found "bob""#),
            (["maxLength": 5, "names": ["a", 7]], "names[1]: expected a string, found 7"),
            (
                ["maxLength": 5, "nested": ["small": 300]],
                "nested.small: expected an integer from -128 to 127, found 300"
            ),
            (["maxLength": 5, "nested": [1, 2]], "nested: expected an object, found a list"),
            (["maxLength": 5, "ratio": [:]], "ratio: expected a number, found an object"),
            ([:], "maxLength: required key is missing"),
            (["maxLength": .null], "maxLength: a value is required, found null"),
            (["maxLength": 5, "minLength": 0], "minLength: expected a value from 1 to 10, found 0"),
            (
                ["maxLength": 5, "maxLenght": 6],
                "maxLenght: unknown key; expected one of: maxLength, minLength, names, nested, ratio, strict"
            ),
            (["maxLength": 5, "nested": ["small": 1, "big": 2]], "nested.big: unknown key; expected one of: small"),
        ] as [(ConfigValue, String)]
    )
    func reportsProblems(value: ConfigValue, expected: String) {
        #expect(problem(value) == expected)
    }

    @Test("refuses a non-object where an object is expected")
    func refusesScalarRoot() {
        #expect(problem("text") == #"expected an object, found "text""#)
    }
}
