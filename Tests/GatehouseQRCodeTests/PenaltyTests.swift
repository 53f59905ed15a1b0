import Testing

@testable import GatehouseQRCode

/// The penalty of 7.8.3 written plainly, apart from the encoder's, for row-major modules: N1 runs
/// of five or more, N2 2 × 2 blocks, N3 1:1:3:1:1 patterns with four light modules (the quiet
/// zone counts as light) before or after, N4 the dark share's distance from half in whole 5 % steps.
func referencePenalty(_ modules: [Bool], size: Int) -> Int {
    var total = 0
    let rows = (0..<size).map { row in (0..<size).map { modules[row * size + $0] } }
    let columns = (0..<size).map { column in (0..<size).map { modules[$0 * size + column] } }
    for line in rows + columns {
        var run = 1
        for index in 1..<size {
            if line[index] == line[index - 1] {
                run += 1
            } else {
                if run >= 5 { total += run - 2 }
                run = 1
            }
        }
        if run >= 5 { total += run - 2 }
        let padded = [Bool](repeating: false, count: 4) + line + [Bool](repeating: false, count: 4)
        let before: [Bool] = [false, false, false, false, true, false, true, true, true, false, true]
        let after = Array(before.reversed())
        for start in 0...(padded.count - 11) {
            let window = padded[start..<(start + 11)]
            if window.elementsEqual(before) { total += 40 }
            if window.elementsEqual(after) { total += 40 }
        }
    }
    for row in 0..<(size - 1) {
        for column in 0..<(size - 1) {
            let block = [rows[row][column], rows[row][column + 1], rows[row + 1][column], rows[row + 1][column + 1]]
            if block.allSatisfy({ $0 }) || block.allSatisfy({ !$0 }) { total += 3 }
        }
    }
    let dark = modules.filter { $0 }.count
    total += 10 * (abs(dark * 100 - size * size * 50) / (size * size * 5))
    return total
}

@Suite("QR code mask penalty")
struct PenaltyTests {
    private static func matrix(size: Int, _ dark: (Int, Int) -> Bool) -> [Bool] {
        (0..<(size * size)).map { dark($0 / size, $0 % size) }
    }

    @Test("hand-counted penalties")
    func handCounted() {
        // All light: a run of 21 in each of 42 lines (19 each), 400 blocks (3 each), 0 % dark.
        let light = Self.matrix(size: 21) { _, _ in false }
        #expect(referencePenalty(light, size: 21) == 42 * 19 + 400 * 3 + 100)
        #expect(QRSymbol.penalty(light, size: 21) == 42 * 19 + 400 * 3 + 100)
        // A checkerboard: no runs, no blocks, no finder-like patterns, 221 of 441 dark.
        let checkerboard = Self.matrix(size: 21) { ($0 + $1) % 2 == 0 }
        #expect(referencePenalty(checkerboard, size: 21) == 0)
        #expect(QRSymbol.penalty(checkerboard, size: 21) == 0)
        // Columns striped 1011101, then four light ones: every row is a 1:1:3:1:1 pattern with light
        // on both sides (2 × 40); every column is one run of 11 (9 each); 10 × 5 two-by-two blocks
        // of one colour (columns 2–3, 3–4, 7–8, 8–9, 9–10); 55 of 121 dark is within 5 % of half.
        let stripes = Self.matrix(size: 11) { _, column in column < 7 && column != 1 && column != 5 }
        #expect(referencePenalty(stripes, size: 11) == 11 * 80 + 11 * 9 + 10 * 5 * 3)
        #expect(QRSymbol.penalty(stripes, size: 11) == 11 * 80 + 11 * 9 + 10 * 5 * 3)
        // The same turned a quarter: the rules treat rows and columns alike.
        let turned = Self.matrix(size: 11) { row, _ in row < 7 && row != 1 && row != 5 }
        #expect(QRSymbol.penalty(turned, size: 11) == 11 * 80 + 11 * 9 + 10 * 5 * 3)
        // One dark module in the middle of 25 × 25: 24 rows and 24 columns of one run (23 each), the
        // middle row and column split into two runs of 12 (10 each); 572 of 576 blocks of one
        // colour; 0.16 % dark is 9 whole 5 % steps from half.
        let sparse = Self.matrix(size: 25) { row, column in row == 12 && column == 12 }
        #expect(referencePenalty(sparse, size: 25) == 2 * (24 * 23 + 2 * 10) + 572 * 3 + 90)
        #expect(QRSymbol.penalty(sparse, size: 25) == 2 * (24 * 23 + 2 * 10) + 572 * 3 + 90)
    }

    @Test("the encoder's penalty agrees with the plain one on random matrices", arguments: [21, 25, 45, 57])
    func randomMatrices(size: Int) {
        var state: UInt64 = 0x1234_5678_9ABC_DEF1 &* UInt64(size)
        for density in [2, 4, 8, 12, 14] {
            for _ in 0..<10 {
                let modules = (0..<(size * size)).map { _ in
                    state ^= state << 13
                    state ^= state >> 7
                    state ^= state << 17
                    return Int(state % 16) < density
                }
                #expect(QRSymbol.penalty(modules, size: size) == referencePenalty(modules, size: size))
            }
        }
    }
}
