// A resource gateway: an integrator's own small API, protected by Gatehouse tokens.
//
//   GATEHOUSE_GATEWAY_SECRET=… resource-gateway --token-server http://127.0.0.1:8080
//
// It checks each request's DPoP-bound token by introspection at the token server (as the
// resource server `gateway` of Examples/manifests/server.yaml) and hands the route who it acts
// for. Try it with `gatehouse fetch http://127.0.0.1:8090/greeting --access implicit`.
import ArgumentParser
import Foundation
import GatehouseProtocol
import GatehouseResourceServer
import Hummingbird
import Logging

@main
struct ResourceGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resource-gateway",
        abstract: "An example API that accepts Gatehouse user, implicit and device tokens."
    )

    @Option(help: "The token server's URL (default: $GATEHOUSE_SERVER, else http://127.0.0.1:8080).")
    var tokenServer: String?

    @Option(help: "The port to listen on, on 127.0.0.1.")
    var port: Int = 8090

    @Option(help: "The URL clients reach this API at (default: http://127.0.0.1:<port>).")
    var publicURL: String?

    @Option(help: "This API's id among the token server's resourceServers.")
    var resourceServer: String = "gateway"

    @Option(help: "Seconds an introspection answer is reused: the longest a revoked token still passes (0–60).")
    var cacheLifetime: Double = 5

    func run() async throws {
        let tokenServer =
            tokenServer ?? ProcessInfo.processInfo.environment["GATEHOUSE_SERVER"] ?? "http://127.0.0.1:8080"
        guard let tokenServerURL = URL(string: tokenServer), (1...65535).contains(port) else {
            throw ValidationError("--token-server must be a URL and --port 1–65535.")
        }
        // The secret comes from the environment, never the command line (process lists show it).
        let secret =
            ProcessInfo.processInfo.environment["GATEHOUSE_GATEWAY_SECRET"] ?? "example-gateway-secret-change-me"
        let validator = AccessValidator(
            introspector: try HTTPIntrospection(
                tokenServer: tokenServerURL,
                resourceServerID: resourceServer,
                secret: secret,
                cacheLifetime: cacheLifetime
            ),
            publicURL: publicURL ?? "http://127.0.0.1:\(port)"
        )
        var logger = Logger(label: "resource-gateway")
        logger.logLevel = .notice
        let port = port
        let application = Application(
            router: Self.router(validator),
            configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "resource-gateway"),
            onServerRunning: { _ in
                FileHandle.standardOutput.write(Data("Resource gateway listening on http://127.0.0.1:\(port)\n".utf8))
            },
            logger: logger
        )
        try await application.runService()
    }

    /// The API: what each route asks of the token, and what it answers.
    static func router(_ validator: AccessValidator<some TokenIntrospecting>) -> Router<GatehouseAccessContext> {
        let router = Router(context: GatehouseAccessContext.self)
        // Anonymous: no token at all.
        router.get("status") { _, _ in ["status": "ok"] }
        // A user's session or an implicit token: non-sensitive data.
        router.group("greeting")
            .add(
                middleware: GatehouseAccessMiddleware(
                    validator,
                    requirement: .init(scopes: ["read"], kinds: [.user, .implicit])
                )
            )
            .get { _, context in ["greeting": "Hello, \(context.access?.subject ?? "stranger")!"] }
        // A user's session only.
        router.group("account")
            .add(middleware: GatehouseAccessMiddleware(validator, requirement: .init(scopes: ["read"], kinds: [.user])))
            .get { _, context in
                [
                    "subject": context.access?.subject ?? "",
                    "identityProvider": context.access?.identityProvider ?? "",
                    "scope": context.access?.scopes.sorted().joined(separator: " ") ?? "",
                ]
            }
        router.group("notes")
            .add(
                middleware: GatehouseAccessMiddleware(validator, requirement: .init(scopes: ["write"], kinds: [.user]))
            )
            .post { _, context in ["saved": "a note for \(context.access?.subject ?? "")"] }
        // The installation's device token: no user.
        router.group("catalogue")
            .add(
                middleware: GatehouseAccessMiddleware(
                    validator,
                    requirement: .init(scopes: ["catalogue"], kinds: [.device])
                )
            )
            .get { _, context in ["items": "tea, coffee, cake", "client": context.access?.clientID ?? ""] }
        return router
    }
}
