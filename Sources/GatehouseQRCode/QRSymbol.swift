// The encoder, after ISO/IEC 18004:2015: byte-mode data (7.4.5), Reed–Solomon error correction
// over GF(2⁸) (7.5), block interleaving (7.6), module placement (7.7), data masking and its
// penalty rules (7.8), and format and version information (7.9, 7.10).

/// One level's row in the standard's error correction table (Table 9), indexed by version − 1.
private struct LevelTable {
    /// Error correction codewords in each block.
    let codewordsPerBlock: [Int]
    /// Number of blocks the data is split into.
    let blocks: [Int]
}

private let lowTable = LevelTable(
    codewordsPerBlock: [
        7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28,
        28, 28, 30, 30, 26, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
    ],
    blocks: [
        1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8,
        8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17, 18, 19, 19, 20, 21, 22, 24, 25,
    ]
)

private let mediumTable = LevelTable(
    codewordsPerBlock: [
        10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26,
        26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    ],
    blocks: [
        1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16,
        17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49,
    ]
)

private let quartileTable = LevelTable(
    codewordsPerBlock: [
        13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30,
        28, 30, 30, 30, 30, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
    ],
    blocks: [
        1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20,
        23, 23, 25, 27, 29, 34, 34, 35, 38, 40, 43, 45, 48, 51, 53, 56, 59, 62, 65, 68,
    ]
)

private let highTable = LevelTable(
    codewordsPerBlock: [
        17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28,
        30, 24, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
    ],
    blocks: [
        1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25,
        25, 34, 30, 32, 35, 37, 40, 42, 45, 48, 51, 54, 57, 60, 63, 66, 70, 74, 77, 81,
    ]
)

extension QRCode.ErrorCorrection {
    fileprivate var table: LevelTable {
        switch self {
        case .low: lowTable
        case .medium: mediumTable
        case .quartile: quartileTable
        case .high: highTable
        }
    }

    /// The two bits the format information gives this level (Table 12).
    fileprivate var formatBits: Int {
        switch self {
        case .low: 0b01
        case .medium: 0b00
        case .quartile: 0b11
        case .high: 0b10
        }
    }
}

/// GF(2⁸) with the field polynomial x⁸ + x⁴ + x³ + x² + 1: `exponents[i]` is αⁱ (doubled in
/// length so a sum of two logarithms needs no reduction), `logarithms[x]` is log_α x.
private struct GaloisField: Sendable {
    let exponents: [UInt8]
    let logarithms: [UInt8]

    init() {
        var exponents = [UInt8](repeating: 0, count: 512)
        var logarithms = [UInt8](repeating: 0, count: 256)
        var value = 1
        for power in 0..<255 {
            exponents[power] = UInt8(value)
            logarithms[value] = UInt8(power)
            value <<= 1
            if value & 0x100 != 0 { value ^= 0x11D }
        }
        for power in 255..<512 { exponents[power] = exponents[power - 255] }
        self.exponents = exponents
        self.logarithms = logarithms
    }

    func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        if a == 0 || b == 0 { return 0 }
        return exponents[Int(logarithms[Int(a)]) + Int(logarithms[Int(b)])]
    }

    /// The generator polynomial (x − α⁰)(x − α¹)…(x − αⁿ⁻¹) for `degree` n, highest power first,
    /// without its leading coefficient (always 1).
    func generator(degree: Int) -> [UInt8] {
        var polynomial: [UInt8] = [1]
        for root in 0..<degree {
            var product = [UInt8](repeating: 0, count: polynomial.count + 1)
            for (index, coefficient) in polynomial.enumerated() {
                product[index] ^= coefficient
                product[index + 1] ^= multiply(coefficient, exponents[root])
            }
            polynomial = product
        }
        return Array(polynomial.dropFirst())
    }

    /// The remainder of data(x) · xⁿ divided by the generator: the block's error correction
    /// codewords, appended to `output`.
    func remainder(of data: ArraySlice<UInt8>, generator: [UInt8], into output: inout [UInt8]) {
        var remainder = [UInt8](repeating: 0, count: generator.count)
        for byte in data {
            let factor = byte ^ remainder[0]
            for index in 0..<(generator.count - 1) { remainder[index] = remainder[index + 1] }
            remainder[generator.count - 1] = 0
            if factor == 0 { continue }
            let logFactor = Int(logarithms[Int(factor)])
            for (index, coefficient) in generator.enumerated() where coefficient != 0 {
                remainder[index] ^= exponents[logFactor + Int(logarithms[Int(coefficient)])]
            }
        }
        output.append(contentsOf: remainder)
    }
}

private let field = GaloisField()

/// Appends values of a given bit width, most significant bit first, to whole bytes.
private struct BitBuffer {
    var bytes: [UInt8] = []
    var bitCount = 0

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func append(_ value: Int, bits: Int) {
        for shift in stride(from: bits - 1, through: 0, by: -1) {
            if bitCount % 8 == 0 { bytes.append(0) }
            if (value >> shift) & 1 != 0 { bytes[bytes.count - 1] |= UInt8(0x80 >> (bitCount % 8)) }
            bitCount += 1
        }
    }
}

/// A symbol under construction, then finished: the modules and which of them are function
/// patterns (finders, separators, timing, alignment, format and version information), which
/// hold no data and are never masked.
struct QRSymbol {
    let version: Int
    let size: Int
    private(set) var modules: [Bool]
    private var isFunction: [Bool]
    private(set) var mask = 0

    // MARK: Capacity

    /// Modules left for data and error correction codewords (remainder bits included) once the
    /// function patterns are placed.
    static func rawDataModules(version: Int) -> Int {
        var modules = (16 * version + 128) * version + 64  // size² − finders, separators, timing, format
        if version >= 2 {
            let alignments = version / 7 + 2
            modules -= (25 * alignments - 10) * alignments - 55
            if version >= 7 { modules -= 36 }
        }
        return modules
    }

    static func dataCodewords(version: Int, level: QRCode.ErrorCorrection) -> Int {
        let table = level.table
        return rawDataModules(version: version) / 8
            - table.codewordsPerBlock[version - 1] * table.blocks[version - 1]
    }

    /// Bits of the byte-mode character count indicator (Table 3).
    static func countBits(version: Int) -> Int { version <= 9 ? 8 : 16 }

    static func byteCapacity(version: Int, level: QRCode.ErrorCorrection) -> Int {
        (dataCodewords(version: version, level: level) * 8 - 4 - countBits(version: version)) / 8
    }

    static func smallestVersion(byteCount: Int, level: QRCode.ErrorCorrection) -> Int? {
        (1...40).first { byteCount <= byteCapacity(version: $0, level: level) }
    }

    /// Row and column centres of the alignment patterns (Annex E): 6, then evenly spaced (by an
    /// even step) back from `size − 7`.
    static func alignmentCentres(version: Int) -> [Int] {
        if version == 1 { return [] }
        let count = version / 7 + 2
        let step = version == 32 ? 26 : (version * 4 + count * 2 + 1) / (count * 2 - 2) * 2
        var centres = [6]
        for index in (0..<(count - 1)).reversed() { centres.append(17 + 4 * version - 7 - index * step) }
        return centres
    }

    // MARK: Encoding

    /// Encodes `data`, which must fit `version` at `level`.
    init(data: [UInt8], version: Int, level: QRCode.ErrorCorrection) {
        self.version = version
        self.size = 17 + 4 * version
        self.modules = [Bool](repeating: false, count: size * size)
        self.isFunction = [Bool](repeating: false, count: size * size)
        placeFunctionPatterns()
        let codewords = Self.codewords(data: data, version: version, level: level)
        placeCodewords(codewords)
        chooseMask(level: level)
    }

    /// The data codewords (mode, count, data, terminator, padding), split into blocks, each
    /// given its error correction codewords, and interleaved (7.6).
    private static func codewords(data: [UInt8], version: Int, level: QRCode.ErrorCorrection) -> [UInt8] {
        let capacity = dataCodewords(version: version, level: level)
        var buffer = BitBuffer(capacity: capacity)
        buffer.append(0b0100, bits: 4)  // byte mode
        buffer.append(data.count, bits: countBits(version: version))
        for byte in data { buffer.append(Int(byte), bits: 8) }
        buffer.append(0, bits: min(4, capacity * 8 - buffer.bitCount))  // terminator
        buffer.append(0, bits: (8 - buffer.bitCount % 8) % 8)
        var padding: UInt8 = 0xEC
        while buffer.bytes.count < capacity {
            buffer.bytes.append(padding)
            padding ^= 0xEC ^ 0x11
        }

        let table = level.table
        let blockCount = table.blocks[version - 1]
        let correctionLength = table.codewordsPerBlock[version - 1]
        let totalCodewords = rawDataModules(version: version) / 8
        let shortBlocks = blockCount - totalCodewords % blockCount
        let shortDataLength = totalCodewords / blockCount - correctionLength
        let generator = field.generator(degree: correctionLength)

        // Block i's data starts at dataStarts[i]; the long blocks (the last ones) hold one more.
        var dataStarts: [Int] = []
        dataStarts.reserveCapacity(blockCount + 1)
        var correction: [UInt8] = []
        correction.reserveCapacity(blockCount * correctionLength)
        var start = 0
        for block in 0..<blockCount {
            dataStarts.append(start)
            let length = shortDataLength + (block < shortBlocks ? 0 : 1)
            field.remainder(of: buffer.bytes[start..<(start + length)], generator: generator, into: &correction)
            start += length
        }

        var result: [UInt8] = []
        result.reserveCapacity(totalCodewords)
        for index in 0...shortDataLength {
            for block in 0..<blockCount where index < shortDataLength || block >= shortBlocks {
                result.append(buffer.bytes[dataStarts[block] + index])
            }
        }
        for index in 0..<correctionLength {
            for block in 0..<blockCount { result.append(correction[block * correctionLength + index]) }
        }
        return result
    }

    // MARK: Function patterns

    private mutating func setFunction(row: Int, column: Int, dark: Bool) {
        modules[row * size + column] = dark
        isFunction[row * size + column] = true
    }

    private mutating func placeFunctionPatterns() {
        for index in 0..<size {
            setFunction(row: 6, column: index, dark: index % 2 == 0)
            setFunction(row: index, column: 6, dark: index % 2 == 0)
        }
        placeFinder(row: 3, column: 3)
        placeFinder(row: 3, column: size - 4)
        placeFinder(row: size - 4, column: 3)

        let centres = Self.alignmentCentres(version: version)
        for (rowIndex, row) in centres.enumerated() {
            for (columnIndex, column) in centres.enumerated() {
                let last = centres.count - 1
                let onFinder =
                    (rowIndex == 0 && columnIndex == 0) || (rowIndex == 0 && columnIndex == last)
                    || (rowIndex == last && columnIndex == 0)
                if !onFinder { placeAlignment(row: row, column: column) }
            }
        }

        placeFormatInformation(0)  // reserves the area; the real bits come with the mask
        placeVersionInformation()
    }

    /// A finder pattern centred at (row, column) with its light separator, clipped to the symbol.
    private mutating func placeFinder(row: Int, column: Int) {
        for dy in -4...4 {
            for dx in -4...4 {
                let r = row + dy
                let c = column + dx
                guard r >= 0, r < size, c >= 0, c < size else { continue }
                let ring = max(abs(dx), abs(dy))
                setFunction(row: r, column: c, dark: ring != 2 && ring != 4)
            }
        }
    }

    private mutating func placeAlignment(row: Int, column: Int) {
        for dy in -2...2 {
            for dx in -2...2 { setFunction(row: row + dy, column: column + dx, dark: max(abs(dx), abs(dy)) != 1) }
        }
    }

    /// The 15 format bits (level and mask, BCH(15,5) protected, XOR 101010000010010) in both
    /// places, and the dark module beside the bottom-left finder (7.9).
    private mutating func placeFormatInformation(_ bits: Int) {
        func bit(_ index: Int) -> Bool { (bits >> index) & 1 != 0 }
        for index in 0...5 { setFunction(row: index, column: 8, dark: bit(index)) }
        setFunction(row: 7, column: 8, dark: bit(6))
        setFunction(row: 8, column: 8, dark: bit(7))
        setFunction(row: 8, column: 7, dark: bit(8))
        for index in 9..<15 { setFunction(row: 8, column: 14 - index, dark: bit(index)) }

        for index in 0..<8 { setFunction(row: 8, column: size - 1 - index, dark: bit(index)) }
        for index in 8..<15 { setFunction(row: size - 15 + index, column: 8, dark: bit(index)) }
        setFunction(row: size - 8, column: 8, dark: true)
    }

    static func formatBits(level: QRCode.ErrorCorrection, mask: Int) -> Int {
        let data = level.formatBits << 3 | mask
        var remainder = data
        for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
        return (data << 10 | remainder) ^ 0x5412
    }

    /// Version 7 and up: 18 bits (the version, BCH(18,6) protected) in two 6 × 3 blocks beside the
    /// top-right and bottom-left finders (7.10).
    private mutating func placeVersionInformation() {
        guard version >= 7 else { return }
        let bits = Self.versionBits(version)
        for index in 0..<18 {
            let dark = (bits >> index) & 1 != 0
            let near = index / 3
            let far = size - 11 + index % 3
            setFunction(row: near, column: far, dark: dark)
            setFunction(row: far, column: near, dark: dark)
        }
    }

    static func versionBits(_ version: Int) -> Int {
        var remainder = version
        for _ in 0..<12 { remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25) }
        return version << 12 | remainder
    }

    // MARK: Data placement and masking

    /// The codewords' bits, most significant first, in two-module columns zigzagging up and down
    /// from the bottom-right corner, skipping the vertical timing pattern and function modules
    /// (7.7.3). Modules left over (remainder bits) stay light.
    private mutating func placeCodewords(_ codewords: [UInt8]) {
        let totalBits = codewords.count * 8
        var bitIndex = 0
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }
            let upward = ((right + 1) & 2) == 0
            for step in 0..<size {
                let row = upward ? size - 1 - step : step
                for column in stride(from: right, through: right - 1, by: -1)
                where !isFunction[row * size + column] && bitIndex < totalBits {
                    modules[row * size + column] = (codewords[bitIndex >> 3] >> (7 - (bitIndex & 7))) & 1 != 0
                    bitIndex += 1
                }
            }
            right -= 2
        }
    }

    /// Whether data mask pattern `mask` inverts the module at (row, column) (Table 10).
    private static func masks(_ mask: Int, row: Int, column: Int) -> Bool {
        switch mask {
        case 0: (row + column) % 2 == 0
        case 1: row % 2 == 0
        case 2: column % 3 == 0
        case 3: (row + column) % 3 == 0
        case 4: (row / 2 + column / 3) % 2 == 0
        case 5: (row * column) % 2 + (row * column) % 3 == 0
        case 6: ((row * column) % 2 + (row * column) % 3) % 2 == 0
        default: ((row + column) % 2 + (row * column) % 3) % 2 == 0
        }
    }

    /// Inverts the data modules under `mask`.
    private mutating func applyMask(_ mask: Int) {
        var index = 0
        for row in 0..<size {
            for column in 0..<size {
                if !isFunction[index] && Self.masks(mask, row: row, column: column) { modules[index].toggle() }
                index += 1
            }
        }
    }

    /// Tries the eight masks with their format information and keeps the first with the lowest
    /// penalty (7.8.2).
    private mutating func chooseMask(level: QRCode.ErrorCorrection) {
        var best = 0
        var bestPenalty = Int.max
        let unmasked = modules  // each trial's first write copies the modules once
        for candidate in 0..<8 {
            applyMask(candidate)
            placeFormatInformation(Self.formatBits(level: level, mask: candidate))
            let penalty = self.penalty()
            if penalty < bestPenalty {
                best = candidate
                bestPenalty = penalty
            }
            modules = unmasked
        }
        applyMask(best)
        placeFormatInformation(Self.formatBits(level: level, mask: best))
        mask = best
    }

    // MARK: Penalty (7.8.3)

    /// N1 + N2 + N3 + N4 for the symbol as it stands.
    func penalty() -> Int { Self.penalty(modules, size: size) }

    /// N1 + N2 + N3 + N4 for `size × size` modules, row by row.
    static func penalty(_ modules: [Bool], size: Int) -> Int {
        var total = 0
        for line in 0..<size {
            total += linePenalty(modules, size: size, start: line * size, stride: 1)  // row
            total += linePenalty(modules, size: size, start: line, stride: size)  // column
        }
        // N2: 3 for each 2 × 2 block of one colour.
        for row in 0..<(size - 1) {
            for column in 0..<(size - 1) {
                let index = row * size + column
                let colour = modules[index]
                if modules[index + 1] == colour && modules[index + size] == colour
                    && modules[index + size + 1] == colour
                {
                    total += 3
                }
            }
        }
        // N4: 10 for each full 5 % the dark share lies away from 50 %.
        var dark = 0
        for module in modules { dark += module ? 1 : 0 }
        let all = size * size
        total += 10 * (abs(dark * 20 - all * 10) / all)
        return total
    }

    /// N1 (runs of five or more modules of one colour: 3, plus 1 for each module beyond five) and
    /// N3 (40 for each 1:1:3:1:1 finder-like pattern with four light modules on either side, the
    /// light quiet zone counting as light) along one row or column.
    private static func linePenalty(_ modules: [Bool], size: Int, start: Int, stride: Int) -> Int {
        var total = 0
        var runColour = false
        var runLength = 0
        // The last eleven modules seen, newest in bit 0, starting and ending with four light ones.
        var window = 0
        for offset in 0..<(size + 4) {
            let dark = offset < size ? modules[start + offset * stride] : false
            if offset < size {
                if offset > 0 && dark == runColour {
                    runLength += 1
                } else {
                    if runLength >= 5 { total += runLength - 2 }
                    runColour = dark
                    runLength = 1
                }
            }
            window = ((window << 1) | (dark ? 1 : 0)) & 0x7FF
            if window == 0b000_0101_1101 || window == 0b101_1101_0000 { total += 40 }
        }
        if runLength >= 5 { total += runLength - 2 }
        return total
    }
}
