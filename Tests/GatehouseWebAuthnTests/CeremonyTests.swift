import Crypto
import Foundation
import Testing

@testable import GatehouseWebAuthn

/// Registration and sign-in with a software authenticator, for every key type and attestation.
@Suite struct CeremonyTests {
    static let party = WebAuthnRelyingParty(
        id: Ceremony.rpID,
        name: "Gatehouse",
        origins: [Ceremony.origin, "https://login.example.com"]
    )

    enum Attestation: String, CaseIterable, CustomStringConvertible {
        case none, packedSelf
        var description: String { rawValue }
    }

    @Test(arguments: TestKey.Kind.allCases, Attestation.allCases)
    func registersAndSignsIn(_ kind: TestKey.Kind, attestation: Attestation) throws {
        let authenticator = try SoftwareAuthenticator(kind)
        let challenge = randomChallenge()
        var ceremony = Ceremony(challenge: challenge)
        ceremony.format = attestation == .none ? .none : .packedSelf
        ceremony.backupEligible = true
        ceremony.backedUp = true
        let registration = try authenticator.register(ceremony)
        let credential = try Self.party.verifyRegistration(registration.json, expectedChallenge: challenge)
        #expect(credential.id == authenticator.credentialID)
        #expect(credential.algorithm.rawValue == authenticator.key.algorithm)
        #expect(credential.publicKey == authenticator.key.cose.encoded)
        #expect(credential.signCount == 0)
        #expect(credential.userVerified && credential.backupEligible && credential.backedUp)
        #expect(credential.aaguid == authenticator.aaguid)
        #expect(credential.attestationFormat == (attestation == .none ? .none : .packed))
        #expect(credential.attestationType == (attestation == .none ? .none : .selfAttestation))
        #expect(credential.attestationCertificates.isEmpty)
        #expect(credential.transports == ["internal", "hybrid"])

        var stored = StoredCredential(credential)
        for round in 1...3 {
            let signInChallenge = randomChallenge()
            var signIn = Ceremony(challenge: signInChallenge)
            signIn.backupEligible = true
            signIn.backedUp = round != 2
            let assertion = try authenticator.assert(signIn)
            let reference = try WebAuthnRelyingParty.assertionReference(assertion.json)
            #expect(reference.credentialID == authenticator.credentialID)
            #expect(reference.userHandle == authenticator.userHandle)
            let result = try Self.party.verifyAuthentication(
                assertion.json,
                expectedChallenge: signInChallenge,
                credential: stored
            )
            #expect(result.credentialID == authenticator.credentialID)
            #expect(result.signCount == UInt32(round))
            #expect(result.userVerified && result.backupEligible)
            #expect(result.backedUp == (round != 2))
            #expect(result.userHandle == authenticator.userHandle)
            stored.signCount = result.signCount
        }
    }

    @Test func anAuthenticatorWithoutACounterSignsInAgainAndAgain() throws {
        let authenticator = try SoftwareAuthenticator(.p256)
        authenticator.counterStep = 0
        let challenge = randomChallenge()
        let credential = try Self.party.verifyRegistration(
            try authenticator.register(Ceremony(challenge: challenge)).json,
            expectedChallenge: challenge
        )
        for _ in 0..<2 {
            let signInChallenge = randomChallenge()
            let result = try Self.party.verifyAuthentication(
                try authenticator.assert(Ceremony(challenge: signInChallenge)).json,
                expectedChallenge: signInChallenge,
                credential: StoredCredential(credential)
            )
            #expect(result.signCount == 0)
        }
    }

    @Test func anotherOfTheOriginsAndAPaddedAssertionWithoutRawIDAreAccepted() throws {
        let authenticator = try SoftwareAuthenticator(.ed25519)
        let challenge = randomChallenge()
        var ceremony = Ceremony(challenge: challenge)
        ceremony.origin = "https://login.example.com"
        ceremony.crossOrigin = nil
        let credential = try Self.party.verifyRegistration(
            try authenticator.register(ceremony).json,
            expectedChallenge: challenge
        )
        let signInChallenge = randomChallenge()
        var assertion = try authenticator.assert(Ceremony(challenge: signInChallenge))
        assertion.userHandle = nil
        var object = try #require(try JSONSerialization.jsonObject(with: Data(assertion.json)) as? [String: Any])
        object["rawId"] = nil
        object["id"] = Data(authenticator.credentialID).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        let json = Array(try JSONSerialization.data(withJSONObject: object))
        let result = try Self.party.verifyAuthentication(
            json,
            expectedChallenge: signInChallenge,
            credential: StoredCredential(credential)
        )
        #expect(result.userHandle == nil)
        #expect(try WebAuthnRelyingParty.assertionReference(json).userHandle == nil)
    }

    @Test func storedKeysAreReadAgain() throws {
        for kind in TestKey.Kind.allCases {
            let key = try TestKey.make(kind)
            let parsed = try COSEKey(bytes: key.cose.encoded)
            #expect(parsed.algorithm.rawValue == key.algorithm)
            #expect(parsed.bytes == key.cose.encoded)
            let message = Array("message".utf8)
            let signature = try key.sign(message)
            #expect(parsed.isValidSignature(signature, for: message))
            #expect(!parsed.isValidSignature(signature, for: Array("massage".utf8)))
            #expect(throws: WebAuthnError.self) { try COSEKey(bytes: key.cose.encoded + [0]) }
        }
    }

    @Test func packedAttestationWithACertificate() throws {
        let authenticator = try SoftwareAuthenticator(.p256)
        let attestationKey = P256.Signing.PrivateKey()
        let leaf = try AttestationCertificate(aaguid: authenticator.aaguid).make(
            for: attestationKey,
            signedBy: P256.Signing.PrivateKey()
        )
        let challenge = randomChallenge()
        var ceremony = Ceremony(challenge: challenge)
        ceremony.format = .packedCertificate(chain: [leaf], key: .p256(attestationKey))
        let credential = try Self.party.verifyRegistration(
            try authenticator.register(ceremony).json,
            expectedChallenge: challenge
        )
        #expect(credential.attestationFormat == .packed)
        #expect(credential.attestationType == .basic)
        #expect(credential.attestationCertificates == [leaf])

        // Without the AAGUID extension, and with an RSA credential key: still basic.
        let rsa = try SoftwareAuthenticator(.rsa)
        let plain = try AttestationCertificate().make(for: attestationKey, signedBy: P256.Signing.PrivateKey())
        var other = Ceremony(challenge: challenge)
        other.format = .packedCertificate(chain: [plain, leaf], key: .p256(attestationKey))
        let second = try Self.party.verifyRegistration(try rsa.register(other).json, expectedChallenge: challenge)
        #expect(second.attestationType == .basic && second.attestationCertificates.count == 2)
    }

    @Test func optionsInTheJSONForm() throws {
        let challenge: [UInt8] = Array(0..<32)
        let options = Self.party.creationOptions(
            user: WebAuthnUser(id: [1, 2, 3, 250], name: "ada@example.com", displayName: "Ada <Lovelace> & Co"),
            challenge: challenge,
            excludeCredentials: [[9, 9, 9]],
            timeout: .seconds(120)
        )
        #expect(!options.json.contains("<") && !options.json.contains(">") && !options.json.contains("&"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(options.json.utf8)) as? [String: Any])
        let rp = try #require(object["rp"] as? [String: Any])
        #expect(rp["id"] as? String == "localhost" && rp["name"] as? String == "Gatehouse")
        let user = try #require(object["user"] as? [String: Any])
        #expect(user["id"] as? String == "AQID-g")
        #expect(user["displayName"] as? String == "Ada <Lovelace> & Co")
        #expect(object["challenge"] as? String == encode(challenge))
        let parameters = try #require(object["pubKeyCredParams"] as? [[String: Any]])
        #expect(parameters.compactMap { $0["alg"] as? Int } == [-7, -8, -257])
        #expect(parameters.allSatisfy { $0["type"] as? String == "public-key" })
        #expect(object["timeout"] as? Int == 120_000)
        let excluded = try #require(object["excludeCredentials"] as? [[String: Any]])
        #expect(
            excluded.count == 1 && excluded[0]["id"] as? String == "CQkJ"
                && excluded[0]["type"] as? String == "public-key"
        )
        let selection = try #require(object["authenticatorSelection"] as? [String: Any])
        #expect(selection["residentKey"] as? String == "required")
        #expect(selection["requireResidentKey"] as? Bool == true)
        #expect(selection["userVerification"] as? String == "required")
        #expect(object["attestation"] as? String == "none")
        #expect(
            Self.party.creationOptions(
                user: WebAuthnUser(id: [1], name: "a", displayName: "a"),
                challenge: challenge,
                attestation: .direct
            ).attestation == "direct"
        )

        let request = Self.party.requestOptions(
            challenge: challenge,
            allowCredentials: [[0xFB, 0xFF]],
            timeout: .milliseconds(1500)
        )
        let requestObject = try #require(
            try JSONSerialization.jsonObject(with: Data(request.json.utf8)) as? [String: Any]
        )
        #expect(requestObject["rpId"] as? String == "localhost")
        #expect(requestObject["challenge"] as? String == encode(challenge))
        #expect(requestObject["timeout"] as? Int == 1500)
        #expect(requestObject["userVerification"] as? String == "required")
        let allowed = try #require(requestObject["allowCredentials"] as? [[String: Any]])
        #expect(allowed.count == 1 && allowed[0]["id"] as? String == "-_8")
        #expect(Self.party.requestOptions(challenge: challenge).allowCredentials.isEmpty)
    }
}
