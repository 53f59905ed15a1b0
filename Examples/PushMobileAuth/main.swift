// push-mobile-auth: mobile authentication with push, the whole story in one process: a token
// server (embedded), a portal that starts transactions, and a device that receives the pushes
// and answers them.
//
//   swift run push-mobile-auth                     # the story only
//   swift run push-mobile-auth --log-level info    # with the server's and the SDK's log lines

import CustomAPIIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehousePlugins
import GatehouseProtocol
import GatehouseServer
import GatehouseYAML
import Logging

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

let manifest = try ManifestLoader.jsonAndYAML.parse(
    Data(
        """
        server:
          clients: [{id: push-example}]
          maxPinFailures: 3
          mobileAuth:
            apiClients: [{id: shop, secret: shop-secret-0123456789}]
            types:
              - {name: login, method: confirmation, numberMatching: true, defaultMessage: "Sign in to Example Shop?"}
              - {name: payment, method: pin, transactionSigning: true, defaultMessage: "Approve a payment"}
              - {name: checkout, method: pin, delivery: otp, defaultMessage: "Pay at the checkout?"}
        authenticators: [{id: pin, type: pin}]
        identityProviders: [{id: codes, type: idp.customAPI, config: {twoStep: true, handler: codes}}]
        """.utf8
    ),
    format: YAMLManifestFormat(),
    source: "push-mobile-auth.yaml",
    additionalSections: ["server"]
)

/// What the user does on the phone: reads the request and answers as the script says.
struct Phone: MobileAuthRequestDelegate {
    var typedNumber: @Sendable (MobileAuthRequest) -> MobileAuthConfirmationResponse
    var pin: String

    func confirmation(_ challenge: MobileAuthConfirmationChallenge) -> MobileAuthConfirmationResponse {
        print(
            "   phone: \"\(challenge.request.message)\""
                + (challenge.request.numberMatching ? ", asks for the number" : "")
        )
        return typedNumber(challenge.request)
    }
    func pin(_ challenge: PinChallenge, for request: MobileAuthRequest) -> PinResponse {
        print("   phone shows the sealed details: \(request.secureMessage ?? "-")")
        print(
            "   phone signs: \(request.signingData ?? "-"); asks for the PIN (\(challenge.remainingFailureCount ?? 0) left)"
        )
        return .pin(PIN(pin))
    }
    func didHandle(_ request: MobileAuthRequest, info: CustomInfo?) { print("   phone: answer sent") }
    func didFail(_ request: MobileAuthRequest?, error: any Error) {
        print("   phone: could not handle it: \((error as? any DomainError)?.message ?? "\(error)")")
    }
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("push-mobile-auth-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }
/// Log lines are not the story: only errors, unless `--log-level LEVEL` asks for more.
let logger: Logger = {
    let arguments = CommandLine.arguments
    let level =
        arguments.firstIndex(of: "--log-level").flatMap { arguments.dropFirst($0 + 1).first }
        .flatMap(Logger.Level.init(rawValue:)) ?? .error
    return Logger.story(label: "push-mobile-auth", level: level)
}()
let environment = PluginEnvironment(
    logger: logger,
    services: PluginServices().setting(CustomRegistrationAPIKey.self, named: "codes", to: FixedCodeAPI())
)
let pushes = InProcessPushTransport()
let server = try EmbeddedTokenServer(
    directory: directory.appendingPathComponent("server"),
    manifest: manifest,
    registry: try PluginRegistry.builtIn,
    environment: environment,
    pushTransports: [.apns: pushes]
)
let phone = try UserClient(
    configuration: ClientConfiguration(
        dataDirectory: directory.appendingPathComponent("phone"),
        transport: server,
        appID: "push-example",
        plugins: try PluginRegistry.builtIn.load(manifest, environment: environment, sides: .client),
        logger: logger
    )
)
let portal = PortalClient(transport: server, clientID: "shop", secret: "shop-secret-0123456789")

print("1. The user registers on the phone, logs in, and enrols for mobile authentication with push")
let registration = try await phone.registerUser(
    delegate: ScriptedRegistration(email: "jane@example.com", code: "4821", pin: "258147")
)
try await phone.authenticateUser(registration.profile, delegate: ScriptedRegistration(pin: "258147"))
try await phone.enrollForMobileAuth()
try await phone.enrollForPushMobileAuth(deviceToken: "apns-device-token-1234", platform: .apns)
print("   profile \(registration.profile.id): enrolled, push token registered")

/// The portal starts a transaction; the phone takes the push and answers; the portal reads the verdict.
func transaction(
    _ title: String,
    _ request: PortalMobileAuthRequest,
    phone delegate: @escaping @Sendable (Int?) -> Phone
) async throws {
    print("\n\(title)")
    let started = try await portal.start(request)
    print(
        "   portal: transaction \(started.transactionID.prefix(8))… (\(started.authMethod.rawValue))"
            + (started.number.map { ", shows the number \($0)" } ?? "")
    )
    guard let push = pushes.delivered(to: "apns-device-token-1234").last,
        let userInfo = try JSONSerialization.jsonObject(with: push.apnsPayload()) as? [String: Any],
        let pending = phone.pendingMobileAuthRequest(fromUserInfo: userInfo)
    else { throw GenericError(.requestInvalid, message: "no push arrived") }
    print("   push: \(userInfo.keys.sorted().joined(separator: ", ")) — ids and the short message only")
    await phone.handlePushMobileAuthRequest(pending, delegate: delegate(started.number))
    let result = try await portal.result(started.transactionID)
    print(
        "   portal: \(result.status.rawValue)" + (result.authenticationMethod.map { " with \($0)" } ?? "")
            + (result.reason.map { " (\($0))" } ?? "")
            + (result.signatureVerified == true ? ", signature verified" : "")
    )
}

try await transaction(
    "2. Sign in with number matching",
    PortalMobileAuthRequest(userID: "jane@example.com", type: "login")
) {
    number in Phone(typedNumber: { _ in .accept(number: number) }, pin: "")
}
try await transaction(
    "3. A payment approved with the PIN; the details travel sealed, the phone signs them",
    PortalMobileAuthRequest(
        userID: "jane@example.com",
        type: "payment",
        message: "Pay €42.00 to Example Shop?",
        secureMessage: "€42.00 to Example Shop, order 20261123-17, delivery Friday",
        signingData: "pay 42.00 EUR to NL91ABNA0417164300 order 20261123-17"
    )
) { _ in Phone(typedNumber: { _ in .accept }, pin: "258147") }
try await transaction(
    "4. A sign-in the user did not start is reported",
    PortalMobileAuthRequest(userID: "jane@example.com", type: "login", message: "Sign in from an unknown browser?")
) { _ in Phone(typedNumber: { _ in .deny(.notRecognised) }, pin: "") }

print("\n5. A push that never arrives: the phone asks the server what is pending")
let lost = try await portal.start(PortalMobileAuthRequest(userID: "jane@example.com", type: "login"))
let listed = try await phone.pendingPushMobileAuthRequests()
print("   pending: \(listed.map { "\($0.transactionID.prefix(8))… \"\($0.message)\"" }.joined(separator: ", "))")
if let first = listed.first {
    await phone.handlePushMobileAuthRequest(
        first,
        delegate: Phone(typedNumber: { _ in .accept(number: lost.number) }, pin: "")
    )
}
print("   portal: \(try await portal.result(lost.transactionID).status.rawValue)")

print("\n6. No push at all: the checkout screen shows a QR code, the phone scans it (OTP mobile authentication)")
let checkout = try await portal.start(PortalMobileAuthRequest(userID: nil, type: "checkout", qrCode: .svg))
print(
    "   portal: shows a QR code (\(checkout.qrCode?.prefix(26) ?? "")…) of the code \(checkout.otp?.prefix(12) ?? "")…"
)
let scanned = checkout.otp ?? ""
print("   phone: can handle the scanned text: \(phone.canHandleOTPMobileAuthRequest(otp: scanned))")
await phone.handleOTPMobileAuthRequest(otp: scanned, delegate: Phone(typedNumber: { _ in .accept }, pin: "258147"))
let paid = try await portal.result(checkout.transactionID)
print(
    "   portal: \(paid.status.rawValue)" + (paid.authenticationMethod.map { " with \($0)" } ?? "")
        + " by \(paid.userID ?? "nobody"), who scanned it"
)
print("\nDone.")

/// Answers registration and login challenges for the example's user.
struct ScriptedRegistration: RegistrationDelegate, AuthenticationDelegate {
    var email = ""
    var code = ""
    var pin: String

    func customRegistration(_ challenge: CustomRegistrationChallenge) -> CustomRegistrationResponse {
        .data(challenge.step == .initialize ? email : code)
    }
    func createPin(_ challenge: CreatePinChallenge) -> CreatePinResponse { .pin(PIN(pin)) }
    func pin(_ challenge: PinChallenge) -> PinResponse { .pin(PIN(pin)) }
}
