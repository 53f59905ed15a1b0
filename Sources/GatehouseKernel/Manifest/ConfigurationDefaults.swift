// Helpers for `…Configuration` types: documented defaults and range checks that fail with the
// same wording as the decoder's own messages.

extension KeyedDecodingContainer {
    /// The value at `key`, or `defaultValue` when the key is absent or null.
    public func decode<T: Decodable>(_ type: T.Type, forKey key: Key, default defaultValue: T) throws -> T {
        try decodeIfPresent(type, forKey: key) ?? defaultValue
    }

    /// The value at `key`, or `defaultValue` when absent; refused when outside `range`.
    public func decode<T: Decodable & Comparable>(
        _ type: T.Type,
        forKey key: Key,
        default defaultValue: T,
        in range: ClosedRange<T>
    ) throws -> T {
        let value = try decodeIfPresent(type, forKey: key) ?? defaultValue
        guard range.contains(value) else {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: self,
                debugDescription: "expected a value from \(range.lowerBound) to \(range.upperBound), found \(value)"
            )
        }
        return value
    }

    /// Refuses the configuration with `problem`, pointing at `key`.
    public func invalid(_ key: Key, _ problem: String) -> DecodingError {
        DecodingError.dataCorrupted(DecodingError.Context(codingPath: codingPath + [key], debugDescription: problem))
    }
}
