import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import InMemoryTracing
import MetricsTestKit
import Testing
import Tracing

@testable import GatehouseServer

@Suite("Traces and runtime metrics of the token server, in-process")
struct TracingTests {
    @Test("a registration, a PIN login, a refresh and a push: spans linked as they ran, no secret in any of them")
    func spansWithoutSecrets() async throws {
        let tracer = InMemoryTracer()
        var secrets: Set<String> = ["258147", "4821", Fixture.portalSecret]
        try await withTracer(tracer) {
            try await withFixture(.embedded) { fixture in
                let (client, profile) = try await enrolledDevice(fixture)
                try await client.refreshSession()
                _ = try await client.fetchProfileResource()
                // A push answered with the PIN.
                let started = try await Portal(fixture: fixture).started(
                    "payment",
                    message: "Pay 12 EUR?",
                    signingData: "pay 12 EUR"
                )
                let request = try pending(client, from: lastPush(fixture))
                #expect(request.transactionID == started.transactionID)
                guard
                    case .approved = await client.handlePushMobileAuthRequest(
                        request,
                        delegate: ScriptedResponder([.pin("258147")])
                    )
                else {
                    Issue.record("the push was not approved")
                    return
                }
                #expect(profile.id.isEmpty == false)
                for (sent, answer) in fixture.transport.recorded {
                    for name in ["authorization", "dpop"] {
                        if let value = sent.header(name) { secrets.insert(value) }
                    }
                    collectStrings(in: sent.body, into: &secrets)
                    collectStrings(in: answer.body, into: &secrets)
                }
            }
        }
        let spans = tracer.finishedSpans
        // Every request is a server span named by its template; the PIN step is the child of
        // its request, and so are the store transactions.
        let servers = spans.filter { $0.kind == .server }
        #expect(servers.allSatisfy { $0.parentSpanID == nil })
        #expect(servers.contains { $0.operationName == "POST /v1/token" })
        let steps = spans.filter { $0.operationName == "flow.step" }
        let pinLogin = try #require(
            steps.first {
                $0.attributes["gatehouse.flow.kind"]?.toSpanAttribute() == .string("authentication")
                    && $0.attributes["gatehouse.flow.step.outcome"]?.toSpanAttribute() == .string("succeeded")
            }
        )
        let loginRequest = try #require(servers.first { $0.spanID == pinLogin.parentSpanID })
        #expect(loginRequest.operationName == "POST /v1/flows/{flowID}")
        #expect(pinLogin.attributes["gatehouse.plugin.id"]?.toSpanAttribute() == .string("pin"))
        let stores = spans.filter { $0.parentSpanID == loginRequest.spanID && $0.operationName.hasPrefix("db.") }
        #expect(stores.count >= 2, "\(stores.map(\.operationName))")
        let system = TestDatabase.current == .sqlite ? "sqlite" : "postgresql"
        #expect(stores.allSatisfy { $0.attributes["db.system.name"]?.toSpanAttribute() == .string(system) })
        #expect(
            steps.contains {
                $0.attributes["gatehouse.flow.kind"]?.toSpanAttribute() == .string("mobileAuthentication")
            }
        )
        // No store span outside a request: the outbox's and the janitor's own work is not traced.
        #expect(spans.filter { $0.operationName.hasPrefix("db.") }.allSatisfy { $0.parentSpanID != nil })

        #expect(secrets.count > 10)
        for span in spans {
            for (key, text) in texts(of: span.attributes) {
                for secret in secrets where text.contains(secret) {
                    Issue.record("\(span.operationName) \(key) holds a secret: \(text)")
                }
            }
            #expect(!secrets.contains { span.operationName.contains($0) }, "\(span.operationName)")
        }
    }

    @Test("without a tracer nothing is traced: no span context is set, so no inner span is started")
    func noTracer() async throws {
        #expect(ServerTracing.tracer == nil)
        let ran = await ServerTracing.span("db.write") { span in
            #expect(span == nil)
            return ServiceContext.current == nil
        }
        #expect(ran)
    }

    @Test("an incoming traceparent is continued only when well formed")
    func traceparentShape() {
        let good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        #expect(TraceHeaders.isWellFormed(good))
        for bad in [
            "garbage", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", good.uppercased(), good + "-00",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333z-01",
        ] {
            #expect(!TraceHeaders.isWellFormed(bad), "\(bad)")
        }
        let request = WireRequest(
            method: "GET",
            path: "/health",
            headers: ["traceparent": "nonsense", "tracestate": "a=b", "Authorization": "Bearer x"]
        )
        let headers = TraceHeaders(request)
        #expect(headers.traceparent == nil && headers.tracestate == nil)
    }

    @Test("the callbacks' causes are bounded: past the limit the older half is forgotten")
    func callbackCausesBounded() {
        let causes = CallbackCauses()
        for index in 0...CallbackCauses.limit { causes.remember(.topLevel, for: "t\(index)") }
        #expect(causes.cause(of: "t0") == nil)
        #expect(causes.cause(of: "t\(CallbackCauses.limit / 2 - 1)") == nil)
        #expect(causes.cause(of: "t\(CallbackCauses.limit / 2)") != nil)
        #expect(causes.cause(of: "t\(CallbackCauses.limit)") != nil)
        causes.forget("t\(CallbackCauses.limit)")
        #expect(causes.cause(of: "t\(CallbackCauses.limit)") == nil)
    }

    @Test("a sample reads the process, the database and the channels, at most once a second")
    func runtimeSample() async throws {
        try await withFixture(.embedded) { fixture in
            let first = ContinuousClock.now
            await fixture.server.sampleRuntimeMetrics()
            // Asked again at once; a loaded machine may still have put a second between the two
            // (the first sample's own reads count), and then a second sample is right.
            let recorded = try fixture.metrics.expectGauge("process_open_fds").values.count
            await fixture.server.sampleRuntimeMetrics()
            if ContinuousClock.now - first < .milliseconds(900) {
                #expect(try fixture.metrics.expectGauge("process_open_fds").values.count == recorded)
            }
            #expect((try fixture.metrics.expectGauge("process_resident_memory_bytes").lastValue ?? 0) > 1_000_000)
            #expect((try fixture.metrics.expectGauge("process_open_fds").lastValue ?? 0) > 0)
            #expect(try fixture.metrics.expectGauge("gatehouse_event_channels_open").lastValue == 0)
            #expect(try fixture.metrics.expectGauge("gatehouse_callback_outbox_waiting").lastValue == 0)
            switch TestDatabase.current {
            case .sqlite:
                #expect(try fixture.metrics.expectGauge("gatehouse_db_sqlite_pending_writes").lastValue == 0)
            case .postgres:
                let connections = try fixture.metrics.expectGauge("gatehouse_db_pool_max_connections").lastValue ?? 0
                #expect(connections > 0)
                // The server's own background work may wait for a connection at that moment on a
                // loaded machine: a count, never more than a few.
                let waiting = try fixture.metrics.expectGauge("gatehouse_db_pool_waiting_calls").lastValue
                #expect(waiting.map { (0...8).contains($0) } == true, "\(String(describing: waiting))")
            }
        }
    }
}

/// The secrets in a JSON body: tokens, flow and transaction ids, flow messages and challenges,
/// sealed payloads, codes and signatures, wherever they are.
private func collectStrings(in body: Data, into found: inout Set<String>) {
    guard let json = try? JSONSerialization.jsonObject(with: body) else { return }
    let secretKeys: Set<String> = [
        "access_token", "refresh_token", "id_token", "flow_id", "transaction_id", "message", "challenge", "sealed",
        "code", "signature", "profile_key", "device_token",
    ]
    func walk(_ value: Any, secret: Bool) {
        switch value {
        case let text as String where secret && text.count >= 8: found.insert(text)
        case let object as [String: Any]:
            for (key, value) in object { walk(value, secret: secret || secretKeys.contains(key)) }
        case let array as [Any]: for value in array { walk(value, secret: secret) }
        default: break
        }
    }
    walk(json, secret: false)
}

/// The attributes' values as text, by key (`SpanAttributes` is no sequence: `forEach` is its way in).
private func texts(of attributes: SpanAttributes) -> [String: String] {
    var texts: [String: String] = [:]
    // swift-format-ignore: ReplaceForEachWithForLoop
    attributes.forEach { key, attribute in texts[key] = attributeText(attribute) }
    return texts
}

private func attributeText(_ attribute: SpanAttribute) -> String {
    switch attribute {
    case .string(let text): text
    case .int64(let number): String(number)
    case .bool(let flag): String(flag)
    default: "\(attribute)"
    }
}
