/// A QR code symbol (ISO/IEC 18004, model 2) holding bytes in byte mode: the smallest of the 40
/// versions that fits the data at the chosen error correction level, masked with the pattern the
/// standard's penalty rules prefer.
///
/// The server draws these for short one-time codes: ``svg(moduleSize:quietZone:title:)`` inline
/// in a page, ``png(scale:quietZone:)`` where a picture is wanted. Encoding needs no other
/// library; a code of a hundred bytes takes about a tenth of a millisecond.
///
/// ```swift
/// let code = try QRCode(text: "gh1_Xk3f9QpL2", errorCorrection: .medium)
/// let html = "<figure>\(code.svg(title: "Sign-in code"))</figure>"
/// ```
public struct QRCode: Sendable {
    /// How much of the symbol may be damaged or hidden and still be read; more correction means
    /// less room for data, so a larger symbol for the same data.
    public enum ErrorCorrection: Sendable, CaseIterable {
        /// Level L: about 7 % of the codewords can be restored.
        case low
        /// Level M: about 15 % of the codewords can be restored.
        case medium
        /// Level Q: about 25 % of the codewords can be restored.
        case quartile
        /// Level H: about 30 % of the codewords can be restored.
        case high
    }

    /// The number of modules along each side: `17 + 4 × version`, from 21 to 177. The quiet zone
    /// the renderers add around the symbol is not included.
    public let size: Int

    /// The symbol's version, 1 to 40.
    public let version: Int

    /// The error correction level the symbol was encoded with.
    public let errorCorrection: ErrorCorrection

    /// The data mask pattern applied, 0 to 7: the one with the lowest penalty.
    public let mask: Int

    /// `size × size` modules, row by row; `true` is dark.
    private let modules: [Bool]

    /// Encodes `bytes` in byte mode in the smallest version that holds them at `errorCorrection`.
    ///
    /// - Throws: ``QRCodeError/tooLong(capacity:)`` when even version 40 cannot hold the bytes
    ///   at this level (2,953 bytes at `.low`, 2,331 at `.medium`, 1,663 at `.quartile`, 1,273
    ///   at `.high`).
    public init(bytes: some Collection<UInt8>, errorCorrection: ErrorCorrection = .medium) throws(QRCodeError) {
        let data = Array(bytes)
        guard let version = QRSymbol.smallestVersion(byteCount: data.count, level: errorCorrection) else {
            throw .tooLong(capacity: QRCode.byteCapacity(version: 40, errorCorrection: errorCorrection))
        }
        let symbol = QRSymbol(data: data, version: version, level: errorCorrection)
        self.size = symbol.size
        self.version = version
        self.errorCorrection = errorCorrection
        self.mask = symbol.mask
        self.modules = symbol.modules
    }

    /// Encodes the UTF-8 bytes of `text`, as ``init(bytes:errorCorrection:)`` does. No ECI
    /// header is written; readers take byte-mode data that is valid UTF-8 as UTF-8.
    ///
    /// - Throws: ``QRCodeError/tooLong(capacity:)`` when the text's UTF-8 form does not fit.
    public init(text: String, errorCorrection: ErrorCorrection = .medium) throws(QRCodeError) {
        try self.init(bytes: text.utf8, errorCorrection: errorCorrection)
    }

    /// Whether the module at `row` (from the top) and `column` (from the left) is dark. Positions
    /// outside the symbol — the quiet zone — are light.
    public func isDark(row: Int, column: Int) -> Bool {
        guard row >= 0, row < size, column >= 0, column < size else { return false }
        return modules[row * size + column]
    }

    /// How many bytes a symbol of `version` (1 to 40) holds in byte mode at `errorCorrection`;
    /// 0 for a version outside 1 to 40.
    public static func byteCapacity(version: Int, errorCorrection: ErrorCorrection) -> Int {
        guard (1...40).contains(version) else { return 0 }
        return QRSymbol.byteCapacity(version: version, level: errorCorrection)
    }
}

/// Why a ``QRCode`` could not be made.
public enum QRCodeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The data is longer than the largest symbol (version 40) holds at the requested error
    /// correction level; `capacity` is that largest number of bytes.
    case tooLong(capacity: Int)

    /// A sentence for logs and error pages.
    public var description: String {
        switch self {
        case .tooLong(let capacity):
            "the data does not fit in a QR code: at most \(capacity) bytes fit at this error correction level"
        }
    }
}
