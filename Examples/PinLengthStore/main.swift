// pin-length-store: seed 004's PIN-length store, against an embedded token server whose PIN
// policy changes between runs.
//
//   swift run pin-length-store                     # the story only
//   swift run pin-length-store --log-level info    # with the server's and the SDK's log lines

import CustomAPIIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehousePlugins
import GatehouseServer
import GatehouseYAML
import Logging

/// Log lines are not the story: only errors, unless `--log-level LEVEL` asks for more.
let logger: Logger = {
    let arguments = CommandLine.arguments
    let level =
        arguments.firstIndex(of: "--log-level").flatMap { arguments.dropFirst($0 + 1).first }
        .flatMap(Logger.Level.init(rawValue:)) ?? .error
    return Logger.story(label: "pin-length-store", level: level)
}()

/// The registration API of the example: one code, 4821.
struct FixedCodeAPI: CustomRegistrationAPI {
    func initialize(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        CustomRegistrationReply(status: 2000, data: "code sent", state: request.data)
    }
    func complete(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        guard request.data == "4821", let user = request.state else { return CustomRegistrationReply(status: 4001) }
        return CustomRegistrationReply(status: 2000, userID: user)
    }
}

/// The server's manifest with a PIN policy of `length` digits.
func manifest(pinLength length: Int) throws -> Manifest {
    try ManifestLoader.jsonAndYAML.parse(
        Data(
            """
            server: {clients: [{id: pin-length-example}], maxPinFailures: 3}
            authenticators: [{id: pin, type: pin, config: {policy: {length: \(length)}}}]
            identityProviders: [{id: codes, type: idp.customAPI, config: {twoStep: true, handler: codes}}]
            """.utf8
        ),
        format: YAMLManifestFormat(),
        source: "pin-length-\(length).yaml",
        additionalSections: ["server"]
    )
}

/// An app on a device, talking to a server whose policy asks for `length` digits.
func app(in directory: URL, pinLength length: Int) throws -> UserClient {
    let manifest = try manifest(pinLength: length)
    var environment = PluginEnvironment(logger: logger)
    environment.services[CustomRegistrationAPIKey.self, named: "codes"] = FixedCodeAPI()
    let server = try EmbeddedTokenServer(
        directory: directory.appendingPathComponent("server"),
        manifest: manifest,
        registry: try PluginRegistry.builtIn,
        environment: environment
    )
    return try UserClient(
        configuration: ClientConfiguration(
            dataDirectory: directory.appendingPathComponent("device"),
            transport: server,
            appID: "pin-length-example",
            plugins: try PluginRegistry.builtIn.load(manifest, environment: environment, sides: .client),
            logger: logger
        )
    )
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
    "pin-length-\(UUID().uuidString.prefix(8))"
)
defer { try? FileManager.default.removeItem(at: directory) }

do {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let store = try PinLengthStore(file: directory.appendingPathComponent("pin-lengths.json"))

    print("1. Register while the server's policy asks for 6 digits; the length is stored after success.")
    var client = try app(in: directory, pinLength: 6)
    let registration = PinPad(store: store, typing: ["258147"])
    let profile = try await client.registerUser(delegate: registration).profile
    if let length = await registration.pendingLength.length { try await store.setLength(length, for: profile) }
    print("   stored length: \(await store.length(for: profile) ?? 0)")

    print("2. Log in: the pad is sized from the store.")
    try await client.authenticateUser(profile, delegate: PinPad(store: store, typing: ["258147"]))

    print("3. The server now asks for 5 digits. A PIN change cancelled half-way stores nothing.")
    client = try app(in: directory, pinLength: 5)
    try await client.authenticateUser(profile, delegate: PinPad(store: store, typing: ["258147"]))
    let cancelled = PinPad(store: store, typing: ["258147"])
    do {
        try await client.changePin(delegate: cancelled)
    } catch let error as GenericError where error.code == .actionCancelled {
        print("   change cancelled; stored length still: \(await store.length(for: profile) ?? 0)")
    }

    print("4. A PIN change that succeeds stores the new length.")
    let change = PinPad(store: store, typing: ["258147", "93715"])
    try await client.changePin(delegate: change)
    if let length = await change.pendingLength.length { try await store.setLength(length, for: profile) }
    print("   stored length: \(await store.length(for: profile) ?? 0)")

    print("5. Three wrong PINs deregister the user; the length is removed with the profile.")
    do {
        try await client.authenticateUser(
            profile,
            delegate: PinPad(store: store, typing: ["11111", "22222", "33333"])
        )
    } catch let error as GenericError where error.code == .userDeregistered {
        try await store.removeLength(for: profile)
        print(
            "   deregistered (\(error.codeName)); stored length: \(await store.length(for: profile).map(String.init) ?? "none")"
        )
    }
    print("Done.")
} catch {
    print("error: \(error)")
    exit(1)
}
