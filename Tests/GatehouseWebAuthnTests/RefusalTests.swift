import Crypto
import Foundation
import Testing

@testable import GatehouseWebAuthn

/// Each check refuses a response that differs from a valid one in one thing, with its own error.
@Suite struct RefusalTests {
    let party = CeremonyTests.party

    /// The error `body` throws, or nil.
    func error<Result>(_ body: () throws(WebAuthnError) -> Result) -> WebAuthnError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }

    /// Registers with `change` applied to an otherwise valid ceremony.
    func register(
        _ kind: TestKey.Kind = .p256,
        expecting expected: WebAuthnError,
        _ change: (inout Ceremony) -> Void = { _ in },
        after tamper: (inout SoftwareAuthenticator.Registration) -> Void = { _ in },
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let authenticator = try SoftwareAuthenticator(kind)
        let challenge = randomChallenge()
        var ceremony = Ceremony(challenge: challenge)
        change(&ceremony)
        var registration = try authenticator.register(ceremony)
        tamper(&registration)
        let json = registration.json
        let thrown = error { () throws(WebAuthnError) in
            try party.verifyRegistration(json, expectedChallenge: challenge)
        }
        #expect(thrown == expected, sourceLocation: sourceLocation)
    }

    /// Registers, then signs in with `change` applied to an otherwise valid ceremony.
    func signIn(
        _ kind: TestKey.Kind = .p256,
        expecting expected: WebAuthnError,
        _ change: (inout Ceremony) -> Void = { _ in },
        stored adjust: (inout StoredCredential) -> Void = { _ in },
        after tamper: (inout SoftwareAuthenticator.Assertion) -> Void = { _ in },
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let authenticator = try SoftwareAuthenticator(kind, counter: 10)
        let challenge = randomChallenge()
        var stored = StoredCredential(
            try party.verifyRegistration(
                try authenticator.register(Ceremony(challenge: challenge)).json,
                expectedChallenge: challenge
            )
        )
        adjust(&stored)
        let signInChallenge = randomChallenge()
        var ceremony = Ceremony(challenge: signInChallenge)
        change(&ceremony)
        var assertion = try authenticator.assert(ceremony)
        tamper(&assertion)
        let json = assertion.json
        let thrown = error { () throws(WebAuthnError) in
            try party.verifyAuthentication(json, expectedChallenge: signInChallenge, credential: stored)
        }
        #expect(thrown == expected, sourceLocation: sourceLocation)
    }

    // MARK: Client data

    @Test func wrongOrigin() throws {
        try register(expecting: .originMismatch("http://localhost:8081")) { $0.origin = "http://localhost:8081" }
        try register(expecting: .originMismatch("http://localhost")) { $0.origin = "http://localhost" }
        try signIn(expecting: .originMismatch("https://evil.example")) { $0.origin = "https://evil.example" }
    }

    @Test func wrongChallenge() throws {
        try register(expecting: .challengeMismatch) { $0.challenge = randomChallenge() }
        try register(expecting: .challengeMismatch) { $0.challenge.removeLast() }
        try signIn(expecting: .challengeMismatch) { $0.challenge[0] ^= 1 }
    }

    @Test func wrongCeremonyType() throws {
        try register(expecting: .wrongClientDataType(expected: "webauthn.create", received: "webauthn.get")) {
            $0.type = "webauthn.get"
        }
        try signIn(expecting: .wrongClientDataType(expected: "webauthn.get", received: "webauthn.create")) {
            $0.type = "webauthn.create"
        }
        try register(expecting: .wrongCredentialType("password")) { $0.credentialType = "password" }
    }

    @Test func crossOriginAndTokenBinding() throws {
        try register(expecting: .crossOrigin) { $0.crossOrigin = true }
        try signIn(expecting: .crossOrigin) { $0.crossOrigin = true }
        try register(expecting: .tokenBindingNotSupported) { $0.tokenBinding = "present" }
    }

    @Test func clientDataThatIsNotJSON() throws {
        try register(
            expecting: .malformed("the client data are not the JSON WebAuthn describes"),
            after: {
                $0.clientDataJSON = Array("{\"type\":\"webauthn.create\"".utf8)
            }
        )
    }

    // MARK: Authenticator data

    @Test func wrongRelyingParty() throws {
        try register(expecting: .relyingPartyMismatch) { $0.rpID = "example.com" }
        try signIn(expecting: .relyingPartyMismatch) { $0.rpID = "localhost." }
    }

    @Test func userNotPresentOrNotVerified() throws {
        try register(expecting: .userNotPresent) { $0.userPresent = false }
        try register(expecting: .userNotVerified) { $0.userVerified = false }
        try signIn(expecting: .userNotPresent) { $0.userPresent = false }
        try signIn(expecting: .userNotVerified) { $0.userVerified = false }
    }

    @Test func backupStateWithoutEligibility() throws {
        try register(expecting: .backupStateWithoutEligibility) { $0.backedUp = true }
        try signIn(expecting: .backupStateWithoutEligibility) { $0.backedUp = true }
    }

    @Test func backupEligibilityChanges() throws {
        try signIn(expecting: .backupEligibilityChanged(stored: false, received: true)) { $0.backupEligible = true }
        try signIn(
            expecting: .backupEligibilityChanged(stored: true, received: false),
            stored: { $0.backupEligible = true }
        )
    }

    @Test func trailingAndTruncatedAuthenticatorData() throws {
        try register(expecting: .malformed("1 bytes after the authenticator data")) {
            $0.authenticatorDataSuffix = [0x00]
        }
        try signIn(expecting: .malformed("2 bytes after the authenticator data")) {
            $0.authenticatorDataSuffix = [0xA0, 0x00]
        }
        try register(
            expecting: .malformed("CBOR length exceeds the input"),
            after: { registration in
                registration.attestationObject = Self.rewriteAuthenticatorData(registration.attestationObject) {
                    $0.removeLast()
                }
            }
        )
        try signIn(
            expecting: .malformed("the authenticator data are shorter than 37 bytes"),
            after: {
                $0.authenticatorData.removeLast()
            }
        )
        // AT clear, yet attested credential data follow.
        try register(
            expecting: .malformed("\(16 + 2 + 32 + 77) bytes after the authenticator data"),
            after: {
                registration in
                registration.attestationObject = Self.rewriteAuthenticatorData(registration.attestationObject) {
                    $0[32] &= ~0x40
                }
            }
        )
    }

    @Test func missingAttestedCredentialData() throws {
        try register(
            expecting: .missingAttestedCredentialData,
            after: { registration in
                registration.attestationObject = Self.rewriteAuthenticatorData(registration.attestationObject) {
                    $0[32] &= ~0x40
                    $0.removeSubrange(37...)
                }
            }
        )
    }

    // MARK: Credential IDs

    @Test func credentialIDsThatDoNotMatch() throws {
        try register(expecting: .credentialIDMismatch, after: { $0.id = encode([1, 2, 3]) })
        try register(expecting: .credentialIDMismatch, after: { $0.rawId = encode([1, 2, 3]) })
        try register(
            expecting: .credentialIDMismatch,
            after: {
                $0.id = encode([1, 2, 3])
                $0.rawId = $0.id
            }
        )
        try signIn(expecting: .credentialIDMismatch, stored: { $0.id[0] ^= 1 })
        try signIn(expecting: .credentialIDMismatch, after: { $0.rawId = encode([7]) })
        try register(
            expecting: .credentialIDTooLong(1024),
            after: {
                $0.id = encode([UInt8](repeating: 7, count: 1024))
                $0.rawId = $0.id
            }
        )
    }

    // MARK: Signatures and counters

    @Test(arguments: TestKey.Kind.allCases)
    func flippedSignature(_ kind: TestKey.Kind) throws {
        try signIn(kind, expecting: .badSignature, after: { $0.signature[$0.signature.count / 2] ^= 0x01 })
        try signIn(kind, expecting: .badSignature, after: { $0.clientDataJSON += Array(" ".utf8) })
        try signIn(kind, expecting: .badSignature, after: { $0.authenticatorData[36] ^= 0x01 })
        try register(
            kind,
            expecting: .badSignature,
            { $0.format = .packedSelf },
            after: { registration in
                registration.attestationObject = Self.rewriteStatement(registration.attestationObject) { signature in
                    signature[signature.count - 1] ^= 0x80
                }
            }
        )
    }

    @Test func signatureByAnotherCredential() throws {
        let other = try SoftwareAuthenticator(.p256)
        try signIn(expecting: .badSignature, stored: { $0.publicKey = other.key.cose.encoded })
    }

    @Test func counterRegressed() throws {
        try signIn(expecting: .signCountRegressed(stored: 10, received: 10)) { $0.signCount = 10 }
        try signIn(expecting: .signCountRegressed(stored: 10, received: 3)) { $0.signCount = 3 }
        try signIn(expecting: .signCountRegressed(stored: 10, received: 0)) { $0.signCount = 0 }
        try signIn(expecting: .signCountRegressed(stored: 50, received: 11), stored: { $0.signCount = 50 })
    }

    // MARK: Attestation

    @Test func unknownFormat() throws {
        try register(expecting: .unsupportedAttestationFormat("fido-u2f")) { $0.format = .other("fido-u2f") }
        try register(expecting: .unsupportedAttestationFormat("tpm")) { $0.format = .other("tpm") }
    }

    @Test func noneWithAStatement() throws {
        try register(
            expecting: .malformed("a none attestation statement is not empty"),
            after: { registration in
                registration.attestationObject = Self.attestationObject(
                    format: "none",
                    statement: .map([(.text("alg"), .int(-7))]),
                    authenticatorData: Self.authenticatorData(in: registration.attestationObject)
                )
            }
        )
    }

    @Test func packedAlgorithmMismatch() throws {
        try register(expecting: .attestationAlgorithmMismatch(statement: -257, credential: -7)) {
            $0.format = .packedSelfWithAlgorithm(-257)
        }
        try register(.ed25519, expecting: .attestationAlgorithmMismatch(statement: -7, credential: -8)) {
            $0.format = .packedSelfWithAlgorithm(-7)
        }
    }

    @Test func packedWithECDAA() throws {
        try register(
            expecting: .unsupportedAttestationFormat("packed (ECDAA)"),
            after: { registration in
                registration.attestationObject = Self.attestationObject(
                    format: "packed",
                    statement: .map([
                        (.text("alg"), .int(-7)), (.text("sig"), .bytes([1])), (.text("ecdaaKeyId"), .bytes([2])),
                    ]),
                    authenticatorData: Self.authenticatorData(in: registration.attestationObject)
                )
            }
        )
    }

    @Test func packedCertificatesThatDoNotQualify() throws {
        let attestationKey = P256.Signing.PrivateKey()
        let issuer = P256.Signing.PrivateKey()
        func check(_ certificate: AttestationCertificate, _ expected: WebAuthnError, aaguid: Bool = true) throws {
            let authenticator = try SoftwareAuthenticator(.p256)
            var certificate = certificate
            if aaguid, certificate.aaguid == nil { certificate.aaguid = authenticator.aaguid }
            let leaf = try certificate.make(for: attestationKey, signedBy: issuer)
            let challenge = randomChallenge()
            var ceremony = Ceremony(challenge: challenge)
            ceremony.format = .packedCertificate(chain: [leaf], key: .p256(attestationKey))
            let json = try authenticator.register(ceremony).json
            #expect(
                error { () throws(WebAuthnError) in try party.verifyRegistration(json, expectedChallenge: challenge) }
                    == expected
            )
        }
        try check(
            AttestationCertificate(organizationalUnit: "Engineering"),
            .invalidAttestationCertificate("the subject's OU is not \"Authenticator Attestation\"")
        )
        try check(
            AttestationCertificate(country: "usa"),
            .invalidAttestationCertificate("the subject has no country (C) code")
        )
        try check(
            AttestationCertificate(certificateAuthority: true),
            .invalidAttestationCertificate("it is a CA certificate")
        )
        try check(
            AttestationCertificate(aaguid: Array(repeating: 1, count: 16)),
            .invalidAttestationCertificate("its AAGUID is not the authenticator data's")
        )
        try check(
            AttestationCertificate(aaguidCritical: true),
            .invalidAttestationCertificate("its AAGUID extension is marked critical")
        )

        // Signed by another key than the certificate's.
        let authenticator = try SoftwareAuthenticator(.p256)
        let leaf = try AttestationCertificate(aaguid: authenticator.aaguid).make(for: attestationKey, signedBy: issuer)
        let challenge = randomChallenge()
        var ceremony = Ceremony(challenge: challenge)
        ceremony.format = .packedCertificate(chain: [leaf], key: .p256(P256.Signing.PrivateKey()))
        let json = try authenticator.register(ceremony).json
        #expect(
            error { () throws(WebAuthnError) in try party.verifyRegistration(json, expectedChallenge: challenge) }
                == .badSignature
        )

        // An EdDSA statement with a P-256 certificate, and a certificate that is not DER.
        ceremony.format = .packedCertificate(chain: [leaf], key: .ed25519(Curve25519.Signing.PrivateKey()))
        let mismatched = try authenticator.register(ceremony).json
        #expect(
            error { () throws(WebAuthnError) in try party.verifyRegistration(mismatched, expectedChallenge: challenge) }
                == .invalidAttestationCertificate("its key is not an Ed25519 key, as EdDSA needs")
        )
        ceremony.format = .packedCertificate(chain: [Array(leaf.dropLast())], key: .p256(attestationKey))
        let truncated = try authenticator.register(ceremony).json
        #expect(
            error { () throws(WebAuthnError) in try party.verifyRegistration(truncated, expectedChallenge: challenge) }
                == .invalidAttestationCertificate("it is not a DER X.509 certificate")
        )
    }

    // MARK: Keys

    @Test func keysThatAreRefused() throws {
        func refusal(_ key: CBORItem) -> WebAuthnError? {
            error { () throws(WebAuthnError) in try COSEKey(bytes: key.encoded) }
        }
        let x = CBORItem.bytes(Array(repeating: 1, count: 32))
        #expect(
            refusal(.map([(.int(1), .int(2)), (.int(3), .int(-35)), (.int(-1), .int(2))])) == .unsupportedAlgorithm(-35)
        )
        #expect(
            refusal(.map([(.int(1), .int(2)), (.int(-1), .int(1))])) == .malformed("the COSE key has no algorithm")
        )
        #expect(
            refusal(.map([(.int(1), .int(2)), (.int(3), .int(-7)), (.int(-1), .int(1)), (.int(-2), x), (.int(-3), x)]))
                == .unsupportedKey("the point is not on the curve P-256")
        )
        #expect(
            refusal(.map([(.int(1), .int(2)), (.int(3), .int(-7)), (.int(-1), .int(2)), (.int(-2), x), (.int(-3), x)]))
                == .unsupportedKey("an ES256 key must be on the curve P-256 (1)")
        )
        #expect(
            refusal(.map([(.int(1), .int(1)), (.int(3), .int(-7)), (.int(-1), .int(6)), (.int(-2), x)]))
                == .unsupportedKey("key type 1 does not go with algorithm -7")
        )
        #expect(
            refusal(.map([(.int(1), .int(1)), (.int(3), .int(-8)), (.int(-1), .int(7)), (.int(-2), x)]))
                == .unsupportedKey("an EdDSA key must be on the curve Ed25519 (6)")
        )
        let small = CBORItem.map([
            (.int(1), .int(3)), (.int(3), .int(-257)),
            (.int(-1), .bytes([0xC1] + Array(repeating: 0x5A, count: 127))), (.int(-2), .bytes([1, 0, 1])),
        ])
        #expect(refusal(small) == .unsupportedKey("the RSA modulus is shorter than 2048 bits"))

        // A registration with a 1024-bit RSA key says so.
        try register(
            .rsa,
            expecting: .unsupportedKey("the RSA modulus is shorter than 2048 bits"),
            after: { registration in
                registration.attestationObject = Self.rewriteAuthenticatorData(registration.attestationObject) { data in
                    let keyStart = 37 + 16 + 2 + 32
                    data = Array(data[..<keyStart]) + small.encoded
                }
            }
        )
    }

    @Test func responsesThatAreNotJSONOrTooLarge() throws {
        let challenge = randomChallenge()
        for body in ["", "[]", "{\"id\":\"AA\"}", "{\"id\":\"A A\",\"type\":\"public-key\",\"response\":{}}"] {
            #expect(throws: WebAuthnError.self) {
                try party.verifyRegistration(Array(body.utf8), expectedChallenge: challenge)
            }
        }
        let huge = [UInt8](repeating: 0x20, count: WebAuthnRelyingParty.maximumResponseSize + 1)
        #expect(
            error { () throws(WebAuthnError) in try party.verifyRegistration(huge, expectedChallenge: challenge) }
                == .malformed("the response is longer than 65536 bytes")
        )
    }

    @Test func trailingBytesAfterTheAttestationObject() throws {
        try register(expecting: .malformed("1 bytes after the CBOR item"), after: { $0.attestationObject += [0x00] })
    }

    // MARK: Rewriting attestation objects

    static func authenticatorData(in attestationObject: [UInt8]) -> [UInt8] {
        guard let decoded = try? CBORDecoder.decode(attestationObject), case .bytes(let data)? = decoded["authData"]
        else { return [] }
        return data
    }

    static func attestationObject(format: String, statement: CBORItem, authenticatorData: [UInt8]) -> [UInt8] {
        CBORItem.map([
            (.text("fmt"), .text(format)), (.text("attStmt"), statement),
            (.text("authData"), .bytes(authenticatorData)),
        ]).encoded
    }

    /// The attestation object with its authenticator data changed (format none: nothing signs it).
    static func rewriteAuthenticatorData(_ object: [UInt8], _ change: (inout [UInt8]) -> Void) -> [UInt8] {
        var data = authenticatorData(in: object)
        change(&data)
        return attestationObject(format: "none", statement: .map([]), authenticatorData: data)
    }

    /// The attestation object with its packed statement's signature changed.
    static func rewriteStatement(_ object: [UInt8], _ change: (inout [UInt8]) -> Void) -> [UInt8] {
        guard let decoded = try? CBORDecoder.decode(object), case .bytes(var signature)? = decoded["attStmt"]?["sig"],
            let alg = decoded["attStmt"]?["alg"]?.integer
        else { return object }
        change(&signature)
        return attestationObject(
            format: "packed",
            statement: .map([(.text("alg"), .int(alg)), (.text("sig"), .bytes(signature))]),
            authenticatorData: authenticatorData(in: object)
        )
    }
}
