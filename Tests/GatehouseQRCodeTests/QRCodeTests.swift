import Foundation
import GatehouseQRCode
import Testing

#if canImport(FoundationXML)
import FoundationXML
#endif

/// Byte-mode capacities from the standard's Table 7 (versions 1, 2, 7, 10, 20, 40; L, M, Q, H).
private let standardCapacities: [(version: Int, capacities: [Int])] = [
    (1, [17, 14, 11, 7]), (2, [32, 26, 20, 14]), (7, [154, 122, 86, 64]), (10, [271, 213, 151, 119]),
    (20, [858, 666, 482, 382]), (40, [2953, 2331, 1663, 1273]),
]

/// Alignment pattern centres from the standard's Annex E, for some versions.
private let standardAlignmentCentres: [Int: [Int]] = [
    2: [6, 18], 3: [6, 22], 4: [6, 26], 5: [6, 30], 6: [6, 34], 7: [6, 22, 38], 14: [6, 26, 46, 66],
    21: [6, 28, 50, 72, 94],
    32: [6, 34, 60, 86, 112, 138], 36: [6, 24, 50, 76, 102, 128, 154], 39: [6, 26, 54, 82, 110, 138, 166],
    40: [6, 30, 58, 86, 114, 142, 170],
]

/// The format information's level bits (Table 12).
private func levelBits(_ level: QRCode.ErrorCorrection) -> Int {
    switch level {
    case .low: 0b01
    case .medium: 0b00
    case .quartile: 0b11
    case .high: 0b10
    }
}

/// BCH(15,5) by long division, then the XOR mask (7.9.1).
private func formatInformation(level: QRCode.ErrorCorrection, mask: Int) -> Int {
    let data = levelBits(level) << 3 | mask
    var value = data << 10
    for bit in stride(from: 14, through: 10, by: -1) where (value >> bit) & 1 == 1 {
        value ^= 0b101_0011_0111 << (bit - 10)
    }
    return (data << 10 | value) ^ 0b101_0100_0001_0010
}

/// BCH(18,6) by long division (7.10).
private func versionInformation(_ version: Int) -> Int {
    var value = version << 12
    for bit in stride(from: 17, through: 12, by: -1) where (value >> bit) & 1 == 1 {
        value ^= 0b1_1111_0010_0101 << (bit - 12)
    }
    return version << 12 | value
}

/// Where the format information's bits go, bit 14 first: around the top-left finder, and split
/// between the bottom-left and top-right ones (7.9.1).
private func formatPositions(size: Int) -> (aroundTopLeft: [(row: Int, column: Int)], split: [(row: Int, column: Int)])
{
    let aroundTopLeft: [(row: Int, column: Int)] = [
        (8, 0), (8, 1), (8, 2), (8, 3), (8, 4), (8, 5), (8, 7), (8, 8), (7, 8), (5, 8), (4, 8), (3, 8), (2, 8), (1, 8),
        (0, 8),
    ]
    let split: [(row: Int, column: Int)] = (1...7).map { (size - $0, 8) } + (0..<8).map { (8, size - 8 + $0) }
    return (aroundTopLeft, split)
}

/// The data masks of Table 10, by row and column.
private let maskPatterns: [@Sendable (Int, Int) -> Bool] = [
    { i, j in (i + j) % 2 == 0 },
    { i, _ in i % 2 == 0 },
    { _, j in j % 3 == 0 },
    { i, j in (i + j) % 3 == 0 },
    { i, j in (i / 2 + j / 3) % 2 == 0 },
    { i, j in (i * j) % 2 + (i * j) % 3 == 0 },
    { i, j in ((i * j) % 2 + (i * j) % 3) % 2 == 0 },
    { i, j in ((i + j) % 2 + (i * j) % 3) % 2 == 0 },
]

/// The modules no mask touches: finders with separators and the format areas, timing,
/// alignment patterns and version information.
private func functionModules(size: Int, version: Int, alignmentCentres: [Int]) -> [Bool] {
    var function = [Bool](repeating: false, count: size * size)
    func mark(_ rows: Range<Int>, _ columns: Range<Int>) {
        for row in rows { for column in columns { function[row * size + column] = true } }
    }
    mark(0..<9, 0..<9)
    mark(0..<9, (size - 8)..<size)
    mark((size - 8)..<size, 0..<9)
    for row in alignmentCentres {
        for column in alignmentCentres where !function[row * size + column] {  // not on a finder
            mark((row - 2)..<(row + 3), (column - 2)..<(column + 3))
        }
    }
    mark(6..<7, 0..<size)
    mark(0..<size, 6..<7)
    if version >= 7 {
        mark(0..<6, (size - 11)..<(size - 8))
        mark((size - 11)..<(size - 8), 0..<6)
    }
    return function
}

private func bits(_ code: QRCode, _ positions: [(row: Int, column: Int)]) -> Int {
    positions.reduce(0) { $0 << 1 | (code.isDark(row: $1.row, column: $1.column) ? 1 : 0) }
}

@Suite("QR code encoder")
struct QRCodeTests {
    // MARK: Capacity and versions

    @Test("capacities are the standard's")
    func capacities() {
        for (version, capacities) in standardCapacities {
            for (level, capacity) in zip(QRCode.ErrorCorrection.allCases, capacities) {
                #expect(QRCode.byteCapacity(version: version, errorCorrection: level) == capacity)
            }
        }
        #expect(QRCode.byteCapacity(version: 0, errorCorrection: .low) == 0)
        #expect(QRCode.byteCapacity(version: 41, errorCorrection: .low) == 0)
    }

    @Test("the smallest version that holds the data is chosen", arguments: QRCode.ErrorCorrection.allCases)
    func smallestVersion(level: QRCode.ErrorCorrection) throws {
        var previousCapacity = 0
        for version in 1...40 {
            let capacity = QRCode.byteCapacity(version: version, errorCorrection: level)
            #expect(capacity > previousCapacity)
            #expect(
                try QRCode(bytes: [UInt8](repeating: 0x41, count: previousCapacity + 1), errorCorrection: level).version
                    == version
            )
            // (Filled to capacity, each version is checked in ZBarDecodingTests.everyVersion.)
            previousCapacity = capacity
        }
        #expect(try QRCode(bytes: [], errorCorrection: level).version == 1)
    }

    @Test(
        "data longer than version 40 holds is refused",
        arguments: zip(QRCode.ErrorCorrection.allCases, [2953, 2331, 1663, 1273])
    )
    func tooLong(level: QRCode.ErrorCorrection, capacity: Int) throws {
        #expect(throws: QRCodeError.tooLong(capacity: capacity)) {
            try QRCode(bytes: [UInt8](repeating: 0x30, count: capacity + 1), errorCorrection: level)
        }
        #expect(throws: QRCodeError.tooLong(capacity: capacity)) {
            try QRCode(text: String(repeating: "é", count: capacity / 2 + 1), errorCorrection: level)
        }
        #expect(throws: QRCodeError.tooLong(capacity: capacity)) {
            try QRCode(bytes: [UInt8](repeating: 0x30, count: 100_000), errorCorrection: level)
        }
        #expect(QRCodeError.tooLong(capacity: capacity).description.contains("\(capacity) bytes"))
        #expect(try QRCode(bytes: [UInt8](repeating: 0x30, count: capacity), errorCorrection: level).version == 40)
    }

    @Test("the default level is M, and text is encoded as its UTF-8 bytes")
    func defaults() throws {
        let text = try QRCode(text: "Grüße")
        let bytes = try QRCode(bytes: Array("Grüße".utf8), errorCorrection: .medium)
        #expect(text.errorCorrection == .medium)
        #expect(text.size == bytes.size && text.mask == bytes.mask)
        for row in 0..<text.size {
            for column in 0..<text.size {
                #expect(text.isDark(row: row, column: column) == bytes.isDark(row: row, column: column))
            }
        }
        #expect(!text.isDark(row: -1, column: 0) && !text.isDark(row: 0, column: text.size))
    }

    // MARK: Function patterns, format and version information

    @Test(
        "finders, timing, alignment, format and version information are where the standard puts them",
        arguments: 1...40
    )
    func functionPatterns(version: Int) throws {
        let level = QRCode.ErrorCorrection.allCases[version % 4]
        let code = try QRCode(
            bytes: [UInt8](repeating: 0x5A, count: QRCode.byteCapacity(version: version, errorCorrection: level)),
            errorCorrection: level
        )
        let size = code.size
        #expect(code.version == version && size == 17 + 4 * version)
        #expect((0...7).contains(code.mask))

        // Finder patterns with their light separators.
        for (top, left) in [(0, 0), (0, size - 7), (size - 7, 0)] {
            for dy in -1...7 {
                for dx in -1...7 {
                    let row = top + dy
                    let column = left + dx
                    guard row >= 0, row < size, column >= 0, column < size else { continue }
                    let ring = max(abs(dy - 3), abs(dx - 3))
                    #expect(
                        code.isDark(row: row, column: column) == (ring != 2 && ring != 4),
                        "finder at \(row),\(column)"
                    )
                }
            }
        }
        // Timing patterns between the finders.
        for index in 8..<(size - 8) {
            #expect(code.isDark(row: 6, column: index) == index.isMultiple(of: 2))
            #expect(code.isDark(row: index, column: 6) == index.isMultiple(of: 2))
        }
        #expect(code.isDark(row: size - 8, column: 8), "the dark module")

        // Alignment patterns.
        if let centres = standardAlignmentCentres[version] {
            for row in centres {
                for column in centres
                where !(row == 6 && column == 6) && !(row == 6 && column == centres.last)
                    && !(row == centres.last && column == 6)
                {
                    for dy in -2...2 {
                        for dx in -2...2 {
                            #expect(code.isDark(row: row + dy, column: column + dx) == (max(abs(dx), abs(dy)) != 1))
                        }
                    }
                }
            }
        }

        // Format information: bit 14 first, around the top-left finder, then split between the
        // bottom-left and top-right ones.
        let (aroundTopLeft, split) = formatPositions(size: size)
        let expected = formatInformation(level: level, mask: code.mask)
        #expect(bits(code, aroundTopLeft) == expected)
        #expect(bits(code, split) == expected)

        // Version information: bit 17 first; 6 × 3 bottom left, 3 × 6 top right.
        if version >= 7 {
            var bottomLeft: [(row: Int, column: Int)] = []
            var topRight: [(row: Int, column: Int)] = []
            for index in (0..<18).reversed() {
                bottomLeft.append((size - 11 + index % 3, index / 3))
                topRight.append((index / 3, size - 11 + index % 3))
            }
            #expect(bits(code, bottomLeft) == versionInformation(version))
            #expect(bits(code, topRight) == versionInformation(version))
        }
    }

    @Test(
        "the mask chosen scores lowest of the eight under the penalty rules",
        arguments: [1, 2, 3, 4, 5, 6, 7, 14, 21, 32, 40]
    )
    func maskChoice(version: Int) throws {
        let centres = standardAlignmentCentres[version] ?? []
        // Codes, and data whose runs and patterns differ from a code's: more near-ties to settle.
        let kinds = version <= 7 ? 3 : 1
        for trial in 0..<(4 * kinds) {
            let level = QRCode.ErrorCorrection.allCases[trial % 4]
            let capacity = QRCode.byteCapacity(version: version, errorCorrection: level)
            let count = capacity - trial / 4
            let data: [UInt8] =
                switch trial / 4 {
                case 0: Array(sampleCode(count: count, seed: UInt64(version * 10 + trial)).utf8)
                case 1: [UInt8](repeating: 0, count: count)
                case 2: [UInt8](repeating: 0xFF, count: count)
                case 3: (0..<count).map { UInt8($0 & 0xFF) }
                case 4: (0..<count).map { $0 % 3 == 0 ? 0xF0 : 0x0F }
                default: Array(sampleCode(count: count, seed: UInt64(version * 100 + trial)).utf8)
                }
            let code = try QRCode(bytes: data, errorCorrection: level)
            #expect(code.version == version)
            let size = code.size
            let function = functionModules(size: size, version: version, alignmentCentres: centres)
            // The symbol with the chosen mask undone, then each mask applied with its format bits.
            var unmasked = [Bool](repeating: false, count: size * size)
            for row in 0..<size {
                for column in 0..<size {
                    let index = row * size + column
                    unmasked[index] =
                        code.isDark(row: row, column: column)
                        != (!function[index] && maskPatterns[code.mask](row, column))
                }
            }
            let (aroundTopLeft, split) = formatPositions(size: size)
            var scores: [Int] = []
            for mask in 0..<8 {
                var candidate = unmasked
                for row in 0..<size {
                    for column in 0..<size where !function[row * size + column] && maskPatterns[mask](row, column) {
                        candidate[row * size + column].toggle()
                    }
                }
                let format = formatInformation(level: level, mask: mask)
                for positions in [aroundTopLeft, split] {
                    for (bit, position) in positions.enumerated() {
                        candidate[position.row * size + position.column] = (format >> (14 - bit)) & 1 == 1
                    }
                }
                if mask == code.mask {
                    #expect(
                        (0..<(size * size)).allSatisfy {
                            candidate[$0] == code.isDark(row: $0 / size, column: $0 % size)
                        }
                    )
                }
                scores.append(referencePenalty(candidate, size: size))
            }
            #expect(scores[code.mask] == scores.min(), "mask \(code.mask) chosen; penalties \(scores)")
        }
    }

    @Test("the format and version information helpers give the standard's examples")
    func informationExamples() {
        #expect(formatInformation(level: .medium, mask: 0b101) == 0b100_0000_1100_1110)  // Annex C
        #expect(formatInformation(level: .low, mask: 0) == 0b111_0111_1100_0100)
        #expect(formatInformation(level: .high, mask: 0) == 0b001_0110_1000_1001)
        #expect(versionInformation(7) == 0x07C94)  // Annex D
        #expect(versionInformation(40) == 0x28C69)
    }

    @Test("no mask leaves the symbol mostly dark or light")
    func darkShare() throws {
        for length in [1, 20, 100, 500] {
            let code = try QRCode(bytes: [UInt8](repeating: 0, count: length), errorCorrection: .low)
            var dark = 0
            for row in 0..<code.size {
                for column in 0..<code.size where code.isDark(row: row, column: column) { dark += 1 }
            }
            let share = Double(dark) / Double(code.size * code.size)
            #expect(share > 0.35 && share < 0.65, "dark share \(share) for \(length) zero bytes")
        }
    }

    // MARK: SVG

    @Test("the SVG is one path that draws exactly the dark modules", arguments: [(1, 4, 4), (7, 1, 0), (25, 3, 16)])
    func svgMatchesTheMatrix(version: Int, moduleSize: Int, quietZone: Int) throws {
        let code = try QRCode(
            text: sampleCode(count: QRCode.byteCapacity(version: version, errorCorrection: .medium), seed: 99)
        )
        #expect(code.version == version)
        let svg = code.svg(moduleSize: moduleSize, quietZone: quietZone, title: "Sign in with <code> & \"more\"")
        let extent = code.size + 2 * quietZone
        let pixels = extent * moduleSize

        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(extent) \(extent)\""))
        #expect(svg.contains(" width=\"\(pixels)\" height=\"\(pixels)\""))
        #expect(svg.contains("role=\"img\"") && svg.contains("shape-rendering=\"crispEdges\""))
        #expect(!svg.contains("<?xml"))
        #expect(svg.hasSuffix("</svg>"))
        #expect(svg.components(separatedBy: "<path").count == 2)
        #expect(svg.contains("<rect width=\"\(extent)\" height=\"\(extent)\" fill=\"#fff\"/>"))

        let parsed = try SVGContents(svg)
        #expect(parsed.title == "Sign in with <code> & \"more\"")
        #expect(parsed.elements == ["svg", "title", "rect", "path"])

        // Every rectangle of the path: one row high, and together covering each dark module once.
        var covered = [Int](repeating: 0, count: extent * extent)
        var rectangles = 0
        #expect(parsed.pathData.wholeMatch(of: /(M\d+ \d+h\d+v1h-\d+z)+/) != nil, "path data \(parsed.pathData)")
        for command in parsed.pathData.matches(of: /M(\d+) (\d+)h(\d+)v1h-(\d+)z/) {
            let (x, y, width, back) = (Int(command.1) ?? -1, Int(command.2) ?? -1, Int(command.3) ?? -1, Int(command.4))
            #expect(width == back && width > 0 && x >= 0 && y >= 0 && x + width <= extent && y < extent)
            guard width > 0, x >= 0, y >= 0, x + width <= extent, y < extent else { continue }
            for column in x..<(x + width) { covered[y * extent + column] += 1 }
            rectangles += 1
        }
        var runs = 0
        for row in 0..<extent {
            for column in 0..<extent {
                let dark = code.isDark(row: row - quietZone, column: column - quietZone)
                #expect(covered[row * extent + column] == (dark ? 1 : 0), "module \(row),\(column)")
                if dark && !code.isDark(row: row - quietZone, column: column - quietZone - 1) { runs += 1 }
            }
        }
        #expect(rectangles == runs, "one rectangle per horizontal run")
    }

    @Test("the SVG without a title, and with numbers out of range clamped")
    func svgOptions() throws {
        let code = try QRCode(text: "123")
        let plain = code.svg()
        #expect(!plain.contains("<title>"))
        #expect(plain.contains("viewBox=\"0 0 29 29\" width=\"116\" height=\"116\""))
        let clamped = code.svg(moduleSize: 0, quietZone: -5)
        #expect(clamped.contains("viewBox=\"0 0 21 21\" width=\"21\" height=\"21\""))
        #expect(code.svg(moduleSize: 1000, quietZone: 100).contains("viewBox=\"0 0 53 53\" width=\"3392\""))
        let controls = try SVGContents(code.svg(title: "a\u{1}b\tc'd"))
        #expect(controls.title == "ab\tc'd")
    }

    // MARK: PNG

    @Test(
        "the PNG is the matrix, pixel by pixel, with valid CRCs and Adler-32",
        arguments: [(1, 1, 0), (5, 6, 4), (14, 3, 2), (40, 2, 4)]
    )
    func pngMatchesTheMatrix(version: Int, scale: Int, quietZone: Int) throws {
        let code = try QRCode(
            text: sampleCode(count: QRCode.byteCapacity(version: version, errorCorrection: .quartile), seed: 7),
            errorCorrection: .quartile
        )
        #expect(code.version == version)
        let image = try PNGImage(code.png(scale: scale, quietZone: quietZone))
        let width = (code.size + 2 * quietZone) * scale
        #expect(image.chunkTypes == ["IHDR", "IDAT", "IEND"])
        #expect(image.width == width && image.height == width)
        #expect(image.colourType == 0 && (image.bitDepth == 1 || image.bitDepth == 8))
        var wrong = 0
        for y in 0..<width {
            for x in 0..<width {
                let dark = code.isDark(row: y / scale - quietZone, column: x / scale - quietZone)
                if image.pixel(x: x, y: y) != (dark ? 0 : 255) { wrong += 1 }
            }
        }
        #expect(wrong == 0)
    }

    @Test("the PNG's scale and quiet zone are bounded, and large symbols stay small")
    func pngBounds() throws {
        let small = try QRCode(text: "x")
        #expect(try PNGImage(small.png(scale: 0, quietZone: -1)).width == 21)
        #expect(try PNGImage(small.png(scale: 1000, quietZone: 1000)).width == (21 + 32) * 32)
        let large = try QRCode(bytes: [UInt8](repeating: 0x41, count: 2331))
        let largest = try PNGImage(large.png(scale: 32, quietZone: 16))
        #expect(largest.width <= 4096 && largest.width == (177 + 32) * (4096 / 209))
        let png = large.png()
        let rowBytes = ((177 + 8) * 6 + 7) / 8 + 1
        #expect(png.count < rowBytes * (177 + 8) * 6 / 3, "\(png.count) bytes")
        #expect(try PNGImage(png).width == (177 + 8) * 6)
    }
}

/// An SVG parsed as XML: the element names in order, the title's text and the path's `d`.
private struct SVGContents {
    var elements: [String] = []
    var title = ""
    var pathData = ""

    init(_ svg: String) throws {
        let parser = XMLParser(data: Data(svg.utf8))
        let collector = Collector()
        parser.delegate = collector
        guard parser.parse() else {
            throw SVGError(description: "not well-formed XML: \(String(describing: parser.parserError))")
        }
        elements = collector.elements
        title = collector.title
        pathData = collector.pathData
    }

    struct SVGError: Error, CustomStringConvertible { var description: String }

    private final class Collector: NSObject, XMLParserDelegate {
        var elements: [String] = []
        var title = ""
        var pathData = ""
        var inTitle = false

        func parser(
            _ parser: XMLParser,
            didStartElement elementName: String,
            namespaceURI: String?,
            qualifiedName: String?,
            attributes: [String: String]
        ) {
            elements.append(elementName)
            inTitle = elementName == "title"
            if elementName == "path" { pathData = attributes["d"] ?? "" }
        }

        func parser(
            _ parser: XMLParser,
            didEndElement elementName: String,
            namespaceURI: String?,
            qualifiedName: String?
        ) {
            inTitle = false
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if inTitle { title += string }
        }
    }
}
