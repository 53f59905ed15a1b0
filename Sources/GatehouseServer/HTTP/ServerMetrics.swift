import CoreMetrics
import Foundation
import GatehouseKernel
import Logging

/// What the server counts and times, through swift-metrics: `serve` exports it in the
/// Prometheus format at `/metrics`; an app embedding the server bootstraps its own backend.
/// Labels take values from closed sets only (endpoint templates, flow kinds, error code names),
/// so no caller can grow the number of series.
struct ServerMetrics: Sendable {
    let factory: any MetricsFactory
    /// The process, database, outbox and channel figures a scrape reads.
    let runtime: RuntimeMetrics

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
        Counter(
            label: "gatehouse_http_requests_total",
            dimensions: [("endpoint", endpoint), ("method", method), ("status", String(status))],
            factory: factory
        ).increment()
        Timer(
            label: "gatehouse_http_request_duration_seconds",
            dimensions: [("endpoint", endpoint)],
            factory: factory
        ).recordNanoseconds(duration.nanoseconds)
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
