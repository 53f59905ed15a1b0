import Crypto
import Testing

@testable import GatehouseWebAuthn

@Suite("Weak keys")
struct WeakKeyTests {
    /// A COSE Ed25519 key with `x` as its point.
    private func ed25519(_ x: [UInt8]) -> [UInt8] {
        CBORItem.map([(.int(1), .int(1)), (.int(3), .int(-8)), (.int(-1), .int(6)), (.int(-2), .bytes(x))]).encoded
    }

    @Test("Ed25519 points of small order, and non-canonical ones, are refused; real keys are not")
    func smallOrderEd25519() throws {
        // The points of order 1, 2, 4 and 8 (each with either sign), and y = p and y = p + 1.
        let order8 = [
            "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
            "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        ]
        var weak: [[UInt8]] = [
            [0x01] + [UInt8](repeating: 0, count: 31),
            [0xEC] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
            [UInt8](repeating: 0, count: 32),
            [0xED] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
            [0xEE] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
        ]
        weak += order8.map { hex in
            stride(from: 0, to: hex.count, by: 2).map { offset in
                let start = hex.index(hex.startIndex, offsetBy: offset)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16) ?? 0
            }
        }
        for point in weak {
            var signed = point
            signed[31] |= 0x80
            for encoding in [point, signed] {
                #expect(throws: WebAuthnError.self, "\(encoding)") { try COSEKey(bytes: ed25519(encoding)) }
            }
        }
        for _ in 0..<64 {
            let key = Curve25519.Signing.PrivateKey().publicKey.rawRepresentation
            #expect(throws: Never.self) { try COSEKey(bytes: ed25519(Array(key))) }
        }
    }
}
