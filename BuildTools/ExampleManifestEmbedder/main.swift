// Writes manifest files as Swift source: `ExampleManifestEmbedder OUTPUT FILE…` (the
// EmbedExampleManifests build-tool plugin runs it on Examples/manifests). Each file becomes a raw
// multi-line string literal whose delimiter has more `#` than any run of `#` in the text, so the
// text needs no escaping and comes back exactly as it is in the file.

import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard let output = arguments.first else {
    FileHandle.standardError.write(Data("usage: ExampleManifestEmbedder OUTPUT FILE…\n".utf8))
    exit(64)
}

/// The longest run of `#` in `text`.
func longestHashRun(_ text: String) -> Int {
    var longest = 0
    var current = 0
    for character in text {
        current = character == "#" ? current + 1 : 0
        longest = max(longest, current)
    }
    return longest
}

/// `text` as a raw string literal of one line (a file name).
func literal(_ text: String) -> String {
    let hashes = String(repeating: "#", count: longestHashRun(text) + 1)
    return "\(hashes)\"\(text)\"\(hashes)"
}

var source = """
    // Generated at build time from Examples/manifests by the EmbedExampleManifests build-tool
    // plugin (BuildTools/). Edit those files, never this one.

    /// The files of Examples/manifests, by file name, as they are in the source tree.
    let embeddedExampleManifests: [(name: String, text: String)] = [

    """
for path in arguments.dropFirst() {
    let text: String
    do {
        text = try String(contentsOfFile: path, encoding: .utf8)
    } catch {
        FileHandle.standardError.write(Data("error: \(path) cannot be read as UTF-8 text: \(error)\n".utf8))
        exit(1)
    }
    let name = URL(fileURLWithPath: path).lastPathComponent
    let hashes = String(repeating: "#", count: longestHashRun(text) + 1)
    // A multi-line literal ends before the line break that precedes its closing delimiter, and a
    // closing delimiter at the start of a line strips no indentation.
    source += "    (\n        \(literal(name)),\n        \(hashes)\"\"\"\n\(text)\n\"\"\"\(hashes)\n    ),\n"
}
source += "]\n"

// Written only when it changed, so an unchanged file does not make the target compile again.
let existing = try? String(contentsOfFile: output, encoding: .utf8)
if existing != source {
    do {
        try source.write(toFile: output, atomically: true, encoding: .utf8)
    } catch {
        FileHandle.standardError.write(Data("error: cannot write \(output): \(error)\n".utf8))
        exit(1)
    }
}
