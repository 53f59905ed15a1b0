import ArgumentParser

@main
struct Gatehouse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "Gatehouse token server, demo and device commands.",
        subcommands: [Serve.self, Demo.self, Register.self, Login.self, Profiles.self, Deregister.self, XignIn.self]
    )
}
