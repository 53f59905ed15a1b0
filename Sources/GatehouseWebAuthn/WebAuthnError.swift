/// Why a WebAuthn registration or authentication response was refused.
///
/// Each case names one check of the relying party's procedures (WebAuthn Level 2, §7.1 and §7.2);
/// ``description`` is a sentence for logs. A page should show the user a generic message only.
public enum WebAuthnError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The input is not what the specification describes: bad JSON, base64url, CBOR or layout.
    case malformed(String)
    /// The credential's `type` is not `"public-key"`.
    case wrongCredentialType(String)
    /// The client data's `type` is not the one this ceremony expects (`webauthn.create` or `webauthn.get`).
    case wrongClientDataType(expected: String, received: String)
    /// The client data's challenge is not the one the relying party issued.
    case challengeMismatch
    /// The client data's origin is not one of the relying party's origins.
    case originMismatch(String)
    /// The client data says the ceremony ran in a cross-origin frame.
    case crossOrigin
    /// The client data asks for token binding, which this relying party does not use.
    case tokenBindingNotSupported
    /// The authenticator data's RP ID hash is not SHA-256 of the relying party's ID.
    case relyingPartyMismatch
    /// The authenticator did not test the user's presence (UP flag clear).
    case userNotPresent
    /// The authenticator did not verify the user (UV flag clear); this relying party requires it.
    case userNotVerified
    /// The authenticator says the credential is backed up (BS) but not backup eligible (BE).
    case backupStateWithoutEligibility
    /// The credential's backup eligibility (BE) differs from the one recorded at registration.
    case backupEligibilityChanged(stored: Bool, received: Bool)
    /// A registration's authenticator data carries no attested credential data (AT flag clear).
    case missingAttestedCredentialData
    /// The credential ID in the response does not match (`id`, `rawId`, the authenticator data or
    /// the stored credential).
    case credentialIDMismatch
    /// The credential ID is longer than 1023 bytes.
    case credentialIDTooLong(Int)
    /// The COSE algorithm is not one this relying party accepts (ES256 −7, EdDSA −8, RS256 −257).
    case unsupportedAlgorithm(Int)
    /// The COSE key is not usable: an unsupported key type or curve, a point off the curve, an RSA
    /// modulus shorter than 2048 bits.
    case unsupportedKey(String)
    /// The attestation statement format is not `none` or `packed`.
    case unsupportedAttestationFormat(String)
    /// A packed self attestation's algorithm is not the credential key's.
    case attestationAlgorithmMismatch(statement: Int, credential: Int)
    /// A packed attestation's certificate does not meet the requirements of §8.2.1.
    case invalidAttestationCertificate(String)
    /// A signature (the assertion's or the attestation statement's) does not verify.
    case badSignature
    /// The signature counter did not increase: the authenticator may have been cloned.
    case signCountRegressed(stored: UInt32, received: UInt32)

    /// A sentence that says what was refused.
    public var description: String {
        switch self {
        case .malformed(let detail):
            return "The WebAuthn response is malformed: \(detail)."
        case .wrongCredentialType(let type):
            return "The credential's type is \"\(type)\", not \"public-key\"."
        case .wrongClientDataType(let expected, let received):
            return "The client data's type is \"\(received)\", not \"\(expected)\"."
        case .challengeMismatch:
            return "The client data's challenge is not the one issued for this ceremony."
        case .originMismatch(let origin):
            return "The origin \"\(origin)\" is not one of the relying party's origins."
        case .crossOrigin:
            return "The ceremony ran in a cross-origin frame, which the relying party does not allow."
        case .tokenBindingNotSupported:
            return "The client data asks for token binding, which the relying party does not use."
        case .relyingPartyMismatch:
            return "The authenticator data's RP ID hash is not the relying party's."
        case .userNotPresent:
            return "The authenticator did not test the user's presence."
        case .userNotVerified:
            return "The authenticator did not verify the user, which the relying party requires."
        case .backupStateWithoutEligibility:
            return "The authenticator says the credential is backed up but not backup eligible."
        case .backupEligibilityChanged(let stored, let received):
            return "The credential's backup eligibility changed from \(stored) to \(received)."
        case .missingAttestedCredentialData:
            return "The authenticator data carries no attested credential data."
        case .credentialIDMismatch:
            return "The credential ID does not match."
        case .credentialIDTooLong(let length):
            return "The credential ID is \(length) bytes long; at most 1023 are allowed."
        case .unsupportedAlgorithm(let algorithm):
            return "The COSE algorithm \(algorithm) is not supported (ES256, EdDSA and RS256 are)."
        case .unsupportedKey(let detail):
            return "The credential's public key is not usable: \(detail)."
        case .unsupportedAttestationFormat(let format):
            return "The attestation statement format \"\(format)\" is not supported (none and packed are)."
        case .attestationAlgorithmMismatch(let statement, let credential):
            return "The attestation statement's algorithm \(statement) is not the credential's (\(credential))."
        case .invalidAttestationCertificate(let detail):
            return "The attestation certificate is not acceptable: \(detail)."
        case .badSignature:
            return "The signature does not verify."
        case .signCountRegressed(let stored, let received):
            return
                "The signature counter went from \(stored) to \(received), not up: the authenticator may be cloned."
        }
    }
}
