import Foundation
import GatehouseTesting
import Testing

/// Runs the built `validate-input` example, as a user would from the package root.
private struct ExampleRun {
    var status: Int32
    var output: String
    var errors: String
}

/// The example binary sits beside the test bundle in the build directory.
private func exampleBinary() throws -> URL { try binary("validate-input") }

/// Off the cooperative pool (``ChildProcess``): other tests' servers answer there.
private func run(_ arguments: [String], input: String? = nil) async throws -> ExampleRun {
    let result = try await ChildProcess.run(
        try exampleBinary(),
        arguments: arguments,
        currentDirectory: packageRoot,
        input: Data((input ?? "").utf8)
    )
    return ExampleRun(status: result.status, output: result.outputText, errors: result.errorText)
}

@Suite("validate-input example")
struct ValidateInputTests {
    @Test("loads the manifest and prints each value's result code")
    func validates() async throws {
        let result = try await run([
            "--manifest", "Examples/manifests/validators.yaml", "email=jane@example.com", "alias=J", "email=jane@",
            "pin=345678",
        ])
        #expect(result.status == 0)
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "Loaded 4 plugins from Examples/manifests/validators.yaml:")
        #expect(lines.contains(#"email "jane@example.com": valid"#))
        #expect(lines.contains(#"alias "J": tooShort"#))
        #expect(lines.contains(#"email "jane@": invalid"#))
        #expect(lines.contains(#"pin "••••••": sequence"#))
        #expect(!result.output.contains("345678"), "a PIN must never be echoed")
    }

    @Test("reads a secret from standard input with -, and --strict fails on invalid input")
    func stdinAndStrict() async throws {
        let result = try await run(
            ["--manifest", "Examples/manifests/validators.json", "--strict", "pin=-"],
            input: "111111\n"
        )
        #expect(result.status == 1)
        #expect(result.output.contains(#"pin "••••••": blacklisted, similarDigits"#))
        let valid = try await run(
            ["--manifest", "Examples/manifests/validators.json", "--strict", "pin=-"],
            input: "847291\n"
        )
        #expect(valid.status == 0)
        #expect(valid.output.contains(#"pin "••••••": valid"#))
    }

    @Test("the third-party manifest uses the integrator's validator")
    func thirdParty() async throws {
        let result = try await run([
            "--manifest", "Examples/manifests/third-party.yaml", "postalCode=1234 AB", "postalCode=1234AB",
        ])
        #expect(result.status == 0)
        #expect(result.output.contains("validator postalCode (example.postalCode)"))
        #expect(result.output.contains(#"postalCode "1234 AB": valid"#))
        #expect(result.output.contains(#"postalCode "1234AB": badSpacing"#))
    }

    @Test("a bad manifest or id exits 2 with one clear line")
    func failures() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gatehouse-example-\(UUID().uuidString).yaml"
        )
        try Data("validators:\n  - id: alias\n    type: xignin.alias\n    config: {maxLength: ten}\n".utf8).write(
            to: scratch
        )
        defer { try? FileManager.default.removeItem(at: scratch) }
        let broken = try await run(["--manifest", scratch.path, "alias=x"])
        #expect(broken.status == 2)
        #expect(
            broken.errors
                == #"\#(scratch.path): validators[0] (id "alias"): config.maxLength: expected an integer, found "ten""#
                + "\n"
        )

        let unknown = try await run(["--manifest", "Examples/manifests/validators.yaml", "phone=0612345678"])
        #expect(unknown.status == 2)
        #expect(unknown.errors.contains(#"no validator with id "phone""#))

        let usage = try await run([])
        #expect(usage.status == 2)
        #expect(usage.errors.hasPrefix("Error: Missing expected argument '--manifest <manifest>'"))
        #expect(usage.errors.contains("USAGE: validate-input --manifest <manifest> [--strict]"))
    }
}
