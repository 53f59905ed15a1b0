import Foundation
import PackagePlugin

/// Compiles the files of `Examples/manifests` into the target as Swift source, so
/// `gatehouse manifest example NAME` prints them from any folder, byte for byte, with no second
/// copy kept by hand. The build runs the embedder again whenever one of the files changes; the
/// folder is listed each time the build is planned, so a new file is picked up too.
@main
struct EmbedExampleManifests: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        let folder = context.package.directoryURL.appending(components: "Examples", "manifests")
        let manifests = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { ["json", "yaml", "yml"].contains($0.pathExtension.lowercased()) }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let output = context.pluginWorkDirectoryURL.appending(component: "EmbeddedExampleManifests.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(manifests.count) example manifests into \(target.name)",
                executable: try context.tool(named: "ExampleManifestEmbedder").url,
                arguments: [output.path(percentEncoded: false)] + manifests.map { $0.path(percentEncoded: false) },
                inputFiles: manifests,
                outputFiles: [output]
            )
        ]
    }
}
