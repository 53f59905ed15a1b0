// validate-input: loads a manifest, then checks `id=value` pairs with the validators it names.
//
//   swift run validate-input --manifest Examples/manifests/validators.yaml email=jane@example.com alias=J
//
// A value of `-` is read from standard input, so secrets stay out of the process list.
// Exit status: 0 when the values were checked (1 with --strict if any was invalid), 2 when the
// command line or the manifest is wrong.

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

let usage = "usage: validate-input --manifest FILE [--strict] [id=value | id=- …]"
var manifestPath: String?
var strict = false
var pairs: [(id: String, value: String)] = []
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--manifest":
        guard let path = arguments.popFirst() else { fail(usage) }
        manifestPath = path
    case "--strict":
        strict = true
    case "--help", "-h":
        print(usage)
        exit(0)
    default:
        guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
            fail("not an id=value pair: \(argument)\n\(usage)")
        }
        var value = String(argument[argument.index(after: equals)...])
        if value == "-" { value = readLine(strippingNewline: true) ?? "" }
        pairs.append((String(argument[..<equals]), value))
    }
}
guard let manifestPath else { fail(usage) }

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
