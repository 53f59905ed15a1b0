import Crypto
import Foundation
import GRDB
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@Suite("A standard OAuth client library against gatehouse serve")
struct OAuthStandardClientTests {
    @Test("Authlib refreshes, introspects and revokes with DPoP, finding the endpoints in the metadata")
    func authlib() async throws {
        let directory = try scratchDirectory("gatehouse-authlib")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, serverURL) = try await startServer(in: directory)
        defer { server.process.terminate() }
        let deviceDirectory = directory.appendingPathComponent("device")
        try await registerOverCommandLine(["--server", serverURL, "--data-dir", deviceDirectory.path])

        // The device's own SDK opens a session: the refresh token and the key it is bound to are
        // what an app would hand a library of its choice.
        let device = ExampleDevice(directory: deviceDirectory, serverURL: serverURL)
        let client = try device.client()
        let profile = try #require(try await client.userProfiles().first)
        try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
        let tokens = try #require(await client.sessionTokens)
        let key = try device.profileKey(profile.id)

        let check = try Session(
            [],
            binary: packageRoot.appendingPathComponent("scripts/oauth-standard-client").path
        )
        let raw = key.rawRepresentation
        let publicRaw = key.publicKey.rawRepresentation
        let input: [String: Any] = [
            "server": serverURL, "clientID": "gatehouse-example", "refreshToken": tokens.refreshToken,
            "key": [
                "kty": "EC", "crv": "P-256", "d": raw.base64URLEncodedString,
                "x": publicRaw.prefix(32).base64URLEncodedString, "y": publicRaw.suffix(32).base64URLEncodedString,
            ],
            "resourceServer": ["id": "gateway", "secret": "example-gateway-secret-change-me"],
        ]
        check.input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: input))
        #expect(try await check.finish() == 0, "\(check.output.withLock { $0 }) \(check.errors.withLock { $0 })")
        let output = check.output.withLock { $0 }
        #expect(output.contains("introspected active=true sub=ann@example.com kind=user jkt-matches-key"), "\(output)")
        #expect(output.contains("refused revoked refresh token: invalid_grant"))
        #expect(output.hasSuffix("OK\n"))
    }
}

/// The device data `gatehouse register` wrote, opened in this process.
struct ExampleDevice {
    let directory: URL
    let serverURL: String

    func client() throws -> UserClient {
        try UserClient(
            configuration: ClientConfiguration(
                dataDirectory: directory,
                transport: HTTPTransport(baseURL: serverURL),
                appID: "gatehouse-example",
                plugins: try examplePlugins()
            )
        )
    }

    /// The profile's private key, unsealed with the device's key file as the SDK does.
    func profileKey(_ profileID: String) throws -> P256.Signing.PrivateKey {
        let sealingKey = try FileKeyStore(path: directory.appendingPathComponent("client.key").path).sealingKey()
        let sealed = try DatabaseQueue(path: directory.appendingPathComponent("client.sqlite").path).read { db in
            try Data.fetchOne(
                db,
                sql: "SELECT sealed_key FROM profiles WHERE id = ? AND server = ?",
                arguments: [profileID, serverURL]
            )
        }
        let box = try AES.GCM.SealedBox(combined: try #require(sealed))
        let raw = try AES.GCM.open(
            box,
            using: sealingKey,
            authenticating: Data("profile|\(serverURL)|\(profileID)".utf8)
        )
        return try P256.Signing.PrivateKey(rawRepresentation: raw)
    }
}
