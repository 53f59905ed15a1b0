public import Crypto
public import Foundation

/// A public key as a JSON Web Key (RFC 7517): P-256 or P-384 (`kty` EC), or Ed25519 (`kty` OKP,
/// RFC 8037). DPoP proofs carry one; profile keys are P-256.
public struct PublicJWK: Codable, Hashable, Sendable {
    /// The key type: `EC` for P-256 and P-384, `OKP` for Ed25519.
    public var kty: String
    /// The curve: `P-256`, `P-384` or `Ed25519`.
    public var crv: String
    /// The point's x coordinate (EC) or the raw public key (Ed25519), base64url without padding.
    public var x: String
    /// The point's y coordinate; EC keys only.
    public var y: String?

    /// The JWK of a P-256 key: 32-byte coordinates.
    public init(_ key: P256.Signing.PublicKey) {
        let raw = key.rawRepresentation
        kty = "EC"
        crv = "P-256"
        x = raw.prefix(32).base64URLEncodedString
        y = raw.suffix(32).base64URLEncodedString
    }

    /// The JWK of a P-384 key: 48-byte coordinates.
    public init(_ key: P384.Signing.PublicKey) {
        let raw = key.rawRepresentation
        kty = "EC"
        crv = "P-384"
        x = raw.prefix(48).base64URLEncodedString
        y = raw.suffix(48).base64URLEncodedString
    }

    /// The JWK of an Ed25519 key: 32 bytes in `x`, no `y`.
    public init(_ key: Curve25519.Signing.PublicKey) {
        kty = "OKP"
        crv = "Ed25519"
        x = key.rawRepresentation.base64URLEncodedString
        y = nil
    }

    /// The key, when this is a valid P-256 point.
    public func publicKey() -> P256.Signing.PublicKey? {
        guard case .p256(let key) = verifyingKey() else { return nil }
        return key
    }

    /// The key for any supported curve, when this is a valid key whose coordinates are in
    /// canonical base64url (one key, one thumbprint; the decoder refuses any other form).
    public func verifyingKey() -> DPoP.VerifyingKey? {
        switch (kty, crv) {
        case ("EC", "P-256"):
            guard let x = Data(base64URLEncoded: x), let y = y.flatMap({ Data(base64URLEncoded: $0) }), x.count == 32,
                y.count == 32
            else { return nil }
            return (try? P256.Signing.PublicKey(rawRepresentation: x + y)).map { .p256($0) }
        case ("EC", "P-384"):
            guard let x = Data(base64URLEncoded: x), let y = y.flatMap({ Data(base64URLEncoded: $0) }), x.count == 48,
                y.count == 48
            else { return nil }
            return (try? P384.Signing.PublicKey(rawRepresentation: x + y)).map { .p384($0) }
        case ("OKP", "Ed25519"):
            guard y == nil, let x = Data(base64URLEncoded: x), x.count == 32 else { return nil }
            return (try? Curve25519.Signing.PublicKey(rawRepresentation: x)).map { .ed25519($0) }
        default:
            return nil
        }
    }

    /// The RFC 7638 thumbprint: base64url SHA-256 of the required members in lexicographic order
    /// (`crv`, `kty`, `x`, `y` for EC; `crv`, `kty`, `x` for OKP, RFC 8037 §2).
    public var thumbprint: String {
        let canonical =
            if let y { #"{"crv":"\#(crv)","kty":"\#(kty)","x":"\#(x)","y":"\#(y)"}"# } else {
                #"{"crv":"\#(crv)","kty":"\#(kty)","x":"\#(x)"}"#
            }
        return Data(SHA256.hash(data: Data(canonical.utf8))).base64URLEncodedString
    }
}

/// DPoP proofs (RFC 9449): a JWT signed with the device's key for every request, binding tokens
/// to the key so a copied token is useless on another device.
public enum DPoP {
    /// Seconds a proof's `iat` may differ from the server's clock.
    public static let allowedClockSkew: TimeInterval = 60
    /// The longest proof accepted, in bytes.
    public static let maximumProofLength = 4096
    /// The signature algorithms proofs may use (`dpop_signing_alg_values_supported`).
    public static let algorithms = ["ES256", "ES384", "EdDSA"]

    /// A key a proof may be signed with, by curve.
    public enum VerifyingKey: Sendable {
        case p256(P256.Signing.PublicKey)
        case p384(P384.Signing.PublicKey)
        case ed25519(Curve25519.Signing.PublicKey)

        /// The JWS `alg` that goes with the curve.
        public var algorithm: String {
            switch self {
            case .p256: "ES256"
            case .p384: "ES384"
            case .ed25519: "EdDSA"
            }
        }

        func isValidSignature(_ signature: Data, for input: Data) -> Bool {
            switch self {
            case .p256(let key):
                guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else {
                    return false
                }
                return key.isValidSignature(signature, for: input)
            case .p384(let key):
                guard let signature = try? P384.Signing.ECDSASignature(rawRepresentation: signature) else {
                    return false
                }
                return key.isValidSignature(signature, for: input)
            case .ed25519(let key):
                return key.isValidSignature(signature, for: input)
            }
        }
    }

    /// A private key that signs proofs.
    public enum SigningKey: Sendable {
        case p256(P256.Signing.PrivateKey)
        case p384(P384.Signing.PrivateKey)
        case ed25519(Curve25519.Signing.PrivateKey)

        /// The public half of the key, as a proof's header carries it.
        public var jwk: PublicJWK {
            switch self {
            case .p256(let key): PublicJWK(key.publicKey)
            case .p384(let key): PublicJWK(key.publicKey)
            case .ed25519(let key): PublicJWK(key.publicKey)
            }
        }

        var algorithm: String {
            switch self {
            case .p256: "ES256"
            case .p384: "ES384"
            case .ed25519: "EdDSA"
            }
        }

        func signature(for input: Data) throws -> Data {
            switch self {
            case .p256(let key): try key.signature(for: input).rawRepresentation
            case .p384(let key): try key.signature(for: input).rawRepresentation
            case .ed25519(let key): try key.signature(for: input)
            }
        }
    }

    struct Header: Codable {
        var typ: String
        var alg: String
        var jwk: PublicJWK
    }

    struct Claims: Codable {
        var jti: String
        var htm: String
        var htu: String
        var iat: Int64
        var ath: String?
        var nonce: String?
    }

    /// A proof for one request, signed with a P-256 key (ES256).
    /// - Parameters:
    ///   - method: The request's HTTP method (`htm`), such as `POST`.
    ///   - url: The request's URL without query and fragment (`htu`).
    ///   - accessToken: The access token sent with the request, if any; its hash goes into `ath`.
    ///   - nonce: The server's latest `DPoP-Nonce`, when it asks for one.
    ///   - key: The private key the tokens are bound to; its public half goes into the header.
    ///   - now: The time the proof states it was made (`iat`).
    public static func proof(
        method: String,
        url: String,
        accessToken: String? = nil,
        nonce: String? = nil,
        key: P256.Signing.PrivateKey,
        now: Date
    ) throws -> String {
        try proof(method: method, url: url, accessToken: accessToken, nonce: nonce, signingKey: .p256(key), now: now)
    }

    /// A proof for one request, signed with any supported key.
    public static func proof(
        method: String,
        url: String,
        accessToken: String? = nil,
        nonce: String? = nil,
        signingKey key: SigningKey,
        now: Date
    ) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let header = try encoder.encode(Header(typ: "dpop+jwt", alg: key.algorithm, jwk: key.jwk))
        let claims = try encoder.encode(
            Claims(
                jti: Data.random(count: 16).base64URLEncodedString,
                htm: method,
                htu: url,
                iat: Int64(now.timeIntervalSince1970),
                ath: accessToken.map(accessTokenHash),
                nonce: nonce
            )
        )
        let signingInput = header.base64URLEncodedString + "." + claims.base64URLEncodedString
        return signingInput + "." + (try key.signature(for: Data(signingInput.utf8))).base64URLEncodedString
    }

    /// `ath`: base64url SHA-256 of the access token.
    public static func accessTokenHash(_ token: String) -> String {
        Data(SHA256.hash(data: Data(token.utf8))).base64URLEncodedString
    }

    /// What a valid proof establishes.
    public struct VerifiedProof: Sendable, Equatable {
        /// The thumbprint of the key that signed the proof.
        public var keyThumbprint: String
        /// The key that signed the proof, from its `jwk` header.
        public var publicKey: PublicJWK
        /// The proof's unique id; the server refuses a second proof with the same id.
        public var jti: String
        /// When the client says it made the proof (`iat`), within the accepted clock skew.
        public var issuedAt: Date
        /// The server nonce the proof carries, if any; the caller checks it.
        public var nonce: String?
    }

    /// Why a proof was refused.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// What was wrong with the proof, for the `error_description` of a 401 `invalid_dpop_proof`.
        public var reason: String
        /// The reason, as logs print it.
        public var description: String { reason }
    }

    /// `url` as RFC 9449 §4.3 compares it: without query and fragment, scheme and host in lower
    /// case, no default port (RFC 3986 §6.2.2–6.2.3). Nil when it is not an absolute http(s) URL.
    public static func normalizedHTU(_ url: String) -> String? {
        guard var components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            ["http", "https"].contains(scheme), let host = components.host, !host.isEmpty, components.user == nil,
            components.password == nil
        else { return nil }
        components.scheme = scheme
        components.host = host.lowercased()
        if (scheme == "http" && components.port == 80) || (scheme == "https" && components.port == 443) {
            components.port = nil
        }
        components.query = nil
        components.fragment = nil
        if components.path.isEmpty { components.path = "/" }
        return components.string
    }

    /// Checks a proof: its form, algorithm, signature, method, whole target URI, age and
    /// access-token hash. The caller checks that `jti` was not seen before, and the nonce.
    /// - Parameters:
    ///   - proof: The `DPoP` header's value, a compact JWS.
    ///   - method: The request's HTTP method, which the proof's `htm` must equal.
    ///   - url: The request's URI as the client addressed it: the server's public URL
    ///     and the path (RFC 9449 §4.3, step 9).
    ///   - accessToken: The access token sent with the request, whose hash `ath` must be; `nil` when
    ///     none was sent (`ath` is then not checked).
    ///   - now: The server's clock, which `iat` must be within ``allowedClockSkew`` of.
    /// - Throws: ``Refusal`` with the reason, for a 401 `invalid_dpop_proof`.
    public static func verify(
        _ proof: String,
        method: String,
        url: String,
        accessToken: String?,
        now: Date
    ) throws(Refusal) -> VerifiedProof {
        guard proof.utf8.count <= maximumProofLength else { throw Refusal(reason: "the DPoP proof is too long") }
        let parts = proof.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Data(base64URLEncoded: parts[0]),
            let claimsData = Data(base64URLEncoded: parts[1]), let signatureData = Data(base64URLEncoded: parts[2])
        else { throw Refusal(reason: "the DPoP proof is not a compact JWS") }
        let decoder = JSONDecoder()
        guard let header = try? decoder.decode(Header.self, from: headerData),
            let claims = try? decoder.decode(Claims.self, from: claimsData),
            let rawHeader = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let rawKey = rawHeader["jwk"] as? [String: Any]
        else { throw Refusal(reason: "the DPoP proof's header or claims are malformed") }
        // RFC 9449 §4.3: the jwk is a public key only; and no extension this server does not
        // understand may be critical (RFC 7515 §4.1.11).
        guard ["d", "p", "q", "dp", "dq", "qi", "k"].allSatisfy({ rawKey[$0] == nil }) else {
            throw Refusal(reason: "the DPoP proof's jwk holds a private key")
        }
        guard rawHeader["crit"] == nil else { throw Refusal(reason: "the DPoP proof names critical extensions") }
        guard header.typ == "dpop+jwt" else { throw Refusal(reason: "the DPoP proof must have typ dpop+jwt") }
        guard algorithms.contains(header.alg) else {
            throw Refusal(reason: "the DPoP proof's alg must be one of \(algorithms.joined(separator: ", "))")
        }
        guard let key = header.jwk.verifyingKey() else {
            throw Refusal(reason: "the DPoP proof's jwk is not a P-256, P-384 or Ed25519 public key")
        }
        // The algorithm must be the key's own: no key is checked under another algorithm.
        guard key.algorithm == header.alg else { throw Refusal(reason: "the DPoP proof's alg does not fit its key") }
        guard key.isValidSignature(signatureData, for: Data((parts[0] + "." + parts[1]).utf8)) else {
            throw Refusal(reason: "the DPoP proof's signature is not valid")
        }
        guard claims.htm == method else { throw Refusal(reason: "the DPoP proof is for another method") }
        guard let proofURL = normalizedHTU(claims.htu), proofURL == normalizedHTU(url) else {
            throw Refusal(reason: "the DPoP proof is for another URI (htu must be \(url))")
        }
        let issuedAt = Date(timeIntervalSince1970: TimeInterval(claims.iat))
        guard abs(issuedAt.timeIntervalSince(now)) <= allowedClockSkew else {
            throw Refusal(reason: "the DPoP proof is too old or from the future; check the device clock")
        }
        guard (16...64).contains(claims.jti.utf8.count), claims.jti.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else {
            throw Refusal(reason: "the DPoP proof's jti is malformed")
        }
        if let accessToken {
            guard let ath = claims.ath, constantTimeEquals(Data(ath.utf8), Data(accessTokenHash(accessToken).utf8))
            else {
                throw Refusal(reason: "the DPoP proof is not bound to this access token")
            }
        }
        return VerifiedProof(
            keyThumbprint: header.jwk.thumbprint,
            publicKey: header.jwk,
            jti: claims.jti,
            issuedAt: issuedAt,
            nonce: claims.nonce
        )
    }
}

/// Compares two byte strings in time that depends only on their lengths.
public func constantTimeEquals(_ lhs: Data, _ rhs: Data) -> Bool {
    guard lhs.count == rhs.count else { return false }
    var difference: UInt8 = 0
    for (left, right) in zip(lhs, rhs) { difference |= left ^ right }
    return difference == 0
}
