// xignin-registration: the seed's XignIn registration, step by step, against an embedded token
// server with the XignIn manager mounted. Each answer the "user" gives is printed with the
// validator's result code, the way the seed's examples switch over them.
//
//   swift run xignin-registration

import CustomAPIIdentityProvider
import Foundation
import GatehouseKernel
import GatehouseOutbound
import GatehousePlugins
import GatehouseServer
import GatehouseYAML
import Logging
import XignInClient
import XignInManager
import XignInValidators

/// The example's state lives in a fresh temporary directory.
let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
    "xignin-example-\(UUID().uuidString.prefix(8))"
)
let manifestText = """
    server: {clients: [{id: xignin-example}]}
    authenticators: [{id: pin, type: pin}]
    identityProviders: [{id: unused, type: idp.customAPI, config: {handler: unused}}]
    xignin:
      managerURL: https://xign.example/
      pin: {minLength: 5, maxLength: 8}
      alias: {minLength: 2, maxLength: 30}
      categories:
        - {id: email, types: [email], required: [email]}
      serviceMappings:
        - {id: a4212c28-7fb0-5ec9-8cf2-5ecda1f81329, webhook: "http://127.0.0.1:9/provision"}
    """

/// The token server insists on an identity provider; this example registers through XignIn only.
struct NoRegistrationAPI: CustomRegistrationAPI {
    func initialize(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        CustomRegistrationReply(status: 5000)
    }
    func complete(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        CustomRegistrationReply(status: 5000)
    }
}

/// Linked-service delivery is printed instead of posted.
struct PrintingProvisioner: LinkedServiceProvisioner {
    func provision(_ delivery: LinkedServiceDelivery, at url: OutboundURL) async throws {
        let attributes = delivery.attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
            separator: ", "
        )
        print("   → linked service \(delivery.serviceMappingID) receives \(attributes)")
    }
}

do {
    let manifest = try ManifestLoader.jsonAndYAML.parse(
        Data(manifestText.utf8),
        format: YAMLManifestFormat(),
        source: "xignin-example.yaml",
        additionalSections: ["server", "xignin"]
    )
    // Log lines are not the story: errors only, as in the other examples.
    let logger = Logger.story(label: "xignin-example", level: .error)
    var environment = PluginEnvironment(logger: logger)
    environment.services[CustomRegistrationAPIKey.self, named: "unused"] = NoRegistrationAPI()
    // The server's database, opened with the manager's tables: the manager and the token server
    // keep their state in it side by side (a SQLite file here; a PostgreSQL URL works the same).
    try FileManager.default.createDirectory(
        at: directory.appendingPathComponent("server"),
        withIntermediateDirectories: true
    )
    let storage = try await ServerStorage.open(
        .sqlite(path: directory.appendingPathComponent("server/server.sqlite").path),
        migrations: [XignInManager.migrations],
        logger: logger
    )
    let manager = try XignInManager(
        manifest: manifest,
        storage: storage,
        mail: OutboxMailSender(directory: directory.appendingPathComponent("xignin/outbox")),
        provisioner: PrintingProvisioner(),
        environment: environment
    )
    let server = try await EmbeddedTokenServer(
        storage: storage,
        manifest: manifest,
        registry: try PluginRegistry.builtIn,
        environment: environment,
        extensions: [manager]
    )
    let registry = try Registry(dataDirectory: directory.appendingPathComponent("device")) { _ in server }
    let managerURL = URL(fileURLWithPath: "/")

    print("1. Initialization with a service mapping id")
    var parameters = try await registry.initialization(
        url: managerURL,
        serviceMappingId: "a4212c28-7fb0-5ec9-8cf2-5ecda1f81329"
    )
    print(
        "   PIN: \(parameters.pinSpec.minLength)–\(parameters.pinSpec.maxLength) digits; categories: \(parameters.categories.map(\.id))"
    )

    print("2. The activation PIN")
    for typed in ["", "12a45", "1234", "123456789", "24680"] {
        print(
            "   setPin(\(typed.isEmpty ? "empty" : "\(typed.count) characters")) → \(parameters.pinSpec.setPin(typed))"
        )
    }

    print("3. Category selection and the e-mail address")
    guard let category = parameters.categories.first else { throw GenericError(.configurationInvalid) }
    parameters.setSelection(category)
    print("   email.isRequired → \(parameters.selection?.info.email.isRequired ?? false)")
    for typed in ["", "jane@", "jane@example.com"] {
        let code = parameters.selection?.info.email.setValue(value: typed)
        print("   email.setValue(\"\(typed)\") → \(code.map(\.rawValue) ?? "-")")
    }

    print("4. Optional data: the alias and arbitrary attributes")
    for typed in ["J", String(repeating: "x", count: 31), "Jane's phone"] {
        print(
            "   setAlias(\"\(typed.count > 12 ? "\(typed.count) characters" : typed)\") → \(parameters.setAlias(typed))"
        )
    }
    parameters.setArbitraryUserAttributes(["your_first_key": "some data", "your_second_key": "some data"])

    print("5. Finishing the registration")
    guard case .success(let url) = try await registry.register(data: parameters) else { throw GenericError(.unknown) }
    print("   .success(managerUrl: \(url.absoluteString))")

    print("6. A second registration with the same address is refused per field")
    guard case .failure(let refused) = try await registry.register(data: parameters) else {
        throw GenericError(.unknown)
    }
    print("   .failure — selection.info.email.error → \(refused.selection?.info.email.error.rawValue ?? "-")")

    print("7. Activation with the e-mailed code and the activation PIN")
    let outbox = directory.appendingPathComponent("xignin/outbox")
    let mailFile = try FileManager.default.contentsOfDirectory(atPath: outbox.path).sorted().first ?? ""
    let mail = try String(contentsOf: outbox.appendingPathComponent(mailFile), encoding: .utf8)
    let code =
        mail.split(separator: "\r\n").first { $0.hasPrefix("Activation code: ") }.map { String($0.dropFirst(17)) } ?? ""
    print("   the outbox holds \(mailFile)")
    let entity = try await registry.activate(url: managerURL, code: code, pin: "24680")
    print("   activated \"\(entity.alias)\" at \(entity.managerURL)")
    print(
        "   identity managers on this device: \(try await registry.identityManagers().map(\.alias).joined(separator: ", "))"
    )
    await storage.shutdown()
    try? FileManager.default.removeItem(at: directory)
    print("Done.")
} catch {
    try? FileManager.default.removeItem(at: directory)
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
