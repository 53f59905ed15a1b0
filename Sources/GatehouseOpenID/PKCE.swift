import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol

/// Proof Key for Code Exchange (RFC 7636), S256 only, for both sides (the hosted login checks it,
/// the relying party makes it): `plain` lets whoever intercepts the
/// authorization request redeem the code, so it is refused (RFC 9700 §2.1.1).
public enum PKCE {
    /// A new code verifier: 32 random bytes, base64url (43 characters).
    public static func makeVerifier() -> String { Data.random(count: 32).base64URLEncodedString }

    /// The S256 challenge of `verifier`.
    public static func challenge(for verifier: String) -> String {
        Data(SHA256.hash(data: Data(verifier.utf8))).base64URLEncodedString
    }

    /// Whether `verifier` is well formed: 43–128 characters of `[A-Za-z0-9-._~]` (RFC 7636 §4.1).
    public static func isWellFormedVerifier(_ verifier: String) -> Bool {
        (43...128).contains(verifier.utf8.count)
            && verifier.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
            }
    }

    /// Whether `challenge` is a well-formed S256 challenge: 43 base64url characters (32 bytes).
    public static func isWellFormedChallenge(_ challenge: String) -> Bool {
        challenge.utf8.count == 43 && Data(base64URLEncoded: challenge)?.count == 32
    }

    /// Whether `verifier` proves `challenge`, in constant time.
    public static func verify(_ verifier: String, against challenge: String) -> Bool {
        isWellFormedVerifier(verifier) && ConstantTime.equals(self.challenge(for: verifier), challenge)
    }
}
