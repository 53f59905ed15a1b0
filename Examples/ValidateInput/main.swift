// validate-input: loads a manifest, then checks `id=value` pairs with the validators it names.
//
//   validate-input --manifest validators.yaml email=jane@example.com alias=J
//
// (`scripts/install --examples` installs it; `gatehouse manifest example validators.yaml` writes the manifest.)
//
// A value of `-` is read from standard input, so secrets stay out of the process list.
// Exit status: 0 when the values were checked (1 with --strict if any was invalid), 2 when the
// command line or the manifest is wrong.

import ArgumentParser
import Foundation
import GatehouseKernel
import GatehousePlugins
import GatehouseYAML
import Logging
import PostalCodeValidator

/// Validator types whose input is a secret: their values are never echoed.
let secretTypes: Set<PluginTypeIdentifier> = ["pin.policy", "xignin.pin"]

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(2)
}

struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate-input",
        abstract: "Loads a manifest, then checks id=value pairs with the validators it names."
    )

    @Option(help: "The manifest (JSON or YAML) naming the validators.")
    var manifest: String

    @Flag(help: "Exit 1 when any value is invalid.")
    var strict = false

    @Argument(help: "id=value pairs to check; a value of - is read from standard input.")
    var pairs: [String] = []
}

let options: Options
do {
    options = try Options.parse()
} catch {
    // Help is not a failure; a wrong command line exits 2, as a wrong manifest does.
    let code = Options.exitCode(for: error)
    FileHandle.standardError.write(Data((Options.fullMessage(for: error) + "\n").utf8))
    exit(code == .success ? 0 : 2)
}
let manifestPath = options.manifest
let strict = options.strict
var pairs: [(id: String, value: String)] = []
for argument in options.pairs {
    guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
        fail("not an id=value pair: \(argument)\n\(Options.helpMessage())")
    }
    var value = String(argument[argument.index(after: equals)...])
    if value == "-" { value = readLine(strippingNewline: true) ?? "" }
    pairs.append((String(argument[..<equals]), value))
}

// The built-in plugins, plus one written by an integrator: registering it is one line.
let registry: PluginRegistry
let plugins: LoadedPlugins
do {
    registry = try PluginRegistry.builtIn.registering(PostalCodeValidatorPlugin.self)
    let manifest = try ManifestLoader.jsonAndYAML.load(path: manifestPath)
    var logger = Logger(label: "validate-input")
    logger.logLevel = .warning
    plugins = try registry.load(manifest, environment: PluginEnvironment(logger: logger))
} catch {
    fail("\(error)")
}

print("Loaded \(plugins.report.count) plugins from \(manifestPath):")
for line in plugins.report { print("  \(line)") }
if pairs.isEmpty {
    print("Give id=value pairs to check, e.g. \(plugins.validators.first.map { "\($0.id)=…" } ?? "email=…").")
    exit(0)
}

var anyInvalid = false
for (id, value) in pairs {
    guard let entry = plugins.validators.first(where: { $0.id == id }) else {
        let known = plugins.validators.map(\.id).joined(separator: ", ")
        fail("no validator with id \"\(id)\" in \(manifestPath); known ids: \(known)")
    }
    let report = entry.validator.validate(value)
    anyInvalid = anyInvalid || !report.isValid
    let shown = secretTypes.contains(entry.type) ? String(repeating: "•", count: value.count) : value
    print("\(id) \"\(shown)\": \(report)")
    for violation in report.violations { print("    \(violation.code): \(violation.message)") }
}
exit(strict && anyInvalid ? 1 : 0)
