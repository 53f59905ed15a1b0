import GatehouseTesting
import Testing

@testable import GatehouseWebAuthn

/// Mutated inputs, a fixed number of them from fixed seeds: none may crash the decoder or the
/// checks, and almost none may pass.
@Suite struct FuzzTests {
    /// Bytes that mean something to CBOR: lengths, indefinite markers, tags, breaks.
    static let interesting: [UInt8] = [
        0x00, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1F, 0x40, 0x5B, 0x5F, 0x60, 0x7B, 0x7F, 0x80, 0x9B, 0x9F,
        0xA0, 0xBB, 0xBF, 0xC0, 0xD8, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8, 0xF9, 0xFB, 0xFF,
    ]

    static func mutate(_ input: [UInt8], with generator: inout SeededGenerator) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &generator) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &generator)
            switch Int.random(in: 0..<7, using: &generator) {
            case 0 where !bytes.isEmpty:
                bytes[position] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &generator)
            case 1 where !bytes.isEmpty:
                bytes[position] = interesting.randomElement(using: &generator) ?? 0
            case 2 where !bytes.isEmpty:
                bytes[position] = UInt8.random(in: 0...255, using: &generator)
            case 3:
                let count = Int.random(in: 1...8, using: &generator)
                bytes.insert(
                    contentsOf: (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) },
                    at: position
                )
            case 4 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...16, using: &generator))
                bytes.removeSubrange(position..<end)
            case 5:
                bytes = Array(bytes.prefix(position))
            default:
                if !bytes.isEmpty { bytes[position] = 0xFF }
            }
        }
        return bytes
    }

    @Test func mutatedAttestationObjects() throws {
        var generator = SeededGenerator(seed: 0x5EED_0001)
        let party = CeremonyTests.party
        var accepted = 0
        for kind in TestKey.Kind.allCases {
            let authenticator = try SoftwareAuthenticator(kind)
            let challenge = randomChallenge()
            var ceremony = Ceremony(challenge: challenge)
            ceremony.format = .packedSelf
            let registration = try authenticator.register(ceremony)
            for _ in 0..<700 {
                var mutated = registration
                mutated.attestationObject = Self.mutate(registration.attestationObject, with: &generator)
                guard mutated != registration else { continue }
                do {
                    _ = try party.verifyRegistration(mutated.json, expectedChallenge: challenge)
                    accepted += 1
                } catch {
                    #expect(!error.description.isEmpty)
                }
            }
        }
        // A mutation can leave the signed bytes alone (say, in a map key the checks ignore); few do.
        #expect(accepted < 100, "\(accepted) mutated attestation objects passed")
    }

    @Test func mutatedAssertions() throws {
        var generator = SeededGenerator(seed: 0x5EED_0002)
        let party = CeremonyTests.party
        let authenticator = try SoftwareAuthenticator(.p256)
        let challenge = randomChallenge()
        let credential = StoredCredential(
            try party.verifyRegistration(
                try authenticator.register(Ceremony(challenge: challenge)).json,
                expectedChallenge: challenge
            )
        )
        let signInChallenge = randomChallenge()
        let assertion = try authenticator.assert(Ceremony(challenge: signInChallenge))
        var accepted = 0
        for round in 0..<1_000 {
            var mutated = assertion
            switch round % 3 {
            case 0: mutated.authenticatorData = Self.mutate(assertion.authenticatorData, with: &generator)
            case 1: mutated.clientDataJSON = Self.mutate(assertion.clientDataJSON, with: &generator)
            default: mutated.signature = Self.mutate(assertion.signature, with: &generator)
            }
            // A mutation can give back the bytes it was handed (a byte set to the value it had,
            // a bit flipped twice): that is the genuine assertion, not a mutated one.
            guard mutated != assertion else { continue }
            if let _ = try? party.verifyAuthentication(
                mutated.json,
                expectedChallenge: signInChallenge,
                credential: credential
            ) {
                accepted += 1
            }
        }
        #expect(accepted == 0)
    }

    @Test func mutatedCBORAndKeys() throws {
        var generator = SeededGenerator(seed: 0x5EED_0003)
        var seeds: [[UInt8]] = try TestKey.Kind.allCases.map { try TestKey.make($0).cose.encoded }
        seeds.append(
            CBORItem.map([
                (.text("fmt"), .text("packed")),
                (.text("attStmt"), .map([(.text("alg"), .int(-7)), (.text("x5c"), .array([.bytes([1, 2, 3])]))])),
                (.text("authData"), .bytes(Array(repeating: 0x41, count: 40))),
                (.int(-300), .array([.boolean(true), .null, .text("é"), .unsigned(1 << 40)])),
            ]).encoded
        )
        for round in 0..<3_000 {
            let seed = seeds[round % seeds.count]
            let input =
                round % 10 == 0
                ? (0..<Int.random(in: 0...64, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
                : Self.mutate(seed, with: &generator)
            _ = try? CBORDecoder.decode(input)
            _ = try? COSEKey(bytes: input)
            _ = try? AuthenticatorData(bytes: Array(repeating: 0, count: 32) + [0x45, 0, 0, 0, 1] + input)
            _ = try? AuthenticatorData(
                bytes: Array(repeating: 0, count: 32) + [0xC5, 0, 0, 0, 1] + Array(repeating: 0, count: 16) + [0, 1, 9]
                    + input
            )
        }
    }
}
