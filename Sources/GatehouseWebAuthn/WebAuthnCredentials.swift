/// A credential a registration created, checked (§7.1): what the relying party stores with the
/// user account.
public struct RegisteredCredential: Sendable, Hashable {
    /// The credential ID.
    public let id: [UInt8]
    /// The credential public key in its COSE encoding; ``COSEKey/init(bytes:)`` reads it again.
    public let publicKey: [UInt8]
    /// The key's algorithm.
    public let algorithm: COSEAlgorithm
    /// The signature counter at registration; zero when the authenticator keeps none.
    public let signCount: UInt32
    /// Whether the authenticator verified the user (always true: this relying party requires it).
    public let userVerified: Bool
    /// Whether the credential may be backed up (BE): a multi-device passkey. It must not change.
    public let backupEligible: Bool
    /// Whether the credential is backed up (BS) now.
    public let backedUp: Bool
    /// The authenticator model's AAGUID, 16 bytes (zeros when hidden).
    public let aaguid: [UInt8]
    /// The attestation statement's format.
    public let attestationFormat: AttestationFormat
    /// What the attestation proves.
    public let attestationType: AttestationType
    /// For ``AttestationType/basic``: the `x5c` certificates (DER), leaf first, for a relying
    /// party that evaluates them against trust anchors (such as FIDO metadata). Empty otherwise.
    public let attestationCertificates: [[UInt8]]
    /// The transports the client reported (`"internal"`, `"hybrid"`, `"usb"`, …), for allow lists.
    public let transports: [String]
}

/// The stored side of a credential that an assertion is checked against (§7.2).
public struct StoredCredential: Sendable, Hashable {
    /// The credential ID.
    public var id: [UInt8]
    /// The credential public key in its COSE encoding.
    public var publicKey: [UInt8]
    /// The last signature counter seen.
    public var signCount: UInt32
    /// The backup eligibility (BE) seen at registration.
    public var backupEligible: Bool

    /// A stored credential from its parts.
    public init(id: [UInt8], publicKey: [UInt8], signCount: UInt32, backupEligible: Bool) {
        self.id = id
        self.publicKey = publicKey
        self.signCount = signCount
        self.backupEligible = backupEligible
    }

    /// The stored credential a registration made.
    public init(_ credential: RegisteredCredential) {
        self.init(
            id: credential.id,
            publicKey: credential.publicKey,
            signCount: credential.signCount,
            backupEligible: credential.backupEligible
        )
    }
}

/// A checked assertion (§7.2).
public struct AuthenticationResult: Sendable, Hashable {
    /// The credential ID.
    public let credentialID: [UInt8]
    /// The new signature counter, to store in place of the old one.
    public let signCount: UInt32
    /// Whether the authenticator verified the user (always true: this relying party requires it).
    public let userVerified: Bool
    /// Whether the credential may be backed up (BE); the same as stored.
    public let backupEligible: Bool
    /// Whether the credential is backed up (BS) now.
    public let backedUp: Bool
    /// The user handle the authenticator returned, if any (discoverable credentials return it);
    /// the relying party must check that it is the credential owner's.
    public let userHandle: [UInt8]?
}

/// The credential ID and user handle of an authentication response, read before it is checked so
/// the relying party can find the stored credential (for a discoverable credential, by user
/// handle or ID). Nothing in it is verified yet.
public struct AssertionReference: Sendable, Hashable {
    /// The credential ID (`rawId`).
    public let credentialID: [UInt8]
    /// The user handle, if the response carries one.
    public let userHandle: [UInt8]?
}
