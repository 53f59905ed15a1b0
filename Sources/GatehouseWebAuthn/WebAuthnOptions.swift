import Foundation

/// The user account a credential is created for (`PublicKeyCredentialUserEntity`).
public struct WebAuthnUser: Sendable, Hashable {
    /// The user handle: an opaque ID of at most 64 bytes with no personal information; the
    /// authenticator returns it with every assertion of a discoverable credential.
    public var id: [UInt8]
    /// The account name the authenticator shows, such as an email address.
    public var name: String
    /// The name for people, such as "Ada Lovelace".
    public var displayName: String

    /// A user entity.
    public init(id: [UInt8], name: String, displayName: String) {
        self.id = id
        self.name = name
        self.displayName = displayName
    }
}

/// Whether the relying party wants an attestation statement (`AttestationConveyancePreference`).
public enum AttestationConveyance: String, Sendable, Hashable, Codable {
    /// No attestation: the client may replace it with `none` and hide the AAGUID.
    case none
    /// An attestation the client may anonymise.
    case indirect
    /// The authenticator's attestation as it made it.
    case direct
}

/// A credential in an exclude or allow list (`PublicKeyCredentialDescriptorJSON`).
public struct WebAuthnCredentialDescriptor: Sendable, Hashable, Encodable {
    /// Always `"public-key"`.
    public let type: String
    /// The credential ID, base64url.
    public let id: String

    /// A descriptor for the credential `id`.
    public init(id: [UInt8]) {
        self.type = "public-key"
        self.id = Base64URL.encode(id)
    }
}

/// The options for `navigator.credentials.create({publicKey})`, in the WebAuthn JSON form
/// (`PublicKeyCredentialCreationOptionsJSON`): binary fields are base64url strings, which a page
/// decodes (or hands to `PublicKeyCredential.parseCreationOptionsFromJSON`).
public struct WebAuthnCreationOptions: Sendable, Hashable, Encodable {
    /// The relying party (`PublicKeyCredentialRpEntity`).
    public struct RelyingParty: Sendable, Hashable, Encodable {
        /// The RP ID.
        public let id: String
        /// The name for people.
        public let name: String
    }

    /// The user (`PublicKeyCredentialUserEntityJSON`).
    public struct User: Sendable, Hashable, Encodable {
        /// The user handle, base64url.
        public let id: String
        /// The account name.
        public let name: String
        /// The name for people.
        public let displayName: String
    }

    /// One acceptable credential type and algorithm (`PublicKeyCredentialParameters`).
    public struct Parameters: Sendable, Hashable, Encodable {
        /// Always `"public-key"`.
        public let type: String
        /// The COSE algorithm identifier.
        public let alg: Int
    }

    /// What the authenticator must do (`AuthenticatorSelectionCriteria`).
    public struct AuthenticatorSelection: Sendable, Hashable, Encodable {
        /// `"required"`: a discoverable credential (a passkey).
        public let residentKey: String
        /// `true`, for clients of Level 1.
        public let requireResidentKey: Bool
        /// `"required"`: the authenticator verifies the user.
        public let userVerification: String
    }

    /// The relying party.
    public let rp: RelyingParty
    /// The user.
    public let user: User
    /// The challenge, base64url.
    public let challenge: String
    /// The algorithms, preferred first: ES256, EdDSA, RS256.
    public let pubKeyCredParams: [Parameters]
    /// How long the client waits, in milliseconds.
    public let timeout: Int
    /// The user's credentials already registered, so an authenticator does not make a second one.
    public let excludeCredentials: [WebAuthnCredentialDescriptor]
    /// Discoverable credential and user verification required.
    public let authenticatorSelection: AuthenticatorSelection
    /// The attestation conveyance preference.
    public let attestation: String

    /// The options as JSON, safe to place in an HTML `<script>` element (`<`, `>` and `&` are
    /// written as `\u` escapes).
    public var json: String { WebAuthnJSON.encode(self) }
}

/// The options for `navigator.credentials.get({publicKey})`, in the WebAuthn JSON form
/// (`PublicKeyCredentialRequestOptionsJSON`).
public struct WebAuthnRequestOptions: Sendable, Hashable, Encodable {
    /// The challenge, base64url.
    public let challenge: String
    /// How long the client waits, in milliseconds.
    public let timeout: Int
    /// The RP ID.
    public let rpId: String
    /// The credentials that may answer; empty for discoverable credentials (the user picks a passkey).
    public let allowCredentials: [WebAuthnCredentialDescriptor]
    /// `"required"`: the authenticator verifies the user.
    public let userVerification: String

    /// The options as JSON, safe to place in an HTML `<script>` element (`<`, `>` and `&` are
    /// written as `\u` escapes).
    public var json: String { WebAuthnJSON.encode(self) }
}

/// Encoding of the option types.
enum WebAuthnJSON {
    static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // The option types hold strings, numbers and booleans only: encoding them cannot fail.
        guard let data = try? encoder.encode(value) else { return "{}" }
        var output = ""
        for scalar in String(decoding: data, as: UTF8.self).unicodeScalars {
            switch scalar {
            case "<": output += "\\u003c"
            case ">": output += "\\u003e"
            case "&": output += "\\u0026"
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output
    }
}

/// Milliseconds in `duration`, at least zero, for a `timeout` member.
func milliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    guard seconds >= 0 else { return 0 }
    let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
    guard !overflow else { return Int(Int32.max) }
    let total = min(product, Int64(Int32.max)) + attoseconds / 1_000_000_000_000_000
    return Int(min(total, Int64(Int32.max)))
}
