import Crypto
@_spi(Benchmarks) import CustomAPIIdentityProvider
import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
@_spi(Benchmarks) import PINAuthenticator
import _CryptoExtras

// A device the load generator drives below the SDK: it registers over the wire protocol (the
// custom registration API, then the PIN), and so holds every key itself — the installation key,
// the profile key and the PIN-protected key — to prepare requests ahead of the timed window.

/// The benchmark could not set up or check something it needs.
struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The PIN every benchmark user enrols (it meets the demo manifest's policy).
let benchmarkPIN = "258147"

struct WireDevice: Sendable {
    var subject: String
    var deviceKey: P256.Signing.PrivateKey
    var profileKey: P256.Signing.PrivateKey
    /// The key the PIN protects on a real device; here it is simply kept.
    var pinKey: P256.Signing.PrivateKey
    var oprfPublicKey: Data
    var profileID: String
    var accessToken: String
    var refreshToken: String

    /// SHA-256 of the OPRF public key: tells the server which registration the device holds.
    var oprfKeyDigest: Data { PINCrypto.keyDigest(publicKey: oprfPublicKey) }

    /// What the PIN-protected key signs to authenticate (the PIN plugin's signing input).
    func pinSigningInput(purpose: String, nonce: Data) -> Data {
        PINCrypto.signingInput(purpose: purpose, profileID: profileID, nonce: nonce)
    }
}

/// Calls the server the way a device does, untimed: set-up only.
struct SetupCalls: Sendable {
    let transport: HTTPTransport
    let baseURL: String

    func call<Response: Decodable>(
        _ method: String,
        _ path: String,
        body: (some Encodable)?,
        key: P256.Signing.PrivateKey?,
        accessToken: String? = nil
    ) async throws -> Response {
        var headers = ["Accept": "application/json"]
        var data = Data()
        if let body {
            data = try WireCoding.encode(body)
            headers["Content-Type"] = "application/json"
        }
        if let key {
            headers["DPoP"] = try DPoP.proof(
                method: method,
                url: baseURL + path,
                accessToken: accessToken,
                key: key,
                now: Date()
            )
        }
        if let accessToken { headers["Authorization"] = "DPoP \(accessToken)" }
        let response = try await transport.send(WireRequest(method: method, path: path, headers: headers, body: data))
        guard (200..<300).contains(response.status) else {
            throw BenchmarkError(
                "\(method) \(path): HTTP \(response.status) \(String(decoding: response.body, as: UTF8.self))"
            )
        }
        return try WireCoding.decode(Response.self, from: response.body)
    }

    /// Registers a user through the demo registration API (two steps, one-time code) and enrols
    /// the benchmark PIN.
    func registerDevice(subject: String) async throws -> WireDevice {
        let deviceKey = P256.Signing.PrivateKey()
        let client: ClientRegistrationResponse = try await call(
            "POST",
            Endpoint.clients,
            body: ClientRegistrationRequest(appID: "gatehouse-example", publicKey: PublicJWK(deviceKey.publicKey)),
            key: deviceKey
        )
        let profileKey = P256.Signing.PrivateKey()
        var flow: FlowResponse = try await call(
            "POST",
            Endpoint.registration,
            body: RegistrationStartRequest(
                clientID: client.clientID,
                identityProvider: "demo-api",
                scopes: nil,
                profileKey: PublicJWK(profileKey.publicKey)
            ),
            key: deviceKey
        )
        func send(_ message: some Encodable) async throws -> FlowResponse {
            flow = try await call(
                "POST",
                Endpoint.flow(flow.flowID),
                body: FlowMessageRequest(message: try JSONEncoder().encode(message)),
                key: deviceKey
            )
            return flow
        }
        func challenge<T: Decodable>(_ type: T.Type, _ response: FlowResponse) throws -> T {
            guard let payload = response.challenge?.data else { throw BenchmarkError("the server sent no challenge") }
            return try JSONDecoder().decode(type, from: payload)
        }

        _ = try await send(CustomAPIMessage(step: .start))
        let initialized = try challenge(
            CustomAPIChallenge.self,
            try await send(CustomAPIMessage(step: .initialize, data: subject))
        )
        // The demo API's one-time code ends the data it answers with.
        let code = String((initialized.info?.data ?? "").suffix(6))
        _ = try await send(CustomAPIMessage(step: .complete, data: code))
        guard flow.stage == .enrol("pin"), let profileID = flow.profileID else {
            throw BenchmarkError(
                "the registration did not go on to enrol the PIN (stage \(String(describing: flow.stage)))"
            )
        }

        let policy = try challenge(PINChallengePayload.self, try await send(PINMessage(op: .policy)))
        guard let oprfPublicKey = policy.oprfPublicKey, let nonce = policy.nonce, let digest = policy.policyDigest
        else {
            throw BenchmarkError("the PIN enrolment sent no OPRF key")
        }
        let blinded = try P384._VOPRF.PublicKey(x963Representation: oprfPublicKey).blind(Data(benchmarkPIN.utf8))
        _ = try await send(PINMessage(op: .evaluate, blinded: blinded.blindedElement.oprfRepresentation))
        let pinKey = P256.Signing.PrivateKey()
        var device = WireDevice(
            subject: subject,
            deviceKey: deviceKey,
            profileKey: profileKey,
            pinKey: pinKey,
            oprfPublicKey: oprfPublicKey,
            profileID: profileID,
            accessToken: "",
            refreshToken: ""
        )
        let signature = try pinKey.signature(for: device.pinSigningInput(purpose: "enrol", nonce: nonce))
        let final = try await send(
            PINMessage(
                op: .commit,
                publicKey: pinKey.publicKey.x963Representation,
                signature: signature.derRepresentation,
                policyDigest: digest
            )
        )
        guard final.stage == nil, let tokens = final.tokens else {
            throw BenchmarkError("the registration ended without a session")
        }
        device.accessToken = tokens.accessToken
        device.refreshToken = tokens.refreshToken
        return device
    }
}
