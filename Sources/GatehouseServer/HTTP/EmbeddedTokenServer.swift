public import CoreMetrics
public import Foundation
public import GatehouseKernel
public import GatehouseProtocol
import Logging

/// The token server in-process: the same ``TokenServer`` an HTTP deployment runs, with its
/// SQLite state in a directory the caller names, reached without a socket. An app or a test runs
/// every flow with no separate service.
///
/// - Important: The PIN's protection against offline guessing needs a remote server: here the
///   OPRF keys and the failure counter sit in the app's own data, beside the sealed key, so a copy
///   of that data can be tried against every PIN. It logs a warning saying so when it starts.
public struct EmbeddedTokenServer: TokenServerTransport {
    /// The token server the requests go to; run its sweeps and read its state through it.
    public let server: TokenServer
    /// The in-process server's URL in DPoP proofs, unless `server.publicURL` names another.
    public static let defaultURL = "http://gatehouse.embedded"
    /// The server's public URL, which DPoP proofs name: ``defaultURL`` unless `server.publicURL`
    /// in the manifest names another.
    public var baseURL: String { server.publicURL }

    /// A server for `manifest`, keeping its state in `directory` (created if missing).
    public init(
        directory: URL,
        manifest: Manifest,
        registry: PluginRegistry,
        environment: PluginEnvironment = PluginEnvironment(),
        extensions: [any ServerExtension] = [],
        pushTransports: [PushPlatform: any PushTransport] = [:],
        metrics: (any MetricsFactory)? = nil
    ) throws {
        try PrivateFiles.createFolder(directory)
        server = try TokenServer(
            manifest: manifest,
            registry: registry,
            databasePath: directory.appendingPathComponent("server.sqlite").path,
            environment: environment,
            extensions: extensions,
            pushTransports: pushTransports,
            metrics: metrics
        )
        Self.warnOfKeysInAppData(environment.logger)
    }

    /// A server for `manifest` on `storage`, the database its extensions' stores share (opened
    /// with their migration groups; the caller shuts it down after the server).
    public init(
        storage: ServerStorage,
        manifest: Manifest,
        registry: PluginRegistry,
        environment: PluginEnvironment = PluginEnvironment(),
        extensions: [any ServerExtension] = [],
        pushTransports: [PushPlatform: any PushTransport] = [:],
        metrics: (any MetricsFactory)? = nil
    ) async throws {
        server = try await TokenServer(
            manifest: manifest,
            registry: registry,
            storage: storage,
            environment: environment,
            extensions: extensions,
            pushTransports: pushTransports,
            metrics: metrics
        )
        Self.warnOfKeysInAppData(environment.logger)
    }

    /// The PIN's protection against offline guessing rests on keys the attacker cannot read; an
    /// embedded server keeps them in the app's own data.
    private static func warnOfKeysInAppData(_ logger: Logger) {
        logger.warning(
            """
            The embedded token server keeps its OPRF keys in the app's own data: whoever copies that data can \
            guess PINs offline. Use a remote token server where that matters.
            """
        )
    }

    /// An in-process transport to `server`, made elsewhere: for instance one on PostgreSQL, for
    /// tests that run every flow against it without a socket.
    public init(server: TokenServer) { self.server = server }

    /// Handles `request` in a task of its own, as a server would: cancelling the caller's task
    /// never stops a request half-way through its transactions.
    public func send(_ request: WireRequest) async throws -> WireResponse {
        let server = server
        return await Task { await server.handle(request) }.value
    }
}
