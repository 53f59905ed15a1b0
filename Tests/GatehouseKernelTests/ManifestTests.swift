import GatehouseKernel
import Testing

private func manifestProblem(_ value: ConfigValue, additionalSections: Set<String> = []) -> String? {
    do {
        _ = try Manifest(value, source: "app.yaml", additionalSections: additionalSections)
        return nil
    } catch {
        return error.description
    }
}

@Suite("Manifest schema")
struct ManifestTests {
    @Test("reads entries of every section in order, with defaults for config and name")
    func readsEntries() throws {
        let manifest = try Manifest(
            [
                "validators": [
                    ["id": "email", "type": "xignin.email"],
                    ["id": "pin", "type": "pin.policy", "config": ["length": 6]],
                ],
                "authenticators": [["id": "pin-auth", "type": "pin", "name": "PIN"]],
            ],
            source: "app.yaml"
        )
        #expect(manifest.entries.map(\.id) == ["pin-auth", "email", "pin"])
        #expect(manifest.entries(of: .validator).map(\.type) == ["xignin.email", "pin.policy"])
        #expect(manifest.entries[0].name == "PIN")
        #expect(manifest.entries[1].configuration == .object([:]))
        #expect(manifest.entries[2].configuration == ["length": 6])
        #expect(manifest.entries[2].location == #"validators[1] (id "pin")"#)
    }

    @Test(
        "refuses malformed manifests with one line naming the place",
        arguments: [
            (
                .null,
                "app.yaml: the manifest is empty; it needs at least one of the sections authenticators, identityProviders, validators"
            ),
            (
                [:],
                "app.yaml: the manifest is empty; it needs at least one of the sections authenticators, identityProviders, validators"
            ),
            (
                ["a", "b"],
                "app.yaml: expected an object with the sections authenticators, identityProviders, validators; found a list"
            ),
            (
                ["validator": []],
                "app.yaml: validator: unknown section; expected one of: authenticators, identityProviders, validators"
            ),
            (["validators": ["id": "x"]], "app.yaml: validators: expected a list of entries, found an object"),
            (
                ["validators": ["email"]],
                #"app.yaml: validators[0]: expected an object with the keys config, id, name, type, found "email""#
            ),
            (["validators": [["type": "xignin.email"]]], "app.yaml: validators[0]: id: required key is missing"),
            (
                ["validators": [["id": 7, "type": "xignin.email"]]],
                "app.yaml: validators[0]: id: expected a string, found 7"
            ),
            (
                ["validators": [["id": "my email", "type": "xignin.email"]]],
                #"app.yaml: validators[0]: id: expected 1 to 64 letters, digits, ".", "-" or "_", found "my email""#
            ),
            (
                ["validators": [["id": "email"]]],
                #"app.yaml: validators[0] (id "email"): type: required key is missing"#
            ),
            (
                ["validators": [["id": "email", "type": "xignin.email", "confg": [:]]]],
                #"app.yaml: validators[0] (id "email"): confg: unknown key; expected one of: config, id, name, type"#
            ),
            (
                ["validators": [["id": "email", "type": "xignin.email", "config": [1]]]],
                #"app.yaml: validators[0] (id "email"): config: expected an object, found a list"#
            ),
            (
                ["validators": [["id": "email", "type": "xignin.email"], ["id": "email", "type": "xignin.alias"]]],
                #"app.yaml: validators[1] (id "email"): id: duplicate id; validators[0] already uses it"#
            ),
            (
                [
                    "authenticators": [["id": "pin", "type": "pin"]],
                    "validators": [["id": "pin", "type": "pin.policy"]],
                ],
                #"app.yaml: validators[0] (id "pin"): id: duplicate id; authenticators[0] already uses it"#
            ),
        ] as [(ConfigValue, String)]
    )
    func refusesMalformed(value: ConfigValue, expected: String) {
        #expect(manifestProblem(value) == expected)
    }

    @Test("decodes a host section the host allowed, with the section in the path")
    func decodesHostSection() throws {
        struct Server: Decodable { var port: Int }
        let manifest = try Manifest(["server": ["port": 8080]], source: "server.yaml", additionalSections: ["server"])
        #expect(try manifest.section("server", as: Server.self).port == 8080)
        let broken = try Manifest(["server": ["port": "http"]], source: "server.yaml", additionalSections: ["server"])
        #expect(throws: ManifestError.self) { try broken.section("server", as: Server.self) }
        do {
            _ = try broken.section("server", as: Server.self)
        } catch {
            #expect(error.description == #"server.yaml: server.port: expected an integer, found "http""#)
        }
        #expect(manifestProblem(["server": [:]]) != nil)
    }
}
