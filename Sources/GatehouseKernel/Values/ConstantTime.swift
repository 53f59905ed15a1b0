/// Comparison of secrets (codes, tokens, proofs) in time that depends only on their lengths, so
/// timing tells an attacker nothing about how much of a guess was right.
public enum ConstantTime {
    // Inlinable, so each caller gets a version specialised for its collections: unspecialised,
    // every byte went through protocol witnesses (8% of an introspection in a profile).
    /// Whether two byte sequences are equal, in time that depends only on their lengths.
    @inlinable
    public static func equals(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for (left, right) in zip(lhs, rhs) { difference |= left ^ right }
        return difference == 0
    }

    /// Whether two strings have the same UTF-8 bytes, in time that depends only on their lengths.
    public static func equals(_ lhs: String, _ rhs: String) -> Bool {
        equals(Array(lhs.utf8), Array(rhs.utf8))
    }
}
