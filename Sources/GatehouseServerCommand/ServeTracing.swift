import Foundation
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// `serve`'s traces: OpenTelemetry spans exported over OTLP/HTTP (swift-otel), configured by the
/// standard `OTEL_*` variables and off unless they ask for them, so no exporter keeps trying a
/// collector nobody runs.
///
/// Tracing is on when `OTEL_TRACES_EXPORTER` is `otlp`, or when it is unset and
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` names a collector;
/// `OTEL_TRACES_EXPORTER=none` and `OTEL_SDK_DISABLED=true` turn it off. swift-otel reads the
/// rest itself: the endpoint, `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the default),
/// headers, `OTEL_SERVICE_NAME` (default `gatehouse`), `OTEL_RESOURCE_ATTRIBUTES`,
/// `OTEL_TRACES_SAMPLER` and its argument, and the batch processor's `OTEL_BSP_*`. What it would
/// only warn about and then ignore (a sampler it does not know, an argument that is no ratio, an
/// endpoint that is no URL) is refused here, so a start says what is wrong instead.
enum ServeTracing {
    /// Whether `environment` asks for traces; throws a ``SettingError`` for what this build
    /// cannot do (another exporter, OTLP over gRPC), which would otherwise stop the process later.
    static func requested(_ environment: [String: String]) throws -> Bool {
        func value(_ name: String) -> String? {
            guard let value = environment[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else {
                return nil
            }
            return value
        }
        if value("OTEL_SDK_DISABLED")?.lowercased() == "true" { return false }
        let on: Bool
        switch value("OTEL_TRACES_EXPORTER")?.lowercased() {
        case "none": return false
        case "otlp": on = true
        case nil:
            on = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != nil || value("OTEL_EXPORTER_OTLP_ENDPOINT") != nil
        case let other?:
            throw SettingError("OTEL_TRACES_EXPORTER must be otlp or none, not \"\(other)\"")
        }
        guard on else { return false }
        let protocolName =
            "OTEL_EXPORTER_OTLP_" + (value("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") == nil ? "" : "TRACES_")
            + "PROTOCOL"
        switch value(protocolName)?.lowercased() {
        case nil, "http/protobuf": break
        case "grpc":
            throw SettingError(
                "\(protocolName)=grpc: gatehouse exports traces over OTLP/HTTP only; "
                    + "use http/protobuf and the collector's HTTP port (4318)"
            )
        case "http/json":
            // swift-otel's JSON writes trace and span ids in base64, where OTLP/JSON has hex: a
            // collector would misread or refuse every span.
            throw SettingError(
                "\(protocolName)=http/json: this build's JSON export writes trace ids a collector misreads; "
                    + "use http/protobuf (the default)"
            )
        case let other?:
            throw SettingError("\(protocolName) must be http/protobuf, not \"\(other)\"")
        }
        for name in ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"] {
            guard let endpoint = value(name) else { continue }
            guard let url = URLComponents(string: endpoint), ["http", "https"].contains(url.scheme?.lowercased()),
                url.host?.isEmpty == false
            else {
                throw SettingError(
                    "\(name) must be an http:// or https:// URL of the collector, not \"\(endpoint.prefix(64))\""
                )
            }
        }
        let samplers = [
            "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off",
            "parentbased_traceidratio",
        ]
        if let sampler = value("OTEL_TRACES_SAMPLER"), !samplers.contains(sampler.lowercased()) {
            throw SettingError(
                "OTEL_TRACES_SAMPLER must be one of \(samplers.joined(separator: ", ")), not \"\(sampler.prefix(64))\""
            )
        }
        if let argument = value("OTEL_TRACES_SAMPLER_ARG"), !(Double(argument).map { (0...1).contains($0) } ?? false) {
            throw SettingError(
                "OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1 (0.1: a tenth of the traces), not \"\(argument.prefix(64))\""
            )
        }
        return true
    }

    /// Installs the OTLP tracer process-wide when the environment asks for traces, and returns the
    /// service that exports its spans (run it first in the service group, so it stops last and
    /// sends what the others' shutdown traced); nil when tracing is off.
    static func bootstrap(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        version: String,
        logger: Logger
    ) throws -> (any Service)? {
        guard try requested(environment) else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "gatehouse"
        configuration.resourceAttributes["service.version"] = version
        configuration.traces.exporter = .otlp
        // Its own lines go to serve's log at warning and above (OTEL_LOG_LEVEL lowers that), with
        // the values of the variables it read left out: OTEL_EXPORTER_OTLP_HEADERS may hold a
        // collector's credentials.
        var diagnostics = logger
        diagnostics.handler = WithoutVariableValues(wrapped: logger.handler)
        configuration.diagnosticLogger = .custom(diagnostics)
        configuration.diagnosticLogLevel = .warning
        let service: any Service
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            InstrumentationSystem.bootstrap(backend.factory)
            service = backend.service
        } catch {
            throw SettingError("traces cannot be exported as the OTEL_* variables say: \(error)")
        }
        logger.info(
            "Tracing",
            metadata: [
                "exporter": "otlp",
                "endpoint": "\(endpointShown(environment))",
                "service": "\(environment["OTEL_SERVICE_NAME"] ?? configuration.serviceName)",
            ]
        )
        return service
    }

    /// Where spans go, for the log: scheme, host, port and path, never credentials in the URL.
    private static func endpointShown(_ environment: [String: String]) -> String {
        if let traces = environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], !traces.isEmpty {
            return withoutCredentials(traces)
        }
        if let shared = environment["OTEL_EXPORTER_OTLP_ENDPOINT"], !shared.isEmpty {
            return withoutCredentials(shared) + (shared.hasSuffix("/") ? "" : "/") + "v1/traces"
        }
        return "http://localhost:4318/v1/traces"
    }

    private static func withoutCredentials(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "(not a URL)" }
        components.user = nil
        components.password = nil
        components.query = nil
        return components.string ?? "(not a URL)"
    }
}

/// A log handler that passes everything on to `wrapped` except the values swift-otel logs of the
/// environment variables it read.
private struct WithoutVariableValues: LogHandler {
    var wrapped: any LogHandler
    private static let hidden: Set<String> = ["environment_value", "previous_value", "new_value"]

    var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = Self.redacted(newValue) }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = Self.hidden.contains(key) && newValue != nil ? "(hidden)" : newValue }
    }

    func log(event: LogEvent) {
        var event = event
        event.metadata = event.metadata.map(Self.redacted)
        wrapped.log(event: event)
    }

    private static func redacted(_ metadata: Logger.Metadata) -> Logger.Metadata {
        var metadata = metadata
        for key in hidden where metadata[key] != nil { metadata[key] = "(hidden)" }
        return metadata
    }
}
