import Foundation
import GatehouseTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("gatehouse serve's traces over OTLP/HTTP and its process, database and outbox metrics", .serialized)
struct ObservabilityTests {
    @Test(
        "a PIN login and a push answered with the PIN are traced: request, flow step, store and callback spans, linked, with no secret"
    )
    func tracedLoginAndPush() async throws {
        let directory = try scratchDirectory("gatehouse-tracing")
        defer { try? FileManager.default.removeItem(at: directory) }
        let collector = try await OTLPReceiver()
        defer { collector.stop() }
        let (server, url) = try await startTracedServer(in: directory, collector: collector)
        defer { server.process.terminate() }

        // A caller's trace goes on in the server.
        let callerTrace = "0af7651916cd43dd8448eb211c80319c"
        let callerSpan = "b7ad6b7169203331"
        var health = URLRequest(url: try #require(URL(string: url + "/health")))
        health.setValue("00-\(callerTrace)-\(callerSpan)-01", forHTTPHeaderField: "traceparent")
        _ = try await URLSession.shared.data(for: health)

        // Registration, then a PIN login (which calls the protected resource and logs out).
        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]
        let registered = try await registerOverCommandLine(device)
        let login = try Session(["login"] + device)
        _ = try await login.waitFor("PIN (3 attempts left): ")
        login.type("258147")
        #expect(try await login.finish() == 0, "\(login.errors.withLock { $0 })")

        // A push answered with the PIN, whose end the portal hears of by a callback.
        let enrol = try Session(["device", "enrol"] + device)
        enrol.type("258147")
        #expect(try await enrol.finish() == 0, "\(enrol.errors.withLock { $0 })")
        let listen = try Session(["device", "listen", "--count", "1"] + device)
        defer { if listen.process.isRunning { listen.process.terminate() } }
        _ = try await listen.waitFor("Listening for requests")
        let started = try await portalPush(
            url,
            type: "payment",
            callback: "http://127.0.0.1:\(collector.port)/portal/callback"
        )
        #expect(started == 201)
        _ = try await listen.waitFor("PIN (")
        listen.type("258147")
        #expect(try await listen.finish() == 0, "\(listen.errors.withLock { $0 })")

        let callback = try await collector.waitForCallback()
        let spans = try await collector.waitForSpans { spans in
            spans.contains { $0.name == "mobile_auth.callback" } && spans.contains { $0.name == "GET /health" }
                && spans.contains { $0.attributes["gatehouse.flow.kind"] == .string("authentication") }
        }

        // The caller's trace, continued.
        let probe = try #require(spans.first { $0.name == "GET /health" })
        #expect(probe.trace == callerTrace && probe.parent == callerSpan && probe.kind == 2)
        #expect(probe.attributes["http.route"] == .string("/health"))
        #expect(probe.attributes["http.response.status_code"] == .int(200))
        #expect(probe.resource["service.name"] == .string("gatehouse"))
        #expect(probe.resource["service.version"] != nil)

        // The PIN login: its flow step and store transactions are children of its request's span.
        let pinStep = try #require(
            spans.first {
                $0.name == "flow.step" && $0.attributes["gatehouse.flow.kind"] == .string("authentication")
                    && $0.attributes["gatehouse.flow.step.outcome"] == .string("succeeded")
            }
        )
        #expect(pinStep.attributes["gatehouse.flow.stage"] == .string("authenticate"))
        #expect(pinStep.attributes["gatehouse.plugin.id"] == .string("pin"))
        let pinRequest = try #require(spans.first { $0.id == pinStep.parent }, "the flow step has no parent span")
        #expect(pinRequest.trace == pinStep.trace && pinRequest.kind == 2 && pinRequest.parent.isEmpty)
        #expect(pinRequest.name == "POST /v1/flows/{flowID}")
        #expect(pinRequest.attributes["http.request.method"] == .string("POST"))
        #expect(pinRequest.attributes["http.route"] == .string("/v1/flows/{flowID}"))
        #expect(pinRequest.attributes["http.response.status_code"] == .int(200))
        let stores = spans.filter { $0.parent == pinRequest.id && $0.name.hasPrefix("db.") }
        #expect(stores.contains { $0.name == "db.write" } && stores.contains { $0.name == "db.read" }, "\(stores)")
        for store in stores {
            #expect(store.trace == pinRequest.trace && store.kind == 3)
            #expect(store.attributes["db.system.name"] == .string("sqlite"))
            #expect(store.attributes["code.function.name"] != nil)
        }
        // The other requests of the login are spans of their own, named by their templates.
        for route in [
            "/v1/registration", "/v1/authentication", "/v1/resource/profile",
            "/v1/mobile-auth/transactions/{transactionID}/answer", "/v1/portal/mobile-auth",
        ] {
            #expect(spans.contains { $0.attributes["http.route"] == .string(route) }, "no span for \(route)")
        }

        // The push: the callback is the child of the request whose PIN ended the transaction,
        // and the callback's own HTTP call carried its span's traceparent.
        let pushStep = try #require(
            spans.first {
                $0.name == "flow.step" && $0.attributes["gatehouse.flow.kind"] == .string("mobileAuthentication")
                    && $0.attributes["gatehouse.flow.step.outcome"] == .string("succeeded")
            }
        )
        let answer = try #require(spans.first { $0.id == pushStep.parent })
        let callbackSpan = try #require(spans.first { $0.name == "mobile_auth.callback" })
        #expect(callbackSpan.parent == answer.id && callbackSpan.trace == answer.trace)
        #expect(callbackSpan.attributes["gatehouse.mobile_auth.status"] == .string("approved"))
        let call = try #require(spans.first { $0.parent == callbackSpan.id && $0.kind == 3 && $0.name == "POST" })
        #expect(call.trace == answer.trace)
        #expect(call.attributes["server.address"] == .string("127.0.0.1"))
        #expect(call.attributes["http.response.status_code"] == .int(200))
        #expect(callback.traceparent == "00-\(call.trace)-\(call.id)-01")
        #expect(spans.contains { $0.parent == callbackSpan.id && $0.name == "db.write" })

        // No secret anywhere: attributes from a known set, none holding the PIN, the registration
        // code, a token, a flow or transaction id, a proof (JWS) or the portal's secret.
        let allowed: Set<String> = [
            "http.request.method", "http.route", "http.response.status_code", "error.type", "db.system.name",
            "code.function.name", "gatehouse.flow.kind", "gatehouse.flow.stage", "gatehouse.plugin.id",
            "gatehouse.flow.step.outcome", "gatehouse.error.code", "gatehouse.flow.step.counts_as_attempt",
            "gatehouse.mobile_auth.callback.attempt", "gatehouse.mobile_auth.status", "url.scheme", "server.address",
            "server.port",
        ]
        for span in spans {
            #expect(Set(span.attributes.keys).isSubset(of: allowed), "\(span.name): \(span.attributes.keys.sorted())")
            for text in [span.name] + span.attributes.values.map(\.text) {
                #expect(text.range(of: #"[0-9]{6}"#, options: .regularExpression) == nil, "\(span.name): \(text)")
                #expect(text.range(of: #"[A-Za-z0-9_-]{24,}"#, options: .regularExpression) == nil, "\(text)")
                #expect(!text.contains("eyJ") && !text.contains("example-portal-secret"), "\(span.name): \(text)")
            }
        }
        #expect(!registered.isEmpty)
    }

    @Test("spans still queued are exported when serve stops; with OTEL_TRACES_EXPORTER=none nothing is sent")
    func flushedAtShutdownAndOffWhenNone() async throws {
        let directory = try scratchDirectory("gatehouse-tracing-stop")
        defer { try? FileManager.default.removeItem(at: directory) }
        let collector = try await OTLPReceiver()
        defer { collector.stop() }

        // A batch delay of a minute: only the shutdown sends the span.
        let (server, url) = try await startTracedServer(
            in: directory,
            collector: collector,
            environment: ["OTEL_BSP_SCHEDULE_DELAY": "60000"]
        )
        #expect(try await URLSession.shared.data(from: try #require(URL(string: url + "/ready"))).1 is HTTPURLResponse)
        server.process.terminate()
        #expect(try await server.finish() == 0, "\(server.errors.withLock { $0 })")
        let spans = try await collector.waitForSpans { $0.contains { $0.name == "GET /ready" } }
        #expect(spans.contains { $0.attributes["http.route"] == .string("/ready") })

        // The same endpoint with the exporter set to none: serve runs, and sends nothing.
        let before = collector.received
        let quiet = directory.appendingPathComponent("quiet")
        try FileManager.default.createDirectory(at: quiet, withIntermediateDirectories: true)
        let (off, offURL) = try await startTracedServer(
            in: quiet,
            collector: collector,
            environment: ["OTEL_TRACES_EXPORTER": "none", "OTEL_BSP_SCHEDULE_DELAY": "50"]
        )
        _ = try await URLSession.shared.data(from: try #require(URL(string: offURL + "/ready")))
        off.process.terminate()
        #expect(try await off.finish() == 0)
        try await Task.sleep(for: .milliseconds(500))
        #expect(collector.received == before)
        #expect(!off.errors.withLock { $0 }.contains("Tracing"))
    }

    @Test(
        """
        OTLP over gRPC or JSON, another exporter, an endpoint that is no URL, an unknown sampler or a ratio that \
        is none are refused at start in one line naming the variable (status 64, as any bad setting)
        """,
        arguments: [
            (
                ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"],
                "error: OTEL_EXPORTER_OTLP_PROTOCOL=grpc: gatehouse exports traces over OTLP/HTTP only"
            ),
            (["OTEL_TRACES_EXPORTER": "zipkin"], "error: OTEL_TRACES_EXPORTER must be otlp or none, not \"zipkin\""),
            (
                ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"],
                "error: OTEL_EXPORTER_OTLP_PROTOCOL=http/json: this build's JSON export writes trace ids"
            ),
            (
                ["OTEL_EXPORTER_OTLP_ENDPOINT": "not-a-url"],
                "error: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL of the collector"
            ),
            (
                ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER": "sometimes"],
                "error: OTEL_TRACES_SAMPLER must be one of always_on,"
            ),
            (
                [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                    "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "10%",
                ],
                "error: OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1"
            ),
        ] as [([String: String], String)]
    )
    func refusedExporter(environment: [String: String], message: String) async throws {
        let directory = try scratchDirectory("gatehouse-tracing-refused")
        defer { try? FileManager.default.removeItem(at: directory) }
        let serve = try Session(
            ["serve", "--database", directory.appendingPathComponent("server.sqlite").path, "--port", "0"],
            environment: environment
        )
        #expect(try await serve.finish() == 64)
        let errors = serve.errors.withLock { $0 }
        #expect(errors.hasPrefix(message), "\(errors)")
        #expect(errors.split(separator: "\n").count == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test("/metrics has the process, the build, the database, the outbox and the open events channels")
    func runtimeMetrics() async throws {
        let directory = try scratchDirectory("gatehouse-runtime-metrics")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, url) = try await startServer(in: directory)
        defer { server.process.terminate() }
        let device = ["--server", url, "--data-dir", directory.appendingPathComponent("device").path]
        try await registerOverCommandLine(device)
        let enrol = try Session(["device", "enrol"] + device)
        enrol.type("258147")
        #expect(try await enrol.finish() == 0, "\(enrol.errors.withLock { $0 })")
        let listen = try Session(["device", "listen"] + device)
        defer { listen.process.terminate() }
        _ = try await listen.waitFor("Listening for requests")
        // A callback to an address where nobody listens stays in the outbox, tried again later.
        let closed = try await closedLoopbackPort()
        #expect(try await portalPush(url, type: "login", callback: "http://127.0.0.1:\(closed)/callback") == 201)
        _ = try await listen.waitFor("Type the number")
        listen.type("r")
        _ = try await listen.waitFor("Denied.")

        // A sample is taken at most once a second: the next scrape sees the channel and the outbox.
        try await Task.sleep(for: .milliseconds(1100))
        let (status, text) = try await scrape(url + "/metrics")
        #expect(status == 200)
        let values = prometheusValues(text)
        let cpu = try #require(values["process_cpu_seconds_total"], "\(text)")
        #expect(cpu > 0 && cpu < 3600)
        #expect((values["process_resident_memory_bytes"] ?? 0) > 1_000_000)
        #expect((values["process_virtual_memory_bytes"] ?? 0) > (values["process_resident_memory_bytes"] ?? 0))
        #expect((values["process_open_fds"] ?? 0) > 3)
        #expect((values["process_max_fds"] ?? 0) >= (values["process_open_fds"] ?? .infinity))
        let started = try #require(values["process_start_time_seconds"])
        #expect(abs(Date().timeIntervalSince1970 - started) < 600, "started \(started)")
        #expect(text.contains(#"gatehouse_build_info{version=""#), "\(text)")
        #expect(values.first { $0.key.hasPrefix("gatehouse_build_info{") }?.value == 1)
        #expect(values["gatehouse_event_channels_open"] == 1)
        #expect(values["gatehouse_callback_outbox_waiting"] == 1)
        #expect(values["gatehouse_db_sqlite_pending_writes"] == 0)
        #expect((values["gatehouse_db_sqlite_group_commits_total"] ?? 0) > 0)
        // The counters only grow between scrapes.
        try await Task.sleep(for: .milliseconds(1100))
        let later = prometheusValues(try await scrape(url + "/metrics").body)
        #expect((later["process_cpu_seconds_total"] ?? 0) >= cpu)
        #expect(
            (later["gatehouse_db_sqlite_group_commits_total"] ?? 0)
                >= (values["gatehouse_db_sqlite_group_commits_total"] ?? .infinity)
        )
        listen.process.terminate()
    }
}

// MARK: - Helpers

/// `gatehouse serve` exporting its spans to `collector` every 100 ms (unless `environment` says
/// otherwise).
private func startTracedServer(
    in directory: URL,
    collector: OTLPReceiver,
    environment: [String: String] = [:]
) async throws -> (Session, String) {
    let server = try Session(
        ["serve", "--database", directory.appendingPathComponent("server.sqlite").path, "--port", "0"],
        environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        ].merging(environment) { $1 }
    )
    _ = try await server.waitFor("listening on http://")
    let announced = server.output.withLock { $0 }
    guard let start = announced.range(of: "http://") else {
        server.process.terminate()
        throw CocoaError(.fileReadUnknown, userInfo: [NSDebugDescriptionErrorKey: "no URL in \(announced)"])
    }
    return (server, String(announced[start.lowerBound...].prefix { !$0.isWhitespace }))
}

/// Starts a mobile authentication as the example manifest's portal does, with a callback.
private func portalPush(_ url: String, type: String, callback: String) async throws -> Int {
    var request = URLRequest(url: try #require(URL(string: url + "/v1/portal/mobile-auth")))
    request.httpMethod = "POST"
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    let credentials = Data("portal:example-portal-secret-change-me".utf8).base64EncodedString()
    request.setValue("Basic \(credentials)", forHTTPHeaderField: "Authorization")
    var body = ["user_id": "ann@example.com", "type": type, "callback_uri": callback]
    // A payment signs what it approves.
    if type == "payment" { body["signing_data"] = "pay 12.00 EUR order 1234" }
    request.httpBody = try JSONSerialization.data(withJSONObject: body)
    let (data, response) = try await URLSession.shared.data(for: request)
    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
    if status != 201 { Issue.record("the portal's start: \(String(decoding: data, as: UTF8.self))") }
    return status
}

private func scrape(_ url: String) async throws -> (status: Int, body: String) {
    let (data, response) = try await URLSession.shared.data(from: try #require(URL(string: url)))
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
}

/// Every sample line of a Prometheus text exposition: the series (name and labels) and its value.
private func prometheusValues(_ text: String) -> [String: Double] {
    var values: [String: Double] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
            continue
        }
        values[String(line[..<space])] = value
    }
    return values
}

/// A loopback port nobody listens on (bound, then closed again).
private func closedLoopbackPort() async throws -> Int {
    let probe = try await ChildProcess.run(
        URL(fileURLWithPath: "/usr/bin/python3"),
        arguments: ["-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"]
    )
    guard let port = Int(probe.outputText.trimmingCharacters(in: .whitespacesAndNewlines)) else {
        throw CocoaError(.fileReadUnknown, userInfo: [NSDebugDescriptionErrorKey: "no port"])
    }
    return port
}

/// An attribute's value as the collector decoded it.
enum AttributeValue: Equatable, Sendable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case other(String)

    /// From the collector's `{"s": …}`, `{"i": …}`, `{"b": …}` or `{"o": …}`.
    init(_ json: Any) {
        let typed = json as? [String: Any] ?? [:]
        if let text = typed["s"] as? String {
            self = .string(text)
        } else if let number = typed["i"] as? Int {
            self = .int(number)
        } else if let flag = typed["b"] as? Bool {
            self = .bool(flag)
        } else {
            self = .other("\(typed["o"] ?? json)")
        }
    }

    var text: String {
        switch self {
        case .string(let text), .other(let text): text
        case .int(let number): String(number)
        case .bool(let flag): String(flag)
        }
    }
}

/// One span as the collector received it; ids in lowercase hex, `parent` empty for a root.
struct ReceivedSpan: Sendable, CustomStringConvertible {
    var name: String
    var trace: String
    var id: String
    var parent: String
    /// OTLP's span kind: 1 internal, 2 server, 3 client.
    var kind: Int
    var attributes: [String: AttributeValue]
    var resource: [String: AttributeValue]

    var description: String { "\(name) \(id)←\(parent)" }
}

/// What the collector saw of a callback: the W3C trace header it carried.
struct ReceivedCallback: Sendable {
    var path: String
    var traceparent: String?
}

/// A collector on a loopback port: a small OTLP/HTTP receiver in Python (opentelemetry-proto,
/// protobuf) that decodes each `ExportTraceServiceRequest` into one JSON line per span, and
/// records any other POST (a portal's callback) with its trace header.
final class OTLPReceiver {
    private let session: Session
    let port: Int

    init() async throws {
        // The python3 on PATH, where scripts/install-dependencies installs opentelemetry-proto.
        session = try Session(["python3", "-c", Self.script], binary: "/usr/bin/env")
        let said: String
        do {
            said = try await session.waitFor("listening ")
        } catch {
            session.process.terminate()
            throw CocoaError(
                .fileReadUnknown,
                userInfo: [
                    NSDebugDescriptionErrorKey:
                        "the OTLP receiver did not start (python3 needs opentelemetry-proto: run "
                        + "scripts/install-dependencies): \(session.errors.withLock { $0 })"
                ]
            )
        }
        guard
            let line = said.split(separator: "\n").first(where: { $0.hasPrefix("listening ") }),
            let port = Int(line.dropFirst("listening ".count))
        else {
            session.process.terminate()
            throw CocoaError(
                .fileReadUnknown,
                userInfo: [NSDebugDescriptionErrorKey: "the receiver did not start: \(said)"]
            )
        }
        self.port = port
    }

    func stop() { session.process.terminate() }

    /// Lines received so far (spans and callbacks).
    var received: Int { lines.count }

    private var lines: [[String: Any]] {
        session.output.withLock { $0 }.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    var spans: [ReceivedSpan] {
        lines.compactMap { line in
            guard let name = line["span"] as? String else { return nil }
            return ReceivedSpan(
                name: name,
                trace: line["trace"] as? String ?? "",
                id: line["id"] as? String ?? "",
                parent: line["parent"] as? String ?? "",
                kind: line["kind"] as? Int ?? 0,
                attributes: (line["attributes"] as? [String: Any] ?? [:]).mapValues(AttributeValue.init),
                resource: (line["resource"] as? [String: Any] ?? [:]).mapValues(AttributeValue.init)
            )
        }
    }

    /// Waits (at most 20 s) until the spans received satisfy `done`, and returns them.
    func waitForSpans(_ done: ([ReceivedSpan]) -> Bool) async throws -> [ReceivedSpan] {
        for _ in 0..<200 {
            let spans = spans
            if done(spans) { return spans }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CocoaError(
            .fileReadUnknown,
            userInfo: [NSDebugDescriptionErrorKey: "the spans never came: \(spans) \(session.errors.withLock { $0 })"]
        )
    }

    /// Waits (at most 20 s) for the first callback.
    func waitForCallback() async throws -> ReceivedCallback {
        for _ in 0..<200 {
            if let line = lines.first(where: { $0["callback"] != nil }) {
                return ReceivedCallback(
                    path: line["callback"] as? String ?? "",
                    traceparent: line["traceparent"] as? String
                )
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CocoaError(.fileReadUnknown, userInfo: [NSDebugDescriptionErrorKey: "no callback came"])
    }

    static let script = """
        import json, os, sys, threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        def value(v):
            kind = v.WhichOneof("value")
            if kind == "string_value":
                return {"s": v.string_value}
            if kind == "int_value":
                return {"i": v.int_value}
            if kind == "bool_value":
                return {"b": v.bool_value}
            return {"o": str(v).strip()}

        def attributes(pairs):
            return {kv.key: value(kv.value) for kv in pairs}

        lock = threading.Lock()

        def say(line):
            with lock:
                print(json.dumps(line), flush=True)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/v1/traces":
                    if not self.headers.get("Content-Type", "").startswith("application/x-protobuf"):
                        self.answer(415, b"", "text/plain")
                        return
                    request = trace_service_pb2.ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    for resource_spans in request.resource_spans:
                        resource = attributes(resource_spans.resource.attributes)
                        for scope_spans in resource_spans.scope_spans:
                            for span in scope_spans.spans:
                                say({"span": span.name, "trace": span.trace_id.hex(), "id": span.span_id.hex(),
                                     "parent": span.parent_span_id.hex(), "kind": span.kind,
                                     "status": span.status.code, "attributes": attributes(span.attributes),
                                     "resource": resource})
                    reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                    self.answer(200, reply, "application/x-protobuf")
                else:
                    say({"callback": self.path, "traceparent": self.headers.get("traceparent")})
                    self.answer(200, b"", "text/plain")

            def answer(self, status, body, content_type):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Gone with the test: its standard input closes when the test process ends.
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
        print("listening", server.server_address[1], flush=True)
        server.serve_forever()
        """
}
