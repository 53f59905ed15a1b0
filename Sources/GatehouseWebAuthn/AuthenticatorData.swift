/// The authenticator data structure (WebAuthn Level 2 §6.1): what the authenticator signs.
///
/// Parsing is exact: 37 bytes of fixed fields, then attested credential data if the AT flag is
/// set and a CBOR map of extension outputs if the ED flag is set, and nothing after them.
public struct AuthenticatorData: Sendable, Hashable {
    /// The flags byte (§6.1): user present and verified, backup eligibility and state, and
    /// whether attested credential data and extension data follow.
    public struct Flags: OptionSet, Sendable, Hashable {
        /// The byte as the authenticator sent it, reserved bits included.
        public let rawValue: UInt8

        /// Flags from their byte.
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// UP: the authenticator tested the user's presence.
        public static let userPresent = Flags(rawValue: 0x01)
        /// UV: the authenticator verified the user (biometrics, PIN, …).
        public static let userVerified = Flags(rawValue: 0x04)
        /// BE: the credential may be backed up (a multi-device credential).
        public static let backupEligible = Flags(rawValue: 0x08)
        /// BS: the credential is backed up.
        public static let backedUp = Flags(rawValue: 0x10)
        /// AT: attested credential data follow the fixed fields.
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        /// ED: extension outputs follow.
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// SHA-256 of the RP ID the credential is scoped to.
    public let rpIDHash: [UInt8]
    /// The flags.
    public let flags: Flags
    /// The signature counter; zero when the authenticator does not keep one.
    public let signCount: UInt32
    /// The credential's AAGUID, ID and public key; registrations carry them.
    public let attestedCredentialData: AttestedCredentialData?
    /// The extension outputs, the encoding of a CBOR map, when the ED flag is set.
    public let extensions: [UInt8]?
    /// The structure as received: what signatures cover.
    public let bytes: [UInt8]

    /// Parses authenticator data.
    public init(bytes: some Collection<UInt8>) throws(WebAuthnError) {
        let data = Array(bytes)
        guard data.count >= 37 else { throw .malformed("the authenticator data are shorter than 37 bytes") }
        rpIDHash = Array(data[0..<32])
        flags = Flags(rawValue: data[32])
        signCount = data[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        var position = 37
        if flags.contains(.attestedCredentialData) {
            guard data.count - position >= 18 else { throw .malformed("the attested credential data are cut short") }
            let aaguid = Array(data[position..<position + 16])
            let idLength = Int(data[position + 16]) << 8 | Int(data[position + 17])
            position += 18
            guard idLength <= 1023 else { throw .credentialIDTooLong(idLength) }
            guard data.count - position >= idLength else { throw .malformed("the credential ID is cut short") }
            let credentialID = Array(data[position..<position + idLength])
            position += idLength
            let (key, keyLength) = try CBORDecoder.decodePrefix(data, from: position)
            let publicKey = try COSEKey(key, encoded: Array(data[position..<position + keyLength]))
            position += keyLength
            attestedCredentialData = AttestedCredentialData(
                aaguid: aaguid,
                credentialID: credentialID,
                publicKey: publicKey
            )
        } else {
            attestedCredentialData = nil
        }
        if flags.contains(.extensionData) {
            let (outputs, length) = try CBORDecoder.decodePrefix(data, from: position)
            guard case .map = outputs else { throw .malformed("the extension outputs are not a CBOR map") }
            extensions = Array(data[position..<position + length])
            position += length
        } else {
            extensions = nil
        }
        guard position == data.count else {
            throw .malformed("\(data.count - position) bytes after the authenticator data")
        }
        self.bytes = data
    }
}

/// The attested credential data (§6.5.1) of a registration's authenticator data.
public struct AttestedCredentialData: Sendable, Hashable {
    /// The authenticator model's AAGUID, 16 bytes (zeros when the client or authenticator hides it).
    public let aaguid: [UInt8]
    /// The credential ID, at most 1023 bytes.
    public let credentialID: [UInt8]
    /// The credential public key.
    public let publicKey: COSEKey
}
