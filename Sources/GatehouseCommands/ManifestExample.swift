import ArgumentParser
import Foundation
import GatehouseKernel
import GatehouseServerCommand
import GatehouseYAML

/// The example manifests of Examples/manifests, compiled into the command line at build time
/// (`embeddedExampleManifests`, written by the EmbedExampleManifests build-tool plugin), so
/// `gatehouse manifest example server > server.yaml` and `gatehouse demo` need no checkout.
enum ExampleManifests {
    struct File: Sendable {
        var name: String
        var text: String
    }

    static var all: [File] { embeddedExampleManifests.map { File(name: $0.name, text: $0.text) } }

    /// The example `name` names: a file name (`validators.json`), or one without its extension
    /// when only one file has that stem (`server`).
    static func named(_ name: String) throws -> File {
        if let file = all.first(where: { $0.name == name }) { return file }
        let stems = all.filter { ($0.name as NSString).deletingPathExtension == name }
        if stems.count == 1, let file = stems.first { return file }
        let names = all.map(\.name).joined(separator: ", ")
        if stems.isEmpty { throw ValidationError("There is no example manifest \(name); the examples are \(names).") }
        throw ValidationError(
            "Several example manifests are called \(name): \(stems.map(\.name).joined(separator: ", ")); name one."
        )
    }

    /// The example `name` as a manifest, `${publicURL}` resolved to `publicURL`; messages call it
    /// "NAME (built in)".
    static func manifest(_ name: String, publicURL: String) throws -> Manifest {
        let file = try named(name)
        let source = "\(file.name) (built in)"
        let loader = ManifestLoader.jsonAndYAML
        let fileExtension = (file.name as NSString).pathExtension.lowercased()
        guard let format = loader.formats.first(where: { $0.fileExtensions.contains(fileExtension) }) else {
            throw ManifestError(source: source, problem: "no manifest format reads .\(fileExtension) files")
        }
        let loaded = try loader.parse(
            Data(file.text.utf8),
            format: format,
            source: source,
            additionalSections: CommandSupport.serverSections
        )
        guard ManifestPlaceholders.uses(loaded) else { return loaded }
        return try ManifestPlaceholders.resolve(
            loaded,
            served: publicURL,
            additionalSections: CommandSupport.serverSections
        )
    }
}

/// `gatehouse manifest example [NAME]`.
struct ManifestExample: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "example",
        abstract: "Print an example manifest (e.g. `gatehouse manifest example server > server.yaml`), or list them.",
        discussion: """
            The examples are the files of Examples/manifests in Gatehouse's source, compiled into this command: \
            server (the token server of the README, with the hosted login and XignIn), cluster (several instances \
            on PostgreSQL), totp (for totp-gatehouse), validators and third-party (for validate-input). Their \
            secrets are published: write your own manifest for a server others rely on (docs/PRODUCTION.md).
            """
    )

    @Argument(help: "The example's file name, or its name without the extension when that is unique (server).")
    var name: String?

    func validate() throws {
        if let name { _ = try ExampleManifests.named(name) }
    }

    func run() throws {
        guard let name else {
            for file in ExampleManifests.all { print(file.name) }
            return
        }
        FileHandle.standardOutput.write(Data(try ExampleManifests.named(name).text.utf8))
    }
}
