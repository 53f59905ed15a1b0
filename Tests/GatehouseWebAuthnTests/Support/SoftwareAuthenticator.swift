import Crypto
import Foundation
import Synchronization
import _CryptoExtras

/// A credential key of the test authenticator, with its COSE form and signatures as WebAuthn
/// sends them.
enum TestKey {
    case p256(P256.Signing.PrivateKey)
    case ed25519(Curve25519.Signing.PrivateKey)
    case rsa(_RSA.Signing.PrivateKey)

    static func make(_ kind: Kind) throws -> TestKey {
        switch kind {
        case .p256: return .p256(P256.Signing.PrivateKey())
        case .ed25519: return .ed25519(Curve25519.Signing.PrivateKey())
        case .rsa: return .rsa(try RSAKeys.shared())
        }
    }

    enum Kind: String, CaseIterable, CustomStringConvertible {
        case p256, ed25519, rsa
        var description: String { rawValue }
    }

    var algorithm: Int {
        switch self {
        case .p256: return -7
        case .ed25519: return -8
        case .rsa: return -257
        }
    }

    /// The public key as a COSE_Key map (RFC 8152 §13, RFC 8230).
    var cose: CBORItem {
        switch self {
        case .p256(let key):
            let point = Array(key.publicKey.x963Representation)
            return .map([
                (.int(1), .int(2)), (.int(3), .int(-7)), (.int(-1), .int(1)),
                (.int(-2), .bytes(Array(point[1..<33]))), (.int(-3), .bytes(Array(point[33..<65]))),
            ])
        case .ed25519(let key):
            return .map([
                (.int(1), .int(1)), (.int(3), .int(-8)), (.int(-1), .int(6)),
                (.int(-2), .bytes(Array(key.publicKey.rawRepresentation))),
            ])
        case .rsa(let key):
            let primitives = try? key.publicKey.getKeyPrimitives()
            return .map([
                (.int(1), .int(3)), (.int(3), .int(-257)),
                (.int(-1), .bytes(Array(primitives?.modulus ?? Data()))),
                (.int(-2), .bytes(Array(primitives?.publicExponent ?? Data()))),
            ])
        }
    }

    func sign(_ data: [UInt8]) throws -> [UInt8] {
        switch self {
        case .p256(let key): return Array(try key.signature(for: data).derRepresentation)
        case .ed25519(let key): return Array(try key.signature(for: data))
        case .rsa(let key): return Array(try key.signature(for: data, padding: .insecurePKCS1v1_5).rawRepresentation)
        }
    }
}

/// RSA keys take a while to make: the tests share a few.
enum RSAKeys {
    private static let keys: [_RSA.Signing.PrivateKey] = (0..<2).compactMap { _ in
        try? _RSA.Signing.PrivateKey(keySize: .bits2048)
    }
    private static let counter = Mutex(0)

    static func shared() throws -> _RSA.Signing.PrivateKey {
        guard !keys.isEmpty else { throw CocoaError(.featureUnsupported) }
        let index = counter.withLock { value in
            value += 1
            return value
        }
        return keys[index % keys.count]
    }
}

/// What a test changes about one ceremony; the defaults make a valid one.
struct Ceremony {
    static let origin = "http://localhost:8080"
    static let rpID = "localhost"

    var challenge: [UInt8]
    var type: String? = nil
    var origin = Ceremony.origin
    var rpID = Ceremony.rpID
    var crossOrigin: Bool? = false
    var tokenBinding: String? = nil
    var userPresent = true
    var userVerified = true
    var backupEligible = false
    var backedUp = false
    var signCount: UInt32? = nil
    var format = Format.none
    /// Bytes appended to the authenticator data before it is signed.
    var authenticatorDataSuffix: [UInt8] = []
    var credentialType = "public-key"

    enum Format {
        case none
        case packedSelf
        /// Packed self attestation whose statement names another algorithm.
        case packedSelfWithAlgorithm(Int)
        /// Packed with a certificate: the chain (leaf first) and the leaf's key.
        case packedCertificate(chain: [[UInt8]], key: TestKey)
        /// Another format name, with an empty statement.
        case other(String)
    }

    init(challenge: [UInt8]) { self.challenge = challenge }
}

/// A software authenticator with one discoverable credential: it makes attestation objects and
/// assertions as a platform authenticator and browser would, in the WebAuthn JSON form.
final class SoftwareAuthenticator {
    let key: TestKey
    let credentialID: [UInt8]
    let userHandle: [UInt8]
    let aaguid: [UInt8]
    private(set) var counter: UInt32

    init(_ kind: TestKey.Kind, counter: UInt32 = 0) throws {
        key = try TestKey.make(kind)
        credentialID = (0..<32).map { _ in UInt8.random(in: 0...255) }
        userHandle = (0..<16).map { _ in UInt8.random(in: 0...255) }
        aaguid = (0..<16).map { _ in UInt8.random(in: 0...255) }
        self.counter = counter
    }

    /// The pieces of a registration, to change before ``json``.
    struct Registration: Equatable {
        var id: String
        var rawId: String
        var type: String
        var clientDataJSON: [UInt8]
        var attestationObject: [UInt8]
        var transports: [String] = ["internal", "hybrid"]

        var json: [UInt8] {
            let object: [String: Any] = [
                "id": id, "rawId": rawId, "type": type, "authenticatorAttachment": "platform",
                "clientExtensionResults": [String: Any](),
                "response": [
                    "clientDataJSON": encode(clientDataJSON), "attestationObject": encode(attestationObject),
                    "transports": transports,
                ],
            ]
            return (try? JSONSerialization.data(withJSONObject: object)).map(Array.init) ?? []
        }
    }

    /// The pieces of an assertion, to change before ``json``.
    struct Assertion: Equatable {
        var id: String
        var rawId: String
        var type: String
        var clientDataJSON: [UInt8]
        var authenticatorData: [UInt8]
        var signature: [UInt8]
        var userHandle: [UInt8]?

        var json: [UInt8] {
            var response: [String: Any] = [
                "clientDataJSON": encode(clientDataJSON), "authenticatorData": encode(authenticatorData),
                "signature": encode(signature),
            ]
            if let userHandle { response["userHandle"] = encode(userHandle) }
            let object: [String: Any] = [
                "id": id, "rawId": rawId, "type": type, "authenticatorAttachment": "platform",
                "clientExtensionResults": [String: Any](), "response": response,
            ]
            return (try? JSONSerialization.data(withJSONObject: object)).map(Array.init) ?? []
        }
    }

    func clientData(_ ceremony: Ceremony, type: String) -> [UInt8] {
        var text = "{\"type\":\"\(ceremony.type ?? type)\",\"challenge\":\"\(encode(ceremony.challenge))\","
        text += "\"origin\":\"\(ceremony.origin)\""
        if let crossOrigin = ceremony.crossOrigin { text += ",\"crossOrigin\":\(crossOrigin)" }
        if let status = ceremony.tokenBinding { text += ",\"tokenBinding\":{\"status\":\"\(status)\"}" }
        return Array((text + "}").utf8)
    }

    func authenticatorData(_ ceremony: Ceremony, attested: Bool) -> [UInt8] {
        var flags: UInt8 = 0
        if ceremony.userPresent { flags |= 0x01 }
        if ceremony.userVerified { flags |= 0x04 }
        if ceremony.backupEligible { flags |= 0x08 }
        if ceremony.backedUp { flags |= 0x10 }
        if attested { flags |= 0x40 }
        var data = Array(SHA256.hash(data: Array(ceremony.rpID.utf8))) + [flags]
        data += CBORItem.bigEndian(UInt64(ceremony.signCount ?? counter), count: 4)
        if attested {
            data += aaguid + CBORItem.bigEndian(UInt64(credentialID.count), count: 2) + credentialID + key.cose.encoded
        }
        return data + ceremony.authenticatorDataSuffix
    }

    func register(_ ceremony: Ceremony) throws -> Registration {
        let clientDataJSON = clientData(ceremony, type: "webauthn.create")
        let authData = authenticatorData(ceremony, attested: true)
        let signed = authData + Array(SHA256.hash(data: clientDataJSON))
        let format: String
        let statement: CBORItem
        switch ceremony.format {
        case .none:
            (format, statement) = ("none", .map([]))
        case .packedSelf:
            format = "packed"
            statement = .map([(.text("alg"), .int(key.algorithm)), (.text("sig"), .bytes(try key.sign(signed)))])
        case .packedSelfWithAlgorithm(let algorithm):
            format = "packed"
            statement = .map([(.text("alg"), .int(algorithm)), (.text("sig"), .bytes(try key.sign(signed)))])
        case .packedCertificate(let chain, let attestationKey):
            format = "packed"
            statement = .map([
                (.text("alg"), .int(attestationKey.algorithm)), (.text("sig"), .bytes(try attestationKey.sign(signed))),
                (.text("x5c"), .array(chain.map { .bytes($0) })),
            ])
        case .other(let name):
            (format, statement) = (name, .map([]))
        }
        let attestationObject = CBORItem.map([
            (.text("fmt"), .text(format)), (.text("attStmt"), statement), (.text("authData"), .bytes(authData)),
        ])
        return Registration(
            id: encode(credentialID),
            rawId: encode(credentialID),
            type: ceremony.credentialType,
            clientDataJSON: clientDataJSON,
            attestationObject: attestationObject.encoded
        )
    }

    /// An assertion; the counter goes up by one unless the ceremony sets it.
    func assert(_ ceremony: Ceremony) throws -> Assertion {
        if ceremony.signCount == nil { counter &+= counterStep }
        let clientDataJSON = clientData(ceremony, type: "webauthn.get")
        let authData = authenticatorData(ceremony, attested: false)
        let signature = try key.sign(authData + Array(SHA256.hash(data: clientDataJSON)))
        return Assertion(
            id: encode(credentialID),
            rawId: encode(credentialID),
            type: ceremony.credentialType,
            clientDataJSON: clientDataJSON,
            authenticatorData: authData,
            signature: signature,
            userHandle: userHandle
        )
    }

    /// How much the counter goes up with each assertion; zero for an authenticator without one.
    var counterStep: UInt32 = 1
}

/// Base64url without padding, written independently of the library's.
func encode(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A fresh random challenge.
func randomChallenge() -> [UInt8] {
    (0..<32).map { _ in UInt8.random(in: 0...255) }
}
