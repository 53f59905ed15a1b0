/// A PIN as the user typed it.
///
/// The type exists so that a PIN cannot end up in a log line or a debug dump by accident: its
/// description, debug description and mirror are redacted. It has no `Equatable` conformance;
/// compare PINs with ``constantTimeEquals(_:)``. Never persist one.
public struct PIN: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let bytes: [UInt8]

    /// A PIN from what the user typed.
    public init(_ text: String) { self.bytes = Array(text.utf8) }

    /// The number of characters typed.
    public var count: Int { String(decoding: bytes, as: UTF8.self).count }

    /// Whether nothing was typed.
    public var isEmpty: Bool { bytes.isEmpty }

    /// The digit values (0–9), or `nil` when the PIN holds anything but ASCII digits.
    public var digits: [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(bytes.count)
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            values.append(byte - UInt8(ascii: "0"))
        }
        return values
    }

    /// Calls `body` with the PIN's UTF-8 bytes, for hashing or key derivation.
    public func withUTF8<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        try bytes.withUnsafeBufferPointer(body)
    }

    /// Whether two PINs are the same, e.g. a PIN and its confirmation, or a PIN and a blocked one.
    /// Runs in time that depends only on the lengths.
    public func constantTimeEquals(_ other: PIN) -> Bool {
        guard bytes.count == other.bytes.count else { return false }
        var difference: UInt8 = 0
        for index in bytes.indices { difference |= bytes[index] ^ other.bytes[index] }
        return difference == 0
    }

    /// `PIN(redacted)`: the digits never reach a log or a string.
    public var description: String { "PIN(redacted)" }
    /// `PIN(redacted)`, as for ``description``.
    public var debugDescription: String { "PIN(redacted)" }
    /// A mirror without children, so `dump` and debuggers never show the digits.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
