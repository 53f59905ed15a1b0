import Crypto

/// Just enough DER (X.690) to write an attestation certificate for packed attestation.
enum DER {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let count = content.count
        if count < 0x80 { return [tag, UInt8(count)] + content }
        let length = CBORItem.bigEndian(UInt64(count), count: count <= 0xFF ? 1 : 2)
        return [tag, 0x80 | UInt8(length.count)] + length + content
    }

    static func sequence(_ parts: [UInt8]...) -> [UInt8] { tlv(0x30, parts.flatMap { $0 }) }
    static func set(_ parts: [UInt8]...) -> [UInt8] { tlv(0x31, parts.flatMap { $0 }) }
    static func integer(_ value: UInt8) -> [UInt8] { tlv(0x02, [value]) }
    static func boolean(_ value: Bool) -> [UInt8] { tlv(0x01, [value ? 0xFF : 0x00]) }
    static func octetString(_ bytes: [UInt8]) -> [UInt8] { tlv(0x04, bytes) }
    static func bitString(_ bytes: [UInt8]) -> [UInt8] { tlv(0x03, [0] + bytes) }
    static func utf8String(_ text: String) -> [UInt8] { tlv(0x0C, Array(text.utf8)) }
    static func printableString(_ text: String) -> [UInt8] { tlv(0x13, Array(text.utf8)) }
    static func utcTime(_ text: String) -> [UInt8] { tlv(0x17, Array(text.utf8)) }
    static func explicit(_ number: UInt8, _ content: [UInt8]) -> [UInt8] { tlv(0xA0 | number, content) }

    static func oid(_ components: [UInt64]) -> [UInt8] {
        var body: [UInt8] = [UInt8(components[0] * 40 + components[1])]
        for component in components.dropFirst(2) {
            var groups: [UInt8] = [UInt8(component & 0x7F)]
            var rest = component >> 7
            while rest > 0 {
                groups.insert(UInt8(rest & 0x7F) | 0x80, at: 0)
                rest >>= 7
            }
            body += groups
        }
        return tlv(0x06, body)
    }
}

/// An attestation certificate (§8.2.1) for a P-256 attestation key, signed by a separate CA key,
/// with knobs for the requirements the relying party checks.
struct AttestationCertificate {
    var country = "US"
    var organization = "Gatehouse Test Authenticators"
    var organizationalUnit = "Authenticator Attestation"
    var commonName = "Gatehouse Test Authenticator"
    var certificateAuthority = false
    var aaguid: [UInt8]?
    var aaguidCritical = false

    func make(for key: P256.Signing.PrivateKey, signedBy issuer: P256.Signing.PrivateKey) throws -> [UInt8] {
        let ecdsaWithSHA256 = DER.sequence(DER.oid([1, 2, 840, 10045, 4, 3, 2]))
        func attribute(_ oid: [UInt64], _ value: [UInt8]) -> [UInt8] { DER.set(DER.sequence(DER.oid(oid), value)) }
        let subject = DER.sequence(
            attribute([2, 5, 4, 6], DER.printableString(country)),
            attribute([2, 5, 4, 10], DER.utf8String(organization)),
            attribute([2, 5, 4, 11], DER.utf8String(organizationalUnit)),
            attribute([2, 5, 4, 3], DER.utf8String(commonName))
        )
        let issuerName = DER.sequence(
            attribute([2, 5, 4, 6], DER.printableString("US")),
            attribute([2, 5, 4, 10], DER.utf8String("Gatehouse Test CA")),
            attribute([2, 5, 4, 3], DER.utf8String("Gatehouse Test Attestation Root"))
        )
        let constraints = certificateAuthority ? DER.sequence(DER.boolean(true)) : DER.sequence()
        var extensions = DER.sequence(DER.oid([2, 5, 29, 19]), DER.boolean(true), DER.octetString(constraints))
        if let aaguid {
            extensions += DER.sequence(
                DER.oid([1, 3, 6, 1, 4, 1, 45724, 1, 1, 4]),
                aaguidCritical ? DER.boolean(true) : [],
                DER.octetString(DER.octetString(aaguid))
            )
        }
        let tbs = DER.sequence(
            DER.explicit(0, DER.integer(2)),
            DER.integer(0x2A),
            ecdsaWithSHA256,
            issuerName,
            DER.sequence(DER.utcTime("250101000000Z"), DER.utcTime("450101000000Z")),
            subject,
            Array(key.publicKey.derRepresentation),
            DER.explicit(3, DER.sequence(extensions))
        )
        let signature = Array(try issuer.signature(for: tbs).derRepresentation)
        return DER.sequence(tbs, ecdsaWithSHA256, DER.bitString(signature))
    }
}
