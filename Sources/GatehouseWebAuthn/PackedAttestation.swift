import Crypto
import SwiftASN1
import X509
import _CryptoExtras

/// The attestation statement formats this relying party verifies (§8).
public enum AttestationFormat: String, Sendable, Hashable, Codable {
    /// `none` (§8.7): no attestation; the attestation statement is empty.
    case none
    /// `packed` (§8.2): self attestation with the credential key, or a signature by an
    /// attestation certificate (`x5c`).
    case packed
}

/// What the attestation statement proves about the authenticator (§6.5.3).
public enum AttestationType: String, Sendable, Hashable, Codable {
    /// No attestation (`none`).
    case none
    /// Self attestation: the credential key signed its own registration; nothing about the model.
    case selfAttestation = "self"
    /// Basic (or attestation CA) attestation by a certificate. The certificate chain is in
    /// ``RegisteredCredential/attestationCertificates``; this relying party has not evaluated it
    /// against any trust anchor.
    case basic
}

/// The `packed` attestation statement's verification procedure (§8.2).
enum PackedAttestation {
    /// The most certificates an `x5c` array may hold.
    static let maximumCertificates = 8

    /// The OID of the FIDO AAGUID certificate extension, id-fido-gen-ce-aaguid.
    static let aaguidExtension: ASN1ObjectIdentifier = [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4]

    /// Verifies `statement` over `authenticatorData` and `clientDataHash`; returns the attestation
    /// type and the certificates (DER), leaf first.
    static func verify(
        _ statement: CBOR,
        authenticatorData: AuthenticatorData,
        credential: AttestedCredentialData,
        clientDataHash: [UInt8]
    ) throws(WebAuthnError) -> (AttestationType, [[UInt8]]) {
        guard case .map = statement else { throw .malformed("the packed attestation statement is not a map") }
        guard let alg = statement["alg"]?.integer else {
            throw .malformed("the packed attestation statement has no integer alg")
        }
        guard case .bytes(let signature)? = statement["sig"] else {
            throw .malformed("the packed attestation statement has no sig")
        }
        guard statement["ecdaaKeyId"] == nil else {
            throw .unsupportedAttestationFormat("packed (ECDAA)")
        }
        let signed = authenticatorData.bytes + clientDataHash
        guard let x5c = statement["x5c"] else {
            // Self attestation: the credential key signs, with its own algorithm.
            guard alg == credential.publicKey.algorithm.rawValue else {
                throw .attestationAlgorithmMismatch(statement: alg, credential: credential.publicKey.algorithm.rawValue)
            }
            guard credential.publicKey.isValidSignature(signature, for: signed) else { throw .badSignature }
            return (.selfAttestation, [])
        }
        guard case .array(let elements) = x5c, !elements.isEmpty, elements.count <= maximumCertificates else {
            throw .malformed("x5c is not an array of 1 to \(maximumCertificates) certificates")
        }
        var chain: [[UInt8]] = []
        for element in elements {
            guard case .bytes(let der) = element else { throw .malformed("an x5c element is not a byte string") }
            chain.append(der)
        }
        guard let algorithm = COSEAlgorithm(rawValue: alg) else { throw .unsupportedAlgorithm(alg) }
        let certificate: Certificate
        do {
            certificate = try Certificate(derEncoded: chain[0])
        } catch {
            throw .invalidAttestationCertificate("it is not a DER X.509 certificate")
        }
        try checkRequirements(of: certificate, aaguid: credential.aaguid)
        let verifier = try verifier(for: certificate.publicKey, algorithm: algorithm)
        guard verifier.isValidSignature(signature, for: signed) else { throw .badSignature }
        return (.basic, chain)
    }

    /// The attestation certificate requirements of §8.2.1, and the AAGUID check of §8.2's
    /// verification procedure.
    static func checkRequirements(of certificate: Certificate, aaguid: [UInt8]) throws(WebAuthnError) {
        guard certificate.version == .v3 else { throw .invalidAttestationCertificate("it is not version 3") }
        func subject(_ type: ASN1ObjectIdentifier) -> [String] {
            certificate.subject.flatMap { $0 }.filter { $0.type == type }.compactMap { String($0.value) }
        }
        let country = subject(.RDNAttributeType.countryName)
        guard country.count == 1, let code = country.first, code.utf8.count == 2,
            code.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) })
        else {
            throw .invalidAttestationCertificate("the subject has no country (C) code")
        }
        guard subject(.RDNAttributeType.organizationName).contains(where: { !$0.isEmpty }) else {
            throw .invalidAttestationCertificate("the subject has no organization (O)")
        }
        guard subject(.RDNAttributeType.organizationalUnitName) == ["Authenticator Attestation"] else {
            throw .invalidAttestationCertificate("the subject's OU is not \"Authenticator Attestation\"")
        }
        guard subject(.RDNAttributeType.commonName).contains(where: { !$0.isEmpty }) else {
            throw .invalidAttestationCertificate("the subject has no common name (CN)")
        }
        let constraints: BasicConstraints?
        do {
            constraints = try certificate.extensions.basicConstraints
        } catch {
            throw .invalidAttestationCertificate("its basic constraints cannot be read")
        }
        if case .isCertificateAuthority? = constraints {
            throw .invalidAttestationCertificate("it is a CA certificate")
        }
        if let extensionValue = certificate.extensions[oid: aaguidExtension] {
            guard !extensionValue.critical else {
                throw .invalidAttestationCertificate("its AAGUID extension is marked critical")
            }
            // extnValue holds the DER encoding of an OCTET STRING of 16 bytes.
            guard Array(extensionValue.value) == [0x04, 0x10] + aaguid else {
                throw .invalidAttestationCertificate("its AAGUID is not the authenticator data's")
            }
        }
    }

    /// A verifier for `algorithm` with the certificate's key; refuses a key of another kind.
    static func verifier(
        for key: Certificate.PublicKey,
        algorithm: COSEAlgorithm
    ) throws(WebAuthnError) -> Verifier {
        switch algorithm {
        case .es256:
            guard let p256 = P256.Signing.PublicKey(key) else {
                throw .invalidAttestationCertificate("its key is not a P-256 key, as ES256 needs")
            }
            return .p256(p256)
        case .edDSA:
            guard let ed25519 = Curve25519.Signing.PublicKey(key) else {
                throw .invalidAttestationCertificate("its key is not an Ed25519 key, as EdDSA needs")
            }
            return .ed25519(ed25519)
        case .rs256:
            guard let rsa = _RSA.Signing.PublicKey(key), rsa.keySizeInBits >= 2048 else {
                throw .invalidAttestationCertificate("its key is not an RSA key of 2048 bits or more, as RS256 needs")
            }
            return .rsa(rsa)
        }
    }
}
