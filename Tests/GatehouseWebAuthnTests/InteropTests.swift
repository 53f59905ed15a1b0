import Foundation
import GatehouseTesting
import Testing

@testable import GatehouseWebAuthn

/// Interoperability with independent implementations in Python: credentials that `cryptography`
/// and `cbor2` make (and py_webauthn accepts) pass these checks, and what this package's options
/// and test authenticator produce, py_webauthn accepts.
@Suite struct InteropTests {
    /// Whether python3 with py_webauthn, cbor2 and cryptography is at hand.
    static func pythonReady() async -> Bool {
        let probe = try? await ChildProcess.run(
            command: "python3",
            arguments: ["-c", "import webauthn, cbor2, cryptography"]
        )
        return probe?.status == 0
    }

    static let script = """
        import sys, json, hashlib, os, datetime
        import cbor2
        from cryptography import x509
        from cryptography.x509.oid import NameOID, ObjectIdentifier
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa, padding
        from webauthn import verify_registration_response, verify_authentication_response
        from webauthn.helpers import bytes_to_base64url as b64, base64url_to_bytes
        from webauthn.helpers import parse_registration_options_json, parse_authentication_options_json
        from webauthn.helpers.structs import AttestationFormat

        RP_ID, ORIGIN = "localhost", "http://localhost:8080"
        RP_HASH = hashlib.sha256(RP_ID.encode()).digest()

        def cose(private):
            public = private.public_key()
            if isinstance(private, ec.EllipticCurvePrivateKey):
                n = public.public_numbers()
                return {1: 2, 3: -7, -1: 1, -2: n.x.to_bytes(32, "big"), -3: n.y.to_bytes(32, "big")}
            if isinstance(private, ed25519.Ed25519PrivateKey):
                raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
                return {1: 1, 3: -8, -1: 6, -2: raw}
            n = public.public_numbers()
            return {1: 3, 3: -257, -1: n.n.to_bytes((n.n.bit_length() + 7) // 8, "big"), -2: n.e.to_bytes(3, "big")}

        def sign(private, data):
            if isinstance(private, ec.EllipticCurvePrivateKey):
                return private.sign(data, ec.ECDSA(hashes.SHA256()))
            if isinstance(private, ed25519.Ed25519PrivateKey):
                return private.sign(data)
            return private.sign(data, padding.PKCS1v15(), hashes.SHA256())

        def client_data(kind, challenge):
            data = {"type": kind, "challenge": b64(challenge), "origin": ORIGIN, "crossOrigin": False}
            return json.dumps(data, separators=(",", ":")).encode()

        def name(*parts):
            oids = [NameOID.COUNTRY_NAME, NameOID.ORGANIZATION_NAME, NameOID.ORGANIZATIONAL_UNIT_NAME, NameOID.COMMON_NAME]
            return x509.Name([x509.NameAttribute(oid, value) for oid, value in zip(oids, parts)])

        def certificates(aaguid):
            start, end = datetime.datetime(2025, 1, 1), datetime.datetime(2045, 1, 1)
            root_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
            root_name = name("US", "Interop CA", "Roots", "Interop Attestation Root")
            root = (x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name)
                .public_key(root_key.public_key()).serial_number(1).not_valid_before(start).not_valid_after(end)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(root_key, hashes.SHA256()))
            leaf = (x509.CertificateBuilder()
                .subject_name(name("US", "Interop Authenticators", "Authenticator Attestation", "Interop Key"))
                .issuer_name(root_name).public_key(key.public_key()).serial_number(2)
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.UnrecognizedExtension(
                    ObjectIdentifier("1.3.6.1.4.1.45724.1.1.4"), b"\\x04\\x10" + aaguid), critical=False)
                .sign(root_key, hashes.SHA256()))
            return key, leaf, root

        def case(label, private, fmt):
            credential_id, user_handle, aaguid = os.urandom(20), os.urandom(16), os.urandom(16)
            public_key = cbor2.dumps(cose(private))
            challenge = os.urandom(32)
            client = client_data("webauthn.create", challenge)
            flags = 0x01 | 0x04 | 0x08 | 0x10 | 0x40
            auth_data = (RP_HASH + bytes([flags]) + (0).to_bytes(4, "big") + aaguid
                + len(credential_id).to_bytes(2, "big") + credential_id + public_key)
            signed = auth_data + hashlib.sha256(client).digest()
            roots = None
            if fmt == "none":
                statement = {}
            elif fmt == "packed":
                statement = {"alg": cose(private)[3], "sig": sign(private, signed)}
            else:
                key, leaf, root = certificates(aaguid)
                statement = {"alg": -7, "sig": sign(key, signed), "x5c": [leaf.public_bytes(serialization.Encoding.DER)]}
                roots = {AttestationFormat.PACKED: [root.public_bytes(serialization.Encoding.PEM)]}
                fmt = "packed"
            attestation = cbor2.dumps({"fmt": fmt, "attStmt": statement, "authData": auth_data})
            registration = json.dumps({
                "id": b64(credential_id), "rawId": b64(credential_id), "type": "public-key",
                "response": {"clientDataJSON": b64(client), "attestationObject": b64(attestation), "transports": ["usb"]},
                "clientExtensionResults": {}, "authenticatorAttachment": "cross-platform"})
            verified = verify_registration_response(credential=registration, expected_challenge=challenge,
                expected_rp_id=RP_ID, expected_origin=ORIGIN, require_user_verification=True,
                pem_root_certs_bytes_by_fmt=roots)
            assert verified.credential_public_key == public_key

            assertion_challenge = os.urandom(32)
            client = client_data("webauthn.get", assertion_challenge)
            auth_data = RP_HASH + bytes([0x01 | 0x04 | 0x08 | 0x10]) + (5).to_bytes(4, "big")
            signature = sign(private, auth_data + hashlib.sha256(client).digest())
            assertion = json.dumps({
                "id": b64(credential_id), "rawId": b64(credential_id), "type": "public-key",
                "response": {"clientDataJSON": b64(client), "authenticatorData": b64(auth_data),
                    "signature": b64(signature), "userHandle": b64(user_handle)},
                "clientExtensionResults": {}, "authenticatorAttachment": "cross-platform"})
            checked = verify_authentication_response(credential=assertion, expected_challenge=assertion_challenge,
                expected_rp_id=RP_ID, expected_origin=ORIGIN, credential_public_key=public_key,
                credential_current_sign_count=0, require_user_verification=True)
            assert checked.new_sign_count == 5
            return {"label": label, "registration": registration, "registrationChallenge": b64(challenge),
                "assertion": assertion, "assertionChallenge": b64(assertion_challenge),
                "credentialID": b64(credential_id), "publicKey": b64(public_key), "userHandle": b64(user_handle),
                "aaguid": b64(aaguid)}

        theirs = [
            case("ES256 none", ec.generate_private_key(ec.SECP256R1()), "none"),
            case("EdDSA packed self", ed25519.Ed25519PrivateKey.generate(), "packed"),
            case("RS256 packed self", rsa.generate_private_key(public_exponent=65537, key_size=2048), "packed"),
            case("ES256 packed x5c", ec.generate_private_key(ec.SECP256R1()), "x5c"),
        ]

        ours = json.load(sys.stdin)
        parse_registration_options_json(ours["creationOptions"])
        parse_authentication_options_json(ours["requestOptions"])
        for item in ours["credentials"]:
            verified = verify_registration_response(credential=item["registration"],
                expected_challenge=base64url_to_bytes(item["registrationChallenge"]), expected_rp_id=RP_ID,
                expected_origin=ORIGIN, require_user_verification=True)
            checked = verify_authentication_response(credential=item["assertion"],
                expected_challenge=base64url_to_bytes(item["assertionChallenge"]), expected_rp_id=RP_ID,
                expected_origin=ORIGIN, credential_public_key=verified.credential_public_key,
                credential_current_sign_count=verified.sign_count, require_user_verification=True)
            assert checked.new_sign_count == 1, checked.new_sign_count
        print(json.dumps({"theirs": theirs, "oursChecked": len(ours["credentials"])}))
        """

    struct Case: Decodable {
        var label: String
        var registration: String
        var registrationChallenge: String
        var assertion: String
        var assertionChallenge: String
        var credentialID: String
        var publicKey: String
        var userHandle: String
        var aaguid: String
    }

    struct Output: Decodable {
        var theirs: [Case]
        var oursChecked: Int
    }

    @Test
    func credentialsBothWays() async throws {
        // Never skipped: scripts/install-dependencies installs the peer (py_webauthn) and its helpers.
        try #require(
            await Self.pythonReady(),
            "python3 with webauthn, cbor2 and cryptography: run scripts/install-dependencies"
        )
        let party = CeremonyTests.party
        // Ours, for py_webauthn: options and a credential of each kind, registered and used once.
        var credentials: [[String: String]] = []
        for kind in TestKey.Kind.allCases {
            let authenticator = try SoftwareAuthenticator(kind)
            let challenge = randomChallenge()
            var ceremony = Ceremony(challenge: challenge)
            ceremony.format = kind == .p256 ? .none : .packedSelf
            let registration = try authenticator.register(ceremony)
            let assertionChallenge = randomChallenge()
            let assertion = try authenticator.assert(Ceremony(challenge: assertionChallenge))
            credentials.append([
                "registration": String(decoding: registration.json, as: UTF8.self),
                "registrationChallenge": encode(challenge),
                "assertion": String(decoding: assertion.json, as: UTF8.self),
                "assertionChallenge": encode(assertionChallenge),
            ])
        }
        let creationOptions = party.creationOptions(
            user: WebAuthnUser(id: Array("user-1".utf8), name: "ada@example.com", displayName: "Ada"),
            challenge: randomChallenge(),
            excludeCredentials: [[1, 2, 3]]
        )
        let requestOptions = party.requestOptions(challenge: randomChallenge(), allowCredentials: [[4, 5, 6]])
        let input: [String: Any] = [
            "credentials": credentials,
            "creationOptions": try JSONSerialization.jsonObject(with: Data(creationOptions.json.utf8)),
            "requestOptions": try JSONSerialization.jsonObject(with: Data(requestOptions.json.utf8)),
        ]
        // Off the cooperative pool: the script takes seconds, and other tests' servers answer there.
        let python = try await ChildProcess.run(
            command: "timeout",
            arguments: ["120", "python3", "-c", Self.script],
            input: try JSONSerialization.data(withJSONObject: input)
        )
        let (status, output, errors) = (python.status, python.output, python.errorText)
        try #require(status == 0, "python3: \(errors)")
        let result = try JSONDecoder().decode(Output.self, from: output)
        #expect(result.oursChecked == TestKey.Kind.allCases.count)

        // Theirs, for these checks.
        #expect(result.theirs.count == 4)
        for item in result.theirs {
            let challenge = try #require(Base64URL.decode(item.registrationChallenge))
            let credential = try party.verifyRegistration(Array(item.registration.utf8), expectedChallenge: challenge)
            #expect(Base64URL.encode(credential.id) == item.credentialID, "\(item.label)")
            #expect(Base64URL.encode(credential.publicKey) == item.publicKey, "\(item.label)")
            #expect(Base64URL.encode(credential.aaguid) == item.aaguid, "\(item.label)")
            #expect(credential.backupEligible && credential.backedUp && credential.transports == ["usb"])
            switch item.label {
            case "ES256 none": #expect(credential.attestationType == .none && credential.algorithm == .es256)
            case "EdDSA packed self":
                #expect(credential.attestationType == .selfAttestation && credential.algorithm == .edDSA)
            case "RS256 packed self":
                #expect(credential.attestationType == .selfAttestation && credential.algorithm == .rs256)
            default: #expect(credential.attestationType == .basic && credential.attestationCertificates.count == 1)
            }
            let assertion = Array(item.assertion.utf8)
            let reference = try WebAuthnRelyingParty.assertionReference(assertion)
            #expect(
                reference.credentialID == credential.id && reference.userHandle == Base64URL.decode(item.userHandle)
            )
            let result = try party.verifyAuthentication(
                assertion,
                expectedChallenge: try #require(Base64URL.decode(item.assertionChallenge)),
                credential: StoredCredential(credential)
            )
            #expect(result.signCount == 5 && result.backedUp, "\(item.label)")
        }
    }
}
