import BiometricAuthenticator
import Crypto
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehousePlugins
import GatehouseProtocol
import GatehouseTesting
import GatehouseYAML
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `gatehouse serve`, `resource-gateway` in front of it, and a device registered with `gatehouse
/// register`: the example as a newcomer runs it.
private struct GatewayRun {
    let directory: URL
    let server: Session
    let gateway: Session
    let serverURL: String
    let gatewayURL: String
    let device: [String]

    static func start() async throws -> GatewayRun {
        let directory = try scratchDirectory("gatehouse-gateway")
        let (server, serverURL) = try await startServer(in: directory)
        let port = try #require(LoopbackPort.free())
        let gateway = try Session(
            ["--token-server", serverURL, "--port", "\(port)", "--cache-lifetime", "1"],
            binary: "resource-gateway"
        )
        _ = try await gateway.waitFor("Resource gateway listening on")
        let device = ["--server", serverURL, "--data-dir", directory.appendingPathComponent("device").path]
        try await registerOverCommandLine(device)
        return GatewayRun(
            directory: directory,
            server: server,
            gateway: gateway,
            serverURL: serverURL,
            gatewayURL: "http://127.0.0.1:\(port)",
            device: device
        )
    }

    func stop() {
        gateway.process.terminate()
        server.process.terminate()
        try? FileManager.default.removeItem(at: directory)
    }

    /// `gatehouse fetch` against the gateway; returns its exit status and output.
    func fetch(_ path: String, access: String, pin: Bool = false) async throws -> (Int32, String) {
        let fetch = try Session(["fetch", gatewayURL + path, "--access", access] + device)
        if pin {
            _ = try await fetch.waitFor("PIN")
            fetch.type("258147")
        }
        let status = try await fetch.finish()
        return (status, fetch.output.withLock { $0 } + fetch.errors.withLock { $0 })
    }

    /// The device's SDK in this process, on the data the commands wrote.
    func client() throws -> UserClient {
        try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: directory.appendingPathComponent("device"),
                transport: HTTPTransport(baseURL: serverURL),
                appID: "gatehouse-example",
                plugins: try examplePlugins()
            )
        )
    }

    /// A raw request to the gateway with exactly `headers`.
    func send(
        _ method: String,
        _ path: String,
        headers: [String: String]
    ) async throws -> (Int, [String: String], String) {
        var request = URLRequest(url: try #require(URL(string: gatewayURL + path)))
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
        }
        return (http.statusCode, fields, String(decoding: data, as: UTF8.self))
    }
}

@Suite("The resource gateway example", .serialized)
struct ResourceGatewayTests {
    @Test("gatehouse fetch with user, implicit, device and no token: each route takes the kinds it names")
    func tokenKinds() async throws {
        let run = try await GatewayRun.start()
        defer { run.stop() }
        let (implicitStatus, implicit) = try await run.fetch("/greeting", access: "implicit")
        #expect(implicitStatus == 0 && implicit.contains("Hello, ann@example.com!"), "\(implicit)")
        let (userStatus, user) = try await run.fetch("/account", access: "user", pin: true)
        #expect(userStatus == 0 && user.contains(#""subject":"ann@example.com""#), "\(user)")
        let (deviceStatus, device) = try await run.fetch("/catalogue", access: "device")
        #expect(deviceStatus == 0 && device.contains("tea, coffee, cake"), "\(device)")
        let (anonymousStatus, anonymous) = try await run.fetch("/status", access: "anonymous")
        #expect(anonymousStatus == 0 && anonymous.contains("ok"))
        // Each route refuses the kinds it does not take, and no token at all.
        let (implicitAtAccount, refusedImplicit) = try await run.fetch("/account", access: "implicit")
        #expect(implicitAtAccount != 0 && refusedImplicit.contains("insufficient_user_authentication"))
        let (deviceAtGreeting, refusedDevice) = try await run.fetch("/greeting", access: "device")
        #expect(deviceAtGreeting != 0 && refusedDevice.contains("HTTP 401"))
        let (anonymousAtGreeting, refusedAnonymous) = try await run.fetch("/greeting", access: "anonymous")
        #expect(anonymousAtGreeting != 0 && refusedAnonymous.contains("HTTP 401"))
    }

    @Test("refused: a revoked token after the cache window, a missing scope, a foreign key, a proof for another URI")
    func refusals() async throws {
        let run = try await GatewayRun.start()
        defer { run.stop() }
        let client = try run.client()
        let profile = try #require(try await client.userProfiles().first)
        try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
        let account = run.gatewayURL + "/account"

        // A foreign DPoP key: the real token, a proof signed by another key.
        let genuine = try await client.resourceHeaders(.user, method: "GET", url: account)
        let token = try #require(genuine["Authorization"]?.dropFirst("DPoP ".count)).description
        let foreign = try DPoP.proof(
            method: "GET",
            url: account,
            accessToken: token,
            key: P256.Signing.PrivateKey(),
            now: Date()
        )
        let (foreignStatus, foreignHeaders, foreignBody) = try await run.send(
            "GET",
            "/account",
            headers: ["Authorization": "DPoP \(token)", "DPoP": foreign]
        )
        #expect(foreignStatus == 401 && foreignBody.contains("bound to another key"))
        #expect(foreignHeaders["www-authenticate"]?.hasPrefix(#"DPoP error="invalid_token""#) == true)

        // A proof for another URI, and for another host with the same path.
        for elsewhere in [run.gatewayURL + "/greeting", "http://evil.example/account"] {
            let (status, headers, _) = try await run.send(
                "GET",
                "/account",
                headers: try await client.resourceHeaders(.user, method: "GET", url: elsewhere)
            )
            #expect(status == 401, "\(elsewhere)")
            #expect(headers["www-authenticate"]?.contains(#"error="invalid_dpop_proof""#) == true)
        }

        // The token's scope is read; the notes want write.
        let (scopeStatus, scopeHeaders, scopeBody) = try await run.send(
            "POST",
            "/notes",
            headers: try await client.resourceHeaders(.user, method: "POST", url: run.gatewayURL + "/notes")
        )
        #expect(scopeStatus == 403 && scopeBody.contains("insufficient_scope"))
        #expect(scopeHeaders["www-authenticate"]?.contains(#"scope="write""#) == true)

        // Revoked: works now; after logout it is refused once the gateway's 1-second cache ran out.
        let before = try await client.resourceHeaders(.user, method: "GET", url: account)
        let after = try await client.resourceHeaders(.user, method: "GET", url: account)
        #expect(try await run.send("GET", "/account", headers: before).0 == 200)
        await client.logout()
        try await Task.sleep(for: .milliseconds(1100))
        let (revokedStatus, _, revokedBody) = try await run.send("GET", "/account", headers: after)
        #expect(revokedStatus == 401 && revokedBody.contains("not valid"), "\(revokedBody)")

        // A proof is good once.
        try await client.authenticateUserImplicitly(profile)
        let once = try await client.resourceHeaders(.implicit, method: "GET", url: run.gatewayURL + "/greeting")
        #expect(try await run.send("GET", "/greeting", headers: once).0 == 200)
        let (replayStatus, _, replayBody) = try await run.send("GET", "/greeting", headers: once)
        #expect(replayStatus == 401 && replayBody.contains("already used"))
    }
}

/// The client halves of Examples/manifests/server.yaml's plugins.
func examplePlugins() throws -> LoadedPlugins {
    let text = try String(
        contentsOf: packageRoot.appendingPathComponent("Examples/manifests/server.yaml"),
        encoding: .utf8
    )
    let manifest = try ManifestLoader.jsonAndYAML.parse(
        Data(text.replacingOccurrences(of: "${publicURL}", with: "http://127.0.0.1:8080").utf8),
        format: YAMLManifestFormat(),
        source: "server.yaml",
        additionalSections: ["server", "xignin", "login"]
    )
    return try PluginRegistry.builtIn.load(
        manifest,
        environment: PluginEnvironment(
            services: PluginServices().setting(
                SimulatedBiometricSensorKey.self,
                named: "simulated-sensor",
                to: SimulatedBiometricSensor()
            )
        ),
        sides: .client
    )
}
