public import ServiceLifecycle

/// What the hosted login does between requests: delivers the back-channel logouts that are due
/// (those that failed before, or that an instance stopped before sending). Run it beside the HTTP
/// server in the same `ServiceGroup`; it stops on graceful shutdown.
public struct LoginBackgroundWork: Service {
    /// The login whose logouts it delivers.
    public let login: LoginServer
    /// The pause between two rounds.
    public var interval: Duration

    /// Delivers `login`'s due logouts every `interval`.
    public init(login: LoginServer, interval: Duration = .seconds(10)) {
        self.login = login
        self.interval = interval
    }

    /// Delivers until graceful shutdown.
    public func run() async throws {
        let login = login
        let interval = interval
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await login.deliverPendingLogouts()
                try? await Task.sleep(for: interval)
            }
        }
    }
}
