import CoreMetrics
import Foundation
import GatehouseKernel
import Logging
import Synchronization

/// What the server counts and times, through swift-metrics: `serve` exports it in the
/// Prometheus format at `/metrics`; an app embedding the server bootstraps its own backend.
/// Labels take values from closed sets only (endpoint templates, flow kinds, error code names),
/// so no caller can grow the number of series.
struct ServerMetrics: Sendable {
    let factory: any MetricsFactory
    /// The process, database, outbox and channel figures a scrape reads.
    let runtime: RuntimeMetrics
    /// Each request series' counter and timer, made once: asking the factory for them on every
    /// request (it checks the name and finds the series under its lock) cost more than counting.
    /// The label values come from closed sets, so this stays small.
    private let requestSeries = RequestSeriesHandlers()

    private final class RequestSeriesHandlers: Sendable {
        let known = Mutex<[RequestSeries: (CoreMetrics.Counter, CoreMetrics.Timer)]>([:])
    }

    private struct RequestSeries: Hashable {
        var endpoint: String
        var method: String
        var status: Int
    }

    init(factory: any MetricsFactory) {
        self.factory = factory
        runtime = RuntimeMetrics(factory: factory)
        // The series alerts watch exist at 0 from the start, so the first event after a restart
        // is an increase too.
        for event in Self.securityEvents {
            Counter(
                label: "gatehouse_security_events_total",
                dimensions: [("event", event), ("flow", "none")],
                factory: factory
            ).increment(by: 0)
        }
    }

    static let securityEvents = [
        "authentication_failure", "lockout", "authenticator_lockout", "refresh_token_reuse",
        "authorization_code_replayed", "rate_limited", "client_authentication_failure",
    ]

    /// One answered request: counted by endpoint template, method and status, timed by endpoint.
    func request(endpoint: String, method: String, status: Int, duration: Duration) {
        let method = Self.knownMethods.contains(method) ? method : "other"
        let series = RequestSeries(endpoint: endpoint, method: method, status: status)
        let (counter, timer) = requestSeries.known.withLock { known in
            if let handlers = known[series] { return handlers }
            let handlers = (
                Counter(
                    label: "gatehouse_http_requests_total",
                    dimensions: [("endpoint", endpoint), ("method", method), ("status", String(status))],
                    factory: factory
                ),
                Timer(
                    label: "gatehouse_http_request_duration_seconds",
                    dimensions: [("endpoint", endpoint)],
                    factory: factory
                )
            )
            known[series] = handlers
            return handlers
        }
        counter.increment()
        timer.recordNanoseconds(duration.nanoseconds)
    }

    /// A flow step's result: `completed`, `continued` or `refused` (with the error's code name).
    func flowStep(kind: FlowKind?, outcome: String, error: String) {
        Counter(
            label: "gatehouse_flow_steps_total",
            dimensions: [("flow", kind?.rawValue ?? "unknown"), ("outcome", outcome), ("error", error)],
            factory: factory
        ).increment()
    }

    /// Something worth alerting on: a failed attempt, a lockout, a refresh token used twice.
    func event(_ name: String, kind: FlowKind? = nil) {
        Counter(
            label: "gatehouse_security_events_total",
            dimensions: [("event", name), ("flow", kind?.rawValue ?? "none")],
            factory: factory
        ).increment()
    }

    private static let knownMethods: Set<String> = [
        "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT",
    ]
}

extension Duration {
    var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }
    var milliseconds: Double { Double(nanoseconds) / 1_000_000 }
}
