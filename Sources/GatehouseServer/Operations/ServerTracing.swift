import GatehouseKernel
import GatehouseProtocol
import Tracing

/// The token server's spans, through swift-distributed-tracing's tracer (`InstrumentationSystem`,
/// which `serve` bootstraps when the `OTEL_*` variables ask for traces, or one a task sets with
/// `withTracer`).
///
/// A request is a server span named by its endpoint's template (never its path, which carries
/// ids); inside it, the flow step's plugin run and each store transaction are spans of their own.
/// Attributes take values from closed sets (templates, methods, statuses, code names, store
/// methods) and the manifest's plugin ids: never an id from a path, a header, a body, a token, a
/// PIN or a proof.
///
/// Without a tracer a request costs one look-up of it: the request runs without a span, so no
/// span context is set, and every inner span is skipped after one read of a task-local.
enum ServerTracing {
    /// The tracer in effect, unless it is the no-op one.
    static var tracer: (any Tracer)? {
        let tracer = InstrumentationSystem.tracer
        return tracer is NoOpTracer ? nil : tracer
    }

    /// Runs `answer` in the server span of `request`, continuing the trace its `traceparent`
    /// names. `route` is the endpoint's template.
    static func request(
        _ request: WireRequest,
        route: String,
        _ answer: () async -> WireResponse
    ) async -> WireResponse {
        guard let tracer else { return await answer() }
        var context = ServiceContext.topLevel
        // Only the trace headers go to the tracer: a propagator that cannot read them may log its
        // carrier, which must not be the request's headers (they hold tokens and proofs).
        tracer.extract(TraceHeaders(request), into: &context, using: TraceHeaders.Extract())
        let method = HTTPMethods.known.contains(request.method) ? request.method : "_OTHER"
        return await withSpan(tracer, "\(method) \(route)", context: context, kind: .server) { span in
            span.attributes["http.request.method"] = method
            span.attributes["http.route"] = route
            let response = await answer()
            span.attributes["http.response.status_code"] = response.status
            // A server span is an error for the server's own failures only (5xx), not a refusal.
            if response.status >= 500 {
                span.attributes["error.type"] = String(response.status)
                span.setStatus(SpanStatus(code: .error))
            }
            return response
        }
    }

    /// Runs `body` in a span named `name`, the child of the span in effect; without one (no
    /// tracer, or outside a traced request) `body` runs alone and gets nil.
    static func span<T>(
        _ name: String,
        kind: SpanKind = .internal,
        _ body: ((any Span)?) async throws -> T
    ) async rethrows -> T {
        guard let context = ServiceContext.current, let tracer else { return try await body(nil) }
        return try await withSpan(tracer, name, context: context, kind: kind) { span in try await body(span) }
    }

    /// Runs `body` in a span that continues `context` (a request's, kept for work done after it
    /// answered), or starts a trace of its own without one; without a tracer, alone.
    static func span<T>(
        _ name: String,
        continuing context: ServiceContext?,
        _ body: ((any Span)?) async throws -> T
    ) async rethrows -> T {
        guard let tracer else { return try await body(nil) }
        return try await withSpan(tracer, name, context: context ?? .topLevel, kind: .internal) { span in
            try await body(span)
        }
    }

    /// Runs a store transaction (`db.write`) or snapshot (`db.read`) in a span naming the
    /// database system and, for the server's own stores, the store method that asked for it.
    static func database<T>(
        _ operation: String,
        _ dialect: SQLDialect,
        function: String?,
        _ body: () async throws -> T
    ) async rethrows -> T {
        try await span(operation, kind: .client) { span in
            if let span {
                span.attributes["db.system.name"] = dialect == .sqlite ? "sqlite" : "postgresql"
                // `startRegistration(_:proof:)` → `startRegistration`: the method, from a closed set.
                if let function { span.attributes["code.function.name"] = String(function.prefix { $0 != "(" }) }
            }
            return try await body()
        }
    }

    /// Runs a flow's plugin on its message in a `flow.step` span: the flow's kind, the stage,
    /// the plugin's id, and what it decided (with the error's code name when it refused).
    static func flowStep(
        kind: FlowKind,
        stage: FlowStage?,
        _ run: () async -> StageOutcome
    ) async -> StageOutcome {
        await span("flow.step") { span in
            guard let span else { return await run() }
            span.attributes["gatehouse.flow.kind"] = kind.rawValue
            switch stage {
            case .identity(let id):
                span.attributes["gatehouse.flow.stage"] = "identity"
                span.attributes["gatehouse.plugin.id"] = id
            case .enrol(let id):
                span.attributes["gatehouse.flow.stage"] = "enrol"
                span.attributes["gatehouse.plugin.id"] = id
            case .authenticate(let id):
                span.attributes["gatehouse.flow.stage"] = "authenticate"
                span.attributes["gatehouse.plugin.id"] = id
            case nil:
                span.attributes["gatehouse.flow.stage"] = "finished"
            }
            let outcome = await run()
            switch outcome {
            case .challenge: span.attributes["gatehouse.flow.step.outcome"] = "challenge"
            case .identified: span.attributes["gatehouse.flow.step.outcome"] = "identified"
            case .succeeded: span.attributes["gatehouse.flow.step.outcome"] = "succeeded"
            case .failed(let failure):
                span.attributes["gatehouse.flow.step.outcome"] = "failed"
                span.attributes["gatehouse.error.code"] = failure.error.codeName
                span.attributes["gatehouse.flow.step.counts_as_attempt"] = failure.countsAsAttempt
            }
            return outcome
        }
    }

    /// `withSpan` on the tracer `tracer` opens to.
    private static func withSpan<T>(
        _ tracer: some Tracer,
        _ name: String,
        context: ServiceContext,
        kind: SpanKind,
        _ body: (any Span) async throws -> T
    ) async rethrows -> T {
        try await tracer.withSpan(name, context: context, ofKind: kind) { span in try await body(span) }
    }
}

/// The methods a span names as they are; any other is `_OTHER` (OpenTelemetry's HTTP conventions),
/// so a client cannot invent span names.
enum HTTPMethods {
    static let known: Set<String> = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT"]
}

/// A request's W3C trace headers, and nothing else of it. A `traceparent` not of the W3C shape
/// (`00-<32 hex>-<16 hex>-<2 hex>`) is dropped here, so the request starts a trace of its own
/// without the tracer logging a warning for each such request a client sends.
struct TraceHeaders: Sendable {
    var traceparent: String?
    var tracestate: String?

    init(_ request: WireRequest) {
        guard let parent = request.header("traceparent"), Self.isWellFormed(parent) else { return }
        traceparent = parent
        // RFC-bounded: at most 32 entries of at most 256 characters; longer is dropped.
        tracestate = request.header("tracestate").flatMap { $0.utf8.count <= 512 ? $0 : nil }
    }

    static func isWellFormed(_ traceparent: String) -> Bool {
        let fields = traceparent.split(separator: "-", omittingEmptySubsequences: false)
        guard fields.count == 4 else { return false }
        return zip(fields, [2, 32, 16, 2]).allSatisfy { field, length in
            field.utf8.count == length && field.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
        }
    }

    struct Extract: Extractor {
        func extract(key: String, from carrier: TraceHeaders) -> String? {
            switch key.lowercased() {
            case "traceparent": carrier.traceparent
            case "tracestate": carrier.tracestate
            default: nil
            }
        }
    }
}
