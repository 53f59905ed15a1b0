import Foundation
import Testing

@Suite("gatehouse --help and gatehouse help")
struct HelpCommandTests {
    @Test(
        "help is printed by the argument parser with status 0, for the command and a subcommand",
        arguments: [["--help"], ["help"], ["serve", "--help"], ["help", "signing-keys"], ["signing-keys", "--help"]]
    )
    func help(_ arguments: [String]) async throws {
        let help = try Session(arguments)
        #expect(try await help.finish() == 0, "\(help.errors.withLock { $0 })")
        let output = help.output.withLock { $0 }
        #expect(output.contains("USAGE: gatehouse"), "\(output)")
        #expect(!help.errors.withLock { $0 }.contains("something unexpected"))
    }
}
