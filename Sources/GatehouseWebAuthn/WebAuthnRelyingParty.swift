import Crypto
import Foundation
import GatehouseKernel

/// The relying party's side of WebAuthn Level 2 for passkeys: the options a page passes to
/// `navigator.credentials.create` and `.get`, and the checks of their responses (§7.1, §7.2).
///
/// It asks for discoverable credentials with user verification and accepts ES256, EdDSA (Ed25519)
/// and RS256 keys, with attestation `none` or `packed`. Challenges are the caller's: make each
/// one with at least 16 random bytes, keep it with the ceremony (a session), and use it once.
///
/// ```swift
/// let party = WebAuthnRelyingParty(id: "localhost", name: "Gatehouse", origins: ["http://localhost:8080"])
/// let options = party.creationOptions(user: user, challenge: challenge)   // options.json to the page
/// let credential = try party.verifyRegistration(body, expectedChallenge: challenge)
/// // store StoredCredential(credential) with the account; at sign-in:
/// let result = try party.verifyAuthentication(body, expectedChallenge: challenge, credential: stored)
/// // store result.signCount
/// ```
public struct WebAuthnRelyingParty: Sendable, Hashable {
    /// The RP ID: a registrable domain suffix of the origins' host, such as `"localhost"` or
    /// `"example.com"`.
    public let id: String
    /// The relying party's name for people.
    public let name: String
    /// The exact origins (scheme, host and port if not the default) the ceremonies may run on,
    /// such as `"http://localhost:8080"` or `"https://login.example.com"`.
    public let origins: Set<String>

    /// The algorithms the options offer and the checks accept, preferred first.
    public static let algorithms: [COSEAlgorithm] = [.es256, .edDSA, .rs256]

    /// The largest response JSON the checks read, in bytes.
    public static let maximumResponseSize = 64 * 1024

    /// A relying party with the RP ID `id` on `origins`.
    public init(id: String, name: String, origins: Set<String>) {
        self.id = id
        self.name = name
        self.origins = origins
    }

    // MARK: Options

    /// The options for `navigator.credentials.create({publicKey})`: a discoverable credential
    /// with user verification, for `user`.
    ///
    /// - Parameters:
    ///   - user: The account; its `id` is the user handle.
    ///   - challenge: The challenge, at least 16 random bytes, kept for ``verifyRegistration(_:expectedChallenge:)``.
    ///   - excludeCredentials: The IDs of the user's credentials already registered.
    ///   - timeout: How long the client waits for the user.
    ///   - attestation: The attestation conveyance preference.
    public func creationOptions(
        user: WebAuthnUser,
        challenge: [UInt8],
        excludeCredentials: [[UInt8]] = [],
        timeout: Duration = .seconds(300),
        attestation: AttestationConveyance = .none
    ) -> WebAuthnCreationOptions {
        WebAuthnCreationOptions(
            rp: .init(id: id, name: name),
            user: .init(id: Base64URL.encode(user.id), name: user.name, displayName: user.displayName),
            challenge: Base64URL.encode(challenge),
            pubKeyCredParams: Self.algorithms.map { .init(type: "public-key", alg: $0.rawValue) },
            timeout: milliseconds(timeout),
            excludeCredentials: excludeCredentials.map(WebAuthnCredentialDescriptor.init(id:)),
            authenticatorSelection: .init(
                residentKey: "required",
                requireResidentKey: true,
                userVerification: "required"
            ),
            attestation: attestation.rawValue
        )
    }

    /// The options for `navigator.credentials.get({publicKey})`, with user verification.
    ///
    /// - Parameters:
    ///   - challenge: The challenge, at least 16 random bytes, kept for
    ///     ``verifyAuthentication(_:expectedChallenge:credential:)``.
    ///   - allowCredentials: The credentials that may answer; empty to let the user pick a passkey.
    ///   - timeout: How long the client waits for the user.
    public func requestOptions(
        challenge: [UInt8],
        allowCredentials: [[UInt8]] = [],
        timeout: Duration = .seconds(300)
    ) -> WebAuthnRequestOptions {
        WebAuthnRequestOptions(
            challenge: Base64URL.encode(challenge),
            timeout: milliseconds(timeout),
            rpId: id,
            allowCredentials: allowCredentials.map(WebAuthnCredentialDescriptor.init(id:)),
            userVerification: "required"
        )
    }

    // MARK: Registration

    /// Checks a registration response (§7.1) and returns the credential to store.
    ///
    /// - Parameters:
    ///   - json: The `PublicKeyCredential` in the JSON form (`RegistrationResponseJSON`, what
    ///     `credential.toJSON()` gives): `{id, rawId, type, response: {clientDataJSON,
    ///     attestationObject, transports?}, …}` with base64url fields.
    ///   - expectedChallenge: The challenge of the creation options.
    /// - Throws: ``WebAuthnError`` naming the first check that failed.
    ///
    /// The caller still checks that no other account has the credential ID.
    public func verifyRegistration(
        _ json: some Collection<UInt8>,
        expectedChallenge: [UInt8]
    ) throws(WebAuthnError) -> RegisteredCredential {
        let response = try Self.decode(RegistrationResponseJSON.self, from: json)
        let credentialID = try Self.credentialID(id: response.id, rawId: response.rawId, type: response.type)
        let clientDataJSON = try Self.binary(response.response.clientDataJSON, "clientDataJSON")
        try checkClientData(clientDataJSON, type: "webauthn.create", challenge: expectedChallenge)

        let attestationObject = try CBORDecoder.decode(
            try Self.binary(response.response.attestationObject, "attestationObject")
        )
        guard case .map = attestationObject else { throw .malformed("the attestation object is not a map") }
        guard case .text(let format)? = attestationObject["fmt"] else {
            throw .malformed("the attestation object has no fmt")
        }
        guard case .bytes(let authenticatorDataBytes)? = attestationObject["authData"] else {
            throw .malformed("the attestation object has no authData")
        }
        guard let statement = attestationObject["attStmt"], case .map(let statementEntries) = statement else {
            throw .malformed("the attestation object has no attStmt map")
        }
        let authenticatorData = try AuthenticatorData(bytes: authenticatorDataBytes)
        try checkAuthenticatorData(authenticatorData)
        guard let attested = authenticatorData.attestedCredentialData else { throw .missingAttestedCredentialData }
        guard Self.algorithms.contains(attested.publicKey.algorithm) else {
            throw .unsupportedAlgorithm(attested.publicKey.algorithm.rawValue)
        }
        guard attested.credentialID == credentialID else { throw .credentialIDMismatch }

        let attestationFormat: AttestationFormat
        let attestationType: AttestationType
        let certificates: [[UInt8]]
        switch format {
        case "none":
            guard statementEntries.isEmpty else { throw .malformed("a none attestation statement is not empty") }
            (attestationFormat, attestationType, certificates) = (.none, .none, [])
        case "packed":
            (attestationType, certificates) = try PackedAttestation.verify(
                statement,
                authenticatorData: authenticatorData,
                credential: attested,
                clientDataHash: Array(SHA256.hash(data: clientDataJSON))
            )
            attestationFormat = .packed
        default:
            throw .unsupportedAttestationFormat(format)
        }
        let transports = response.response.transports ?? []
        guard transports.count <= 16, transports.allSatisfy({ $0.utf8.count <= 64 }) else {
            throw .malformed("the transports are too many or too long")
        }
        return RegisteredCredential(
            id: credentialID,
            publicKey: attested.publicKey.bytes,
            algorithm: attested.publicKey.algorithm,
            signCount: authenticatorData.signCount,
            userVerified: authenticatorData.flags.contains(.userVerified),
            backupEligible: authenticatorData.flags.contains(.backupEligible),
            backedUp: authenticatorData.flags.contains(.backedUp),
            aaguid: attested.aaguid,
            attestationFormat: attestationFormat,
            attestationType: attestationType,
            attestationCertificates: certificates,
            transports: transports
        )
    }

    // MARK: Authentication

    /// Reads the credential ID and user handle of an authentication response without checking
    /// anything else, to find the stored credential for
    /// ``verifyAuthentication(_:expectedChallenge:credential:)``.
    public static func assertionReference(_ json: some Collection<UInt8>) throws(WebAuthnError) -> AssertionReference {
        let response = try decode(AuthenticationResponseJSON.self, from: json)
        let credentialID = try credentialID(id: response.id, rawId: response.rawId, type: response.type)
        return AssertionReference(
            credentialID: credentialID,
            userHandle: try userHandle(response.response.userHandle)
        )
    }

    /// Checks an authentication response (§7.2) against the stored credential.
    ///
    /// - Parameters:
    ///   - json: The `PublicKeyCredential` in the JSON form (`AuthenticationResponseJSON`):
    ///     `{id, rawId, type, response: {clientDataJSON, authenticatorData, signature,
    ///     userHandle?}, …}` with base64url fields.
    ///   - expectedChallenge: The challenge of the request options.
    ///   - credential: The stored credential whose ID the response names.
    /// - Returns: The result; store its ``AuthenticationResult/signCount``.
    /// - Throws: ``WebAuthnError`` naming the first check that failed.
    ///
    /// The caller still checks that the credential belongs to the user being signed in, and that
    /// a returned user handle is that user's.
    public func verifyAuthentication(
        _ json: some Collection<UInt8>,
        expectedChallenge: [UInt8],
        credential: StoredCredential
    ) throws(WebAuthnError) -> AuthenticationResult {
        let response = try Self.decode(AuthenticationResponseJSON.self, from: json)
        let credentialID = try Self.credentialID(id: response.id, rawId: response.rawId, type: response.type)
        guard credentialID == credential.id else { throw .credentialIDMismatch }
        let clientDataJSON = try Self.binary(response.response.clientDataJSON, "clientDataJSON")
        let authenticatorDataBytes = try Self.binary(response.response.authenticatorData, "authenticatorData")
        let signature = try Self.binary(response.response.signature, "signature")
        let userHandle = try Self.userHandle(response.response.userHandle)
        try checkClientData(clientDataJSON, type: "webauthn.get", challenge: expectedChallenge)

        let authenticatorData = try AuthenticatorData(bytes: authenticatorDataBytes)
        try checkAuthenticatorData(authenticatorData)
        let backupEligible = authenticatorData.flags.contains(.backupEligible)
        guard backupEligible == credential.backupEligible else {
            throw .backupEligibilityChanged(stored: credential.backupEligible, received: backupEligible)
        }
        let key = try COSEKey(bytes: credential.publicKey)
        let signed = authenticatorDataBytes + SHA256.hash(data: clientDataJSON)
        guard key.isValidSignature(signature, for: signed) else { throw .badSignature }
        let received = authenticatorData.signCount
        if received != 0 || credential.signCount != 0, received <= credential.signCount {
            throw .signCountRegressed(stored: credential.signCount, received: received)
        }
        return AuthenticationResult(
            credentialID: credentialID,
            signCount: received,
            userVerified: authenticatorData.flags.contains(.userVerified),
            backupEligible: backupEligible,
            backedUp: authenticatorData.flags.contains(.backedUp),
            userHandle: userHandle
        )
    }

    // MARK: Checks both ceremonies share

    /// §7.1 steps 5–10 and §7.2 steps 9–14: the client data's type, challenge, origin, frame and
    /// token binding.
    func checkClientData(_ bytes: [UInt8], type: String, challenge: [UInt8]) throws(WebAuthnError) {
        let clientData: ClientData
        do {
            clientData = try JSONDecoder().decode(ClientData.self, from: Data(bytes))
        } catch {
            throw .malformed("the client data are not the JSON WebAuthn describes")
        }
        guard clientData.type == type else { throw .wrongClientDataType(expected: type, received: clientData.type) }
        guard let received = Base64URL.decode(clientData.challenge), ConstantTime.equals(received, challenge) else {
            throw .challengeMismatch
        }
        guard origins.contains(clientData.origin) else { throw .originMismatch(clientData.origin) }
        guard clientData.crossOrigin != true else { throw .crossOrigin }
        guard clientData.tokenBinding?.status != "present" else { throw .tokenBindingNotSupported }
    }

    /// The RP ID hash and the UP, UV, BE and BS flags (§7.1 steps 13–16, §7.2 steps 15–18).
    func checkAuthenticatorData(_ data: AuthenticatorData) throws(WebAuthnError) {
        guard ConstantTime.equals(data.rpIDHash, Array(SHA256.hash(data: Array(id.utf8)))) else {
            throw .relyingPartyMismatch
        }
        guard data.flags.contains(.userPresent) else { throw .userNotPresent }
        guard data.flags.contains(.userVerified) else { throw .userNotVerified }
        if data.flags.contains(.backedUp), !data.flags.contains(.backupEligible) {
            throw .backupStateWithoutEligibility
        }
    }

    // MARK: Reading the JSON

    static func decode<Response: Decodable>(
        _ type: Response.Type,
        from json: some Collection<UInt8>
    ) throws(WebAuthnError) -> Response {
        guard json.count <= maximumResponseSize else {
            throw .malformed("the response is longer than \(maximumResponseSize) bytes")
        }
        do {
            return try JSONDecoder().decode(type, from: Data(json))
        } catch {
            throw .malformed("the response is not the JSON form of a public key credential")
        }
    }

    /// The credential ID `id` and `rawId` both give, for a credential of type `"public-key"`.
    static func credentialID(id: String, rawId: String?, type: String) throws(WebAuthnError) -> [UInt8] {
        guard type == "public-key" else { throw .wrongCredentialType(type) }
        let identifier = try binary(id, "id")
        if let rawId {
            guard try binary(rawId, "rawId") == identifier else { throw .credentialIDMismatch }
        }
        guard identifier.count <= 1023 else { throw .credentialIDTooLong(identifier.count) }
        guard !identifier.isEmpty else { throw .malformed("the credential ID is empty") }
        return identifier
    }

    /// The user handle's bytes; nil when absent, null or empty.
    static func userHandle(_ text: String?) throws(WebAuthnError) -> [UInt8]? {
        guard let text, !text.isEmpty else { return nil }
        return try binary(text, "userHandle")
    }

    static func binary(_ text: String, _ member: String) throws(WebAuthnError) -> [UInt8] {
        guard let bytes = Base64URL.decode(text) else { throw .malformed("\(member) is not base64url") }
        return bytes
    }
}

/// `RegistrationResponseJSON`.
struct RegistrationResponseJSON: Decodable {
    struct Response: Decodable {
        var clientDataJSON: String
        var attestationObject: String
        var transports: [String]?
    }

    var id: String
    var rawId: String?
    var type: String
    var response: Response
}

/// `AuthenticationResponseJSON`.
struct AuthenticationResponseJSON: Decodable {
    struct Response: Decodable {
        var clientDataJSON: String
        var authenticatorData: String
        var signature: String
        var userHandle: String?
    }

    var id: String
    var rawId: String?
    var type: String
    var response: Response
}

/// `CollectedClientData` (§5.8.1), the members the checks read.
struct ClientData: Decodable {
    struct TokenBinding: Decodable {
        var status: String
    }

    var type: String
    var challenge: String
    var origin: String
    var crossOrigin: Bool?
    var tokenBinding: TokenBinding?
}
