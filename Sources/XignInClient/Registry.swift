import Crypto
public import Foundation
public import GatehouseClient
import GatehouseKernel
public import GatehouseProtocol
public import XignInValidators
import _CryptoExtras

/// The outcome of ``Registry/register(data:)``.
public enum RegistrationResponse: Sendable {
    /// The manager took the registration; an activation code is on its way by e-mail.
    case success(managerUrl: URL)
    /// The manager refused some values: the same parameters, with each attribute's `error` and
    /// the `aliasError` set, to correct and send again.
    case failure(RegistrationParameters)
}

/// Registration at a XignIn-style manager, and activation of the result.
///
/// The seed SDK's blocking `initializationSynchronous(url:)` and `registerSynchronous(data:)` are
/// ``initialization(url:serviceMappingId:)`` and ``register(data:)`` here: `async`, so they never
/// block a thread, and cancellable with their task. Activation (``activate(url:code:pin:)``) and
/// the list of activated managers (``identityManagers()``) complete the flow.
///
/// The activation PIN never leaves the device: it is blinded for the manager's OPRF, and the
/// output becomes a signing key whose public half the manager keeps and whose signature proves the
/// PIN at activation.
public actor Registry {
    /// Makes the transport that reaches the manager at a URL; called for each manager the registry talks to.
    public typealias TransportProvider = @Sendable (URL) -> any TokenServerTransport

    private let transport: TransportProvider
    private let entriesFile: URL

    /// A registry keeping its list of activated managers in `dataDirectory`; `transport` reaches
    /// a manager at a URL (by default over HTTP).
    public init(
        dataDirectory: URL,
        transport: @escaping TransportProvider = { HTTPTransport(baseURL: $0.absoluteString) }
    ) throws {
        try PrivateFiles.createFolder(dataDirectory)
        entriesFile = dataDirectory.appendingPathComponent("identity-managers.json")
        self.transport = transport
    }

    // MARK: - Registration

    /// Fetches what the manager at `url` needs for a registration. `serviceMappingId` names a
    /// linked service to create an account at after the first activation.
    public func initialization(url: URL, serviceMappingId: String? = nil) async throws -> RegistrationParameters {
        var path = "/xignin/v1/configuration"
        if let serviceMappingId,
            let encoded = serviceMappingId.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed)
        {
            path += "?service_mapping_id=\(encoded)"
        }
        let message: ManagerConfigurationMessage = try await call(url, "GET", path)
        return RegistrationParameters(
            managerURL: URL(string: message.managerURL) ?? url,
            endpoint: url,
            serviceMappingID: message.serviceMappingValid ? serviceMappingId : nil,
            pinSpec: PinSpecification(minLength: message.pin.minLength, maxLength: message.pin.maxLength),
            validatorAlias: AliasValidator(minLength: message.alias.minLength, maxLength: message.alias.maxLength),
            categories: message.categories.map { category in
                IdentificationCategory(
                    id: category.id,
                    types: Set(category.types),
                    identificationAttributes: Set(category.identificationAttributes),
                    info: RegistrationPersonalInformation(
                        required: Set(category.required),
                        emailValidator: EmailValidator(maxLength: message.emailMaxLength)
                    )
                )
            }
        )
    }

    /// Sends the filled-in parameters. Refused values come back as ``RegistrationResponse/failure(_:)``
    /// with each attribute's `error`; anything else wrong throws.
    public func register(data: RegistrationParameters) async throws -> RegistrationResponse {
        guard let selection = data.selection else {
            throw RegistrationError(.invalidState, message: "Select an identification category before registering.")
        }
        guard let pin = data.pinSpec.pin else {
            throw RegistrationError(
                .invalidState,
                message: "Set an activation PIN the specification accepts before registering."
            )
        }
        let url = data.endpoint ?? data.managerURL
        let (evaluation, output) = try await evaluate(pin, at: url, activationCode: nil)
        let key = try Self.signingKey(from: output)
        let request = ManagerRegistrationRequest(
            serviceMappingID: data.serviceMappingID,
            category: selection.id,
            attributes: Dictionary(uniqueKeysWithValues: selection.info.values.map { ($0.key.rawValue, $0.value) }),
            alias: data.alias,
            arbitraryAttributes: data.serviceMappingID == nil || data.arbitraryUserAttributes.isEmpty
                ? nil : data.arbitraryUserAttributes,
            pinToken: evaluation.token,
            pinPublicKey: key.publicKey.x963Representation.base64URLEncodedString
        )
        let response = try await send(url, "POST", "/xignin/v1/registrations", body: request)
        if response.status == 422,
            let refusal = try? WireCoding.decode(ManagerRegistrationRefusal.self, from: response.body)
        {
            var refused = data
            var information = selection
            var errors: [PersonalAttribute: AttributeError] = [:]
            for (name, code) in refusal.attributeErrors {
                if let attribute = PersonalAttribute(rawValue: name) { errors[attribute] = code }
            }
            information.info.setErrors(errors)
            refused.selection = information
            // A code this client does not know is still a refusal of the alias.
            refused.aliasError = refusal.aliasError.map { AliasValidator.ResultCode(rawValue: $0) ?? .invalid }
            return .failure(refused)
        }
        let accepted: ManagerRegistrationResponse = try decodeResponse(response)
        return .success(managerUrl: URL(string: accepted.managerURL) ?? url)
    }

    // MARK: - Activation

    /// Activates the registration behind `code` (from the activation e-mail) with the activation
    /// PIN, and remembers the activated manager. A wrong PIN throws
    /// `AuthenticationError.invalidPin` with the remaining attempts; a locked, used or unknown
    /// code throws `RegistrationError.invalidActivationCode`.
    public func activate(url: URL, code: String, pin: String) async throws -> IdentityManagerEntity {
        let (evaluation, output) = try await evaluate(PIN(pin), at: url, activationCode: code)
        guard let nonce = evaluation.nonce.flatMap({ Data(base64URLEncoded: $0) }) else {
            throw GenericError(.requestInvalid, message: "The manager sent no activation nonce.")
        }
        let signature = try Self.signingKey(from: output).signature(
            for: ActivationPinKey.signingInput(token: evaluation.token, nonce: nonce)
        )
        let entity: IdentityManagerEntity = try await call(
            url,
            "POST",
            "/xignin/v1/activations",
            body: ActivationRequest(
                activationCode: code,
                token: evaluation.token,
                signature: signature.derRepresentation.base64URLEncodedString
            )
        )
        var entries = try identityManagers()
        entries.append(entity)
        try PrivateFiles.replace(try WireCoding.encode(entries), at: entriesFile.path)
        return entity
    }

    /// The managers activated on this device, oldest first.
    public func identityManagers() throws -> [IdentityManagerEntity] {
        guard let data = FileManager.default.contents(atPath: entriesFile.path) else { return [] }
        return try WireCoding.decode([IdentityManagerEntity].self, from: data)
    }

    // MARK: - Internals

    /// Blinds the PIN, has the manager evaluate it, and unblinds the answer.
    private func evaluate(
        _ pin: PIN,
        at url: URL,
        activationCode: String?
    ) async throws -> (PinEvaluationResponse, Data) {
        // The manager's key is not known before its first answer: blind against a throwaway key's
        // group (the blinding itself does not depend on the key), then check the proof against the
        // key the manager names.
        let input = pin.withUTF8 { Data($0) }
        let probe = P384._VOPRF.PrivateKey().publicKey
        let blinded = try probe.blind(input)
        let response: PinEvaluationResponse = try await call(
            url,
            "POST",
            "/xignin/v1/pin/evaluate",
            body: PinEvaluationRequest(
                blinded: blinded.blindedElement.oprfRepresentation.base64URLEncodedString,
                activationCode: activationCode
            )
        )
        guard let keyBytes = Data(base64URLEncoded: response.oprfPublicKey),
            let evaluation = Data(base64URLEncoded: response.evaluation),
            let key = try? P384._VOPRF.PublicKey(x963Representation: keyBytes)
        else { throw GenericError(.requestInvalid, message: "The manager's PIN evaluation is malformed.") }
        do {
            return (
                response, try key.finalize(blinded, using: P384._VOPRF.BlindEvaluation(rawRepresentation: evaluation))
            )
        } catch {
            throw GenericError(.requestInvalid, message: "The manager's PIN evaluation does not verify.")
        }
    }

    /// The P-256 key an OPRF output stands for.
    static func signingKey(from output: Data) throws -> P256.Signing.PrivateKey {
        for counter in 0..<8 {
            let bytes = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: output),
                salt: Data(ActivationPinKey.version.utf8),
                info: Data("signing-key|\(counter)".utf8),
                outputByteCount: 32
            ).withUnsafeBytes { Data($0) }
            if let key = try? P256.Signing.PrivateKey(rawRepresentation: bytes) { return key }
        }
        throw GenericError(.unknown, message: "No signing key could be derived from the PIN.")
    }

    private func send(
        _ url: URL,
        _ method: String,
        _ path: String,
        body: (some Encodable & Sendable)? = String?.none
    ) async throws
        -> WireResponse
    {
        var headers = ["Accept": "application/json"]
        var data = Data()
        if let body {
            data = try WireCoding.encode(body)
            headers["Content-Type"] = "application/json"
        }
        return try await transport(url).send(WireRequest(method: method, path: path, headers: headers, body: data))
    }

    private func call<Response: Decodable>(
        _ url: URL,
        _ method: String,
        _ path: String,
        body: (some Encodable & Sendable)? = String?.none
    ) async throws -> Response {
        try decodeResponse(try await send(url, method, path, body: body))
    }

    private func decodeResponse<Response: Decodable>(_ response: WireResponse) throws -> Response {
        guard (200..<300).contains(response.status) else {
            let error = try? WireCoding.decode(ErrorBody.self, from: response.body)
            let message = error?.errorDescription ?? "The manager answered HTTP \(response.status)."
            switch (response.status, error?.error) {
            case (403, "registration_unavailable"): throw RegistrationError(.registrationUnavailable, message: message)
            case (400, "invalid_grant") where (error?.remainingFailureCount ?? 0) > 0:
                throw AuthenticationError(
                    .invalidPin,
                    message: message,
                    details: ErrorDetails(remainingFailureCount: error?.remainingFailureCount)
                )
            case (400, "invalid_grant"): throw RegistrationError(.invalidActivationCode, message: message)
            default: throw GenericError(.requestInvalid, message: "\(message) (HTTP \(response.status))")
            }
        }
        do {
            return try WireCoding.decode(Response.self, from: response.body)
        } catch {
            throw GenericError(.requestInvalid, message: "The manager's answer is malformed.")
        }
    }
}
