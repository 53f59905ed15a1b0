import Crypto
public import Foundation

/// Server-provided DPoP nonces (RFC 9449 §8, §9): a proof must carry a nonce the server gave
/// out recently, so a proof made ahead of time is useless. Nonces are stateless: an HMAC of
/// the time window under a secret, so every instance sharing the secret (the token server keeps
/// it in its database) accepts the others' nonces. A nonce stays valid for its window and the next.
public struct DPoPNonces: Sendable {
    /// Seconds a window lasts; a nonce lives between one and two windows.
    public static let window: Double = 300
    private let key: SymmetricKey

    /// Nonces under `secret` (32 random bytes, say).
    public init(secret: Data) { key = SymmetricKey(data: secret) }

    /// The nonce to hand out at `now` (seconds since 1970).
    public func current(now: Double) -> String { nonce(window: Self.windowIndex(now)) }

    /// Whether `nonce` was handed out in this window or the one before.
    public func accepts(_ nonce: String, now: Double) -> Bool {
        let index = Self.windowIndex(now)
        let given = Data(nonce.utf8)
        // Both compared every time, in constant time: timing tells nothing about which matched.
        let thisWindow = constantTimeEquals(given, Data(self.nonce(window: index).utf8))
        let lastWindow = constantTimeEquals(given, Data(self.nonce(window: index - 1).utf8))
        return thisWindow || lastWindow
    }

    private static func windowIndex(_ now: Double) -> Int64 { Int64((now / window).rounded(.down)) }

    private func nonce(window: Int64) -> String {
        var message = Data("gatehouse-dpop-nonce:".utf8)
        withUnsafeBytes(of: window.bigEndian) { message.append(contentsOf: $0) }
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: key)).prefix(18).base64URLEncodedString
    }
}
