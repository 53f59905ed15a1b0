/// A small PNG reader for the tests, written apart from the encoder: it checks the signature,
/// every chunk's CRC-32, the zlib header and Adler-32, inflates stored and fixed-Huffman deflate
/// blocks, undoes the five scanline filters, and gives greyscale images of 1 or 8 bits as one
/// brightness (0...255) per pixel.
struct PNGImage {
    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    var width = 0
    var height = 0
    var bitDepth = 0
    var colourType = -1
    /// Row by row, `width × height` values.
    var pixels: [UInt8] = []
    var chunkTypes: [String] = []

    func pixel(x: Int, y: Int) -> UInt8 { pixels[y * width + x] }

    init(_ bytes: [UInt8]) throws {
        guard bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else {
            throw Failure("no PNG signature")
        }
        var offset = 8
        var compressed: [UInt8] = []
        while offset < bytes.count {
            guard offset + 12 <= bytes.count else { throw Failure("truncated chunk header") }
            let length = Int(Self.bigEndian(bytes, offset))
            guard offset + 12 + length <= bytes.count else { throw Failure("truncated chunk") }
            let typeAndData = Array(bytes[(offset + 4)..<(offset + 8 + length)])
            let type = String(decoding: typeAndData[0..<4], as: UTF8.self)
            guard Self.bitwiseCRC32(typeAndData) == Self.bigEndian(bytes, offset + 8 + length) else {
                throw Failure("bad CRC in chunk \(type)")
            }
            chunkTypes.append(type)
            let data = Array(typeAndData[4...])
            switch type {
            case "IHDR":
                guard data.count == 13 else { throw Failure("IHDR is \(data.count) bytes") }
                width = Int(Self.bigEndian(data, 0))
                height = Int(Self.bigEndian(data, 4))
                bitDepth = Int(data[8])
                colourType = Int(data[9])
                guard data[10] == 0, data[11] == 0, data[12] == 0 else { throw Failure("unexpected IHDR methods") }
            case "IDAT": compressed += data
            default: break
            }
            offset += 12 + length
        }
        guard chunkTypes.first == "IHDR", chunkTypes.last == "IEND" else { throw Failure("chunks \(chunkTypes)") }
        guard colourType == 0, bitDepth == 1 || bitDepth == 8 else {
            throw Failure("colour type \(colourType), bit depth \(bitDepth)")
        }

        let raw = try Self.zlibDecompress(compressed)
        let rowBytes = (width * bitDepth + 7) / 8
        guard raw.count == height * (rowBytes + 1) else {
            throw Failure("\(raw.count) bytes of scanlines, \(height * (rowBytes + 1)) expected")
        }
        var previous = [UInt8](repeating: 0, count: rowBytes)
        pixels.reserveCapacity(width * height)
        for row in 0..<height {
            let start = row * (rowBytes + 1)
            var line = Array(raw[(start + 1)..<(start + 1 + rowBytes)])
            try Self.unfilter(&line, type: raw[start], previous: previous)
            for x in 0..<width {
                if bitDepth == 8 {
                    pixels.append(line[x])
                } else {
                    pixels.append((line[x / 8] >> (7 - x % 8)) & 1 == 1 ? 255 : 0)
                }
            }
            previous = line
        }
    }

    private static func bigEndian(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// CRC-32 bit by bit (no table), so it shares nothing with the encoder's.
    static func bitwiseCRC32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
        }
        return ~crc
    }

    /// The filters for one byte per pixel (bit depths up to 8).
    private static func unfilter(_ line: inout [UInt8], type: UInt8, previous: [UInt8]) throws {
        for index in line.indices {
            let left = index > 0 ? Int(line[index - 1]) : 0
            let up = Int(previous[index])
            let upLeft = index > 0 ? Int(previous[index - 1]) : 0
            let predictor: Int
            switch type {
            case 0: predictor = 0
            case 1: predictor = left
            case 2: predictor = up
            case 3: predictor = (left + up) / 2
            case 4:
                let estimate = left + up - upLeft
                let (a, b, c) = (abs(estimate - left), abs(estimate - up), abs(estimate - upLeft))
                predictor = a <= b && a <= c ? left : (b <= c ? up : upLeft)
            default: throw Failure("filter type \(type)")
            }
            line[index] = line[index] &+ UInt8(predictor & 0xFF)
        }
    }

    // MARK: zlib and inflate (RFC 1950, RFC 1951)

    static func zlibDecompress(_ bytes: [UInt8]) throws -> [UInt8] {
        guard bytes.count >= 6 else { throw Failure("zlib stream too short") }
        guard bytes[0] & 0x0F == 8, (Int(bytes[0]) << 8 | Int(bytes[1])) % 31 == 0, bytes[1] & 0x20 == 0 else {
            throw Failure("bad zlib header")
        }
        var reader = BitReader(bytes: bytes, byteOffset: 2)
        let output = try inflate(&reader)
        let trailer = reader.alignedByteOffset
        guard trailer + 4 == bytes.count else { throw Failure("\(bytes.count - trailer) bytes after the deflate data") }
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in output {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        guard bigEndian(bytes, trailer) == b << 16 | a else { throw Failure("bad Adler-32") }
        return output
    }

    private struct BitReader {
        let bytes: [UInt8]
        var byteOffset: Int
        var bitOffset = 0

        init(bytes: [UInt8], byteOffset: Int) {
            self.bytes = bytes
            self.byteOffset = byteOffset
        }

        mutating func bit() throws -> Int {
            guard byteOffset < bytes.count else { throw Failure("deflate data ends early") }
            let bit = Int(bytes[byteOffset] >> bitOffset) & 1
            bitOffset += 1
            if bitOffset == 8 {
                bitOffset = 0
                byteOffset += 1
            }
            return bit
        }

        /// `count` bits, least significant first.
        mutating func bits(_ count: Int) throws -> Int {
            var value = 0
            for index in 0..<count { value |= try bit() << index }
            return value
        }

        /// `count` bits of a Huffman code, most significant first, after `prefix`.
        mutating func code(_ prefix: Int, adding count: Int) throws -> Int {
            var value = prefix
            for _ in 0..<count { value = value << 1 | (try bit()) }
            return value
        }

        var alignedByteOffset: Int { bitOffset == 0 ? byteOffset : byteOffset + 1 }

        mutating func align() {
            if bitOffset != 0 {
                bitOffset = 0
                byteOffset += 1
            }
        }
    }

    private static let lengthBase = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ]
    private static let lengthExtra = [
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
    ]
    private static let distanceBase = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ]
    private static let distanceExtra = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
    ]

    private static func inflate(_ reader: inout BitReader) throws -> [UInt8] {
        var output: [UInt8] = []
        var final = false
        while !final {
            final = try reader.bit() == 1
            switch try reader.bits(2) {
            case 0:
                reader.align()
                let length = try reader.bits(16)
                guard try reader.bits(16) == length ^ 0xFFFF else { throw Failure("stored block LEN/NLEN mismatch") }
                for _ in 0..<length { output.append(UInt8(try reader.bits(8))) }
            case 1:
                while true {
                    let symbol = try fixedLiteralSymbol(&reader)
                    if symbol < 256 {
                        output.append(UInt8(symbol))
                        continue
                    }
                    if symbol == 256 { break }
                    guard symbol <= 285 else { throw Failure("length symbol \(symbol)") }
                    let length = lengthBase[symbol - 257] + (try reader.bits(lengthExtra[symbol - 257]))
                    let distanceCode = try reader.code(0, adding: 5)
                    guard distanceCode < 30 else { throw Failure("distance code \(distanceCode)") }
                    let distance = distanceBase[distanceCode] + (try reader.bits(distanceExtra[distanceCode]))
                    guard distance <= output.count else { throw Failure("distance \(distance) before the start") }
                    for _ in 0..<length { output.append(output[output.count - distance]) }
                }
            default: throw Failure("dynamic Huffman or reserved block type: not expected from this encoder")
            }
        }
        return output
    }

    private static func fixedLiteralSymbol(_ reader: inout BitReader) throws -> Int {
        let seven = try reader.code(0, adding: 7)
        if seven <= 0b001_0111 { return 256 + seven }
        let eight = try reader.code(seven, adding: 1)
        if (0x30...0xBF).contains(eight) { return eight - 0x30 }
        if (0xC0...0xC7).contains(eight) { return 280 + eight - 0xC0 }
        let nine = try reader.code(eight, adding: 1)
        guard (0x190...0x1FF).contains(nine) else { throw Failure("bad fixed code") }
        return 144 + nine - 0x190
    }
}
