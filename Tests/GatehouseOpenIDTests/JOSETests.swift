import Foundation
import GatehouseOpenID
import GatehouseProtocol
import Testing

@Suite struct JOSETests {
    struct Claims: Codable, Equatable {
        var sub: String
        var n: Int
    }

    @Test(arguments: JSONWebSignature.Algorithm.allCases)
    func signsAndVerifiesWithThePublishedKey(_ algorithm: JSONWebSignature.Algorithm) throws {
        let key = try SigningKey.generate(algorithm)
        let token = try JSONWebSignature.sign(Claims(sub: "ann", n: 7), with: key)
        let keys = JSONWebKeySet(keys: [try key.publicJWK()])
        let jws = try JSONWebSignature(compact: token)
        #expect(jws.header.kid == key.kid)
        #expect(jws.algorithm == algorithm)
        let used = try jws.verify(with: keys)
        #expect(used.kid == key.kid)
        #expect(try jws.claims(as: Claims.self) == Claims(sub: "ann", n: 7))
    }

    @Test(arguments: JSONWebSignature.Algorithm.allCases)
    func storedKeysSignAsBefore(_ algorithm: JSONWebSignature.Algorithm) throws {
        let key = try SigningKey.generate(algorithm)
        let again = try SigningKey(algorithm: algorithm, kid: key.kid, pem: key.pem)
        let token = try JSONWebSignature.sign(Claims(sub: "b", n: 1), with: again)
        try JSONWebSignature(compact: token).verify(with: JSONWebKeySet(keys: [try key.publicJWK()]))
    }

    @Test func refusesAnotherKeyAChangedPayloadAndForeignAlgorithms() throws {
        let key = try SigningKey.generate(.rs256)
        let other = try SigningKey.generate(.rs256)
        let token = try JSONWebSignature.sign(Claims(sub: "ann", n: 7), with: key)
        // Same kid, other key material: the signature must not verify.
        var impostor = try other.publicJWK()
        impostor.kid = key.kid
        #expect(throws: JSONWebSignature.Refusal.self) {
            try JSONWebSignature(compact: token).verify(with: JSONWebKeySet(keys: [impostor]))
        }
        // Unknown kid: no candidate.
        #expect(throws: JSONWebSignature.Refusal("the token's signing key is not among the published keys")) {
            try JSONWebSignature(compact: token).verify(with: JSONWebKeySet(keys: [try other.publicJWK()]))
        }
        // A payload swapped under the same signature.
        let parts = token.split(separator: ".").map(String.init)
        let swapped = try JSONEncoder().encode(Claims(sub: "eve", n: 7)).base64URLEncodedString
        let forged = parts[0] + "." + swapped + "." + parts[2]
        #expect(throws: JSONWebSignature.Refusal.self) {
            try JSONWebSignature(compact: forged).verify(with: JSONWebKeySet(keys: [try key.publicJWK()]))
        }
        // alg none and HS256 are refused before any key is looked at.
        for alg in ["none", "HS256", "RS512"] {
            let header = Data(#"{"alg":"\#(alg)","kid":"\#(key.kid)"}"#.utf8).base64URLEncodedString
            #expect(throws: JSONWebSignature.Refusal.self) {
                try JSONWebSignature(compact: header + "." + parts[1] + "." + parts[2])
            }
        }
        // An RSA key published as ES256 does not verify RS256 tokens.
        var mislabelled = try key.publicJWK()
        mislabelled.alg = "ES256"
        #expect(throws: JSONWebSignature.Refusal.self) {
            try JSONWebSignature(compact: token).verify(with: JSONWebKeySet(keys: [mislabelled]))
        }
    }

    @Test func idTokenClaimsReadStringOrArrayAudienceAndStringBooleans() throws {
        let json = #"{"iss":"https://op","sub":"1","aud":["a","b"],"exp":10.5,"iat":1,"email_verified":"true"}"#
        let claims = try JSONDecoder().decode(IDTokenClaims.self, from: Data(json.utf8))
        #expect(claims.aud.values == ["a", "b"])
        #expect(claims.exp == 10)
        #expect(claims.emailVerified == true)
        let one = try JSONDecoder().decode(
            IDTokenClaims.self,
            from: Data(#"{"iss":"i","sub":"s","aud":"a","exp":2,"iat":1}"#.utf8)
        )
        #expect(one.aud.values == ["a"])
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(IDTokenClaims.self, from: Data(#"{"iss":"i","sub":"s","aud":"a","iat":1}"#.utf8))
        }
    }
}
