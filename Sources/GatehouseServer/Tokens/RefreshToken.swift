import Crypto
import Foundation
import GatehouseProtocol

/// A refresh token as the server mints it: `<family>.<generation>.<mac>`, the MAC an HMAC-SHA256
/// of family and generation under a secret of the server's. Only the current generation of a
/// family is stored (as a hash, like every token); an earlier one that comes back is still
/// recognised as authentic, so its reuse revokes the family without a row kept for every
/// rotated token. A token whose MAC does not check out is simply not valid.
struct RefreshToken: Equatable {
    var family: String
    var generation: Int64

    func encoded(key: SymmetricKey) -> String {
        "\(family).\(generation).\(Self.mac(family: family, generation: generation, key: key))"
    }

    /// The token `text` names, if its MAC is the server's.
    init?(_ text: String, key: SymmetricKey) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, (16...64).contains(parts[0].utf8.count), Data(base64URLEncoded: parts[0]) != nil,
            parts[1].utf8.count <= 18, let generation = Int64(parts[1]), generation >= 0,
            String(generation) == parts[1]
        else { return nil }
        let expected = Self.mac(family: String(parts[0]), generation: generation, key: key)
        guard constantTimeEquals(Data(parts[2].utf8), Data(expected.utf8)) else { return nil }
        self.init(family: String(parts[0]), generation: generation)
    }

    init(family: String, generation: Int64) {
        self.family = family
        self.generation = generation
    }

    private static func mac(family: String, generation: Int64, key: SymmetricKey) -> String {
        let message = Data("gatehouse-refresh-token:\(family):\(generation)".utf8)
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: key)).base64URLEncodedString
    }
}
