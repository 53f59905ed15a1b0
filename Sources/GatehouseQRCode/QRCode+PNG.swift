extension QRCode {
    /// The symbol as a PNG image: 1-bit greyscale, black modules on white, with a zlib stream
    /// (RFC 1950) of one deflate block (RFC 1951) using the fixed Huffman codes, whose repeated
    /// bytes become back-references — every scanline that repeats the one above is filtered
    /// "Up" to zeros. A short code's image is a few kilobytes (version 5 at the defaults: about
    /// 2.5 KB; version 40: about 26 KB).
    ///
    /// - Parameters:
    ///   - scale: Pixels per module, clamped to 1...32 and then lowered so the image is at most
    ///     4,096 pixels wide (every version fits at scale 1 or more).
    ///   - quietZone: Light modules around the symbol, clamped to 0...16; the standard asks for 4.
    public func png(scale: Int = 6, quietZone: Int = 4) -> [UInt8] {
        let quietZone = min(max(quietZone, 0), 16)
        let extent = size + 2 * quietZone
        let scale = min(max(scale, 1), 32, max(1, 4096 / extent))
        let width = extent * scale
        let rowBytes = (width + 7) / 8

        var compressor = DeflateCompressor()
        var scanline = [UInt8](repeating: 0, count: rowBytes + 1)
        for moduleRow in 0..<extent {
            // One scanline of the module row, unfiltered (type 0): 1 is white.
            scanline[0] = 0
            for index in 1...rowBytes { scanline[index] = 0xFF }
            for moduleColumn in 0..<size where isDark(row: moduleRow - quietZone, column: moduleColumn) {
                let first = (moduleColumn + quietZone) * scale
                for x in first..<(first + scale) { scanline[1 + (x >> 3)] &= ~UInt8(0x80 >> (x & 7)) }
            }
            compressor.write(scanline)
            // The same scanline again, filtered "Up" (type 2): all zeros.
            for _ in 1..<scale {
                compressor.write(2)
                for _ in 0..<rowBytes { compressor.write(0) }
            }
        }

        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var header: [UInt8] = []
        header.appendBigEndian(UInt32(width))
        header.appendBigEndian(UInt32(width))
        header += [1, 0, 0, 0, 0]  // bit depth 1, greyscale, deflate, adaptive filtering, no interlace
        png.appendChunk("IHDR", header)
        png.appendChunk("IDAT", compressor.finish())
        png.appendChunk("IEND", [])
        return png
    }
}

extension [UInt8] {
    fileprivate mutating func appendBigEndian(_ value: UInt32) {
        append(contentsOf: [
            UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF),
        ])
    }

    /// A PNG chunk: length, type, data, and the CRC-32 of type and data.
    fileprivate mutating func appendChunk(_ type: String, _ data: [UInt8]) {
        appendBigEndian(UInt32(data.count))
        let start = count
        append(contentsOf: type.utf8)
        append(contentsOf: data)
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in self[start...] { crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        appendBigEndian(crc ^ 0xFFFF_FFFF)
    }
}

/// CRC-32 (ISO 3309, reflected polynomial 0xEDB88320), one entry per byte value.
private let crcTable: [UInt32] = (0..<256).map { value in
    var crc = UInt32(value)
    for _ in 0..<8 { crc = crc & 1 != 0 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
    return crc
}

/// Deflate length codes 257...285: the shortest length of each and its number of extra bits.
private let lengthBases: [Int] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258,
]
private let lengthExtraBits: [Int] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
]

/// A zlib stream of one fixed-Huffman deflate block, written a byte at a time: each byte is a
/// literal, except that a run of three or more copies of the byte before it becomes a
/// back-reference at distance 1.
private struct DeflateCompressor {
    private var output: [UInt8] = [0x78, 0x01]  // deflate, 32 KiB window; check bits; no dictionary
    private var bits: UInt64 = 0
    private var bitCount = 0
    private var previous = -1
    private var pendingRun = 0
    private var adlerA: UInt32 = 1
    private var adlerB: UInt32 = 0
    private var sinceReduction = 0

    init() {
        writeBits(1, count: 1)  // BFINAL: the last block
        writeBits(1, count: 2)  // BTYPE 01: fixed Huffman codes
    }

    mutating func write(_ bytes: [UInt8]) {
        for byte in bytes { write(byte) }
    }

    mutating func write(_ byte: UInt8) {
        adlerA += UInt32(byte)
        adlerB += adlerA
        sinceReduction += 1
        if sinceReduction == 5552 {  // the most bytes before adlerB could overflow
            adlerA %= 65521
            adlerB %= 65521
            sinceReduction = 0
        }

        if Int(byte) == previous {
            pendingRun += 1
            if pendingRun == 258 { flushRun() }
            return
        }
        flushRun()
        writeLiteral(Int(byte))
        previous = Int(byte)
    }

    /// The end-of-block code, the last bits padded to a byte, and the Adler-32 checksum.
    mutating func finish() -> [UInt8] {
        flushRun()
        writeLiteral(256)
        if bitCount > 0 { writeBits(0, count: 8 - bitCount) }
        let adler = (adlerB % 65521) << 16 | (adlerA % 65521)
        output += [UInt8(adler >> 24), UInt8(adler >> 16 & 0xFF), UInt8(adler >> 8 & 0xFF), UInt8(adler & 0xFF)]
        return output
    }

    private mutating func flushRun() {
        if pendingRun >= 3 {
            let code = lengthBases.lastIndex { $0 <= pendingRun } ?? 0
            writeLiteral(257 + code)
            writeBits(pendingRun - lengthBases[code], count: lengthExtraBits[code])
            writeHuffman(0, length: 5)  // distance code 0: distance 1
        } else {
            for _ in 0..<pendingRun { writeLiteral(previous) }
        }
        pendingRun = 0
    }

    /// A literal/length symbol in the fixed code (RFC 1951, 3.2.6).
    private mutating func writeLiteral(_ symbol: Int) {
        switch symbol {
        case ..<144: writeHuffman(0x30 + symbol, length: 8)
        case ..<256: writeHuffman(0x190 + symbol - 144, length: 9)
        case ..<280: writeHuffman(symbol - 256, length: 7)
        default: writeHuffman(0xC0 + symbol - 280, length: 8)
        }
    }

    /// Huffman codes go most significant bit first.
    private mutating func writeHuffman(_ code: Int, length: Int) {
        var reversed = 0
        for index in 0..<length { reversed |= ((code >> index) & 1) << (length - 1 - index) }
        writeBits(reversed, count: length)
    }

    /// Everything else goes least significant bit first.
    private mutating func writeBits(_ value: Int, count: Int) {
        bits |= UInt64(value) << UInt64(bitCount)
        bitCount += count
        while bitCount >= 8 {
            output.append(UInt8(bits & 0xFF))
            bits >>= 8
            bitCount -= 8
        }
    }
}
