import Foundation
import GatehouseQRCode
import Testing

/// zbarimg (zbar-tools), the decoder the round trips read the PNGs back with.
enum ZBar {
    static let missing =
        "zbarimg is not installed (zbar-tools): run scripts/install-dependencies, or apt-get install zbar-tools"

    static let executable: URL? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin"]
        for directory in directories where !directory.isEmpty {
            let candidate = URL(fileURLWithPath: directory).appendingPathComponent("zbarimg")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }()

    /// What zbarimg reads from `png`, or `nil` when it finds no symbol. `binary` asks for the
    /// symbol's bytes as they are (`-Sbinary`); otherwise zbarimg prints text and a newline.
    static func decode(_ png: [UInt8], binary: Bool = false) async throws -> [UInt8]? {
        let tool = try #require(executable, Comment(rawValue: missing))
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("gatehouse-qrcode-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("code.png")
        let output = directory.appendingPathComponent("output")
        try Data(png).write(to: file)
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let outputHandle = try FileHandle(forWritingTo: output)
        defer { try? outputHandle.close() }

        let process = Process()
        process.executableURL = tool
        process.arguments = (binary ? ["-Sbinary"] : []) + ["--raw", "-q", file.path]
        process.standardOutput = outputHandle
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + .seconds(30)
        while process.isRunning {
            if ContinuousClock.now >= deadline {
                process.terminate()
                process.waitUntilExit()
                Issue.record("zbarimg did not finish within 30 s")
                return nil
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        process.waitUntilExit()
        // 0: a symbol was read; 4: none was found.
        guard process.terminationStatus == 0 else {
            #expect(process.terminationStatus == 4, "zbarimg failed with status \(process.terminationStatus)")
            return nil
        }
        var bytes = [UInt8](try Data(contentsOf: output))
        if !binary {
            guard bytes.last == 0x0A else {
                Issue.record("zbarimg's text does not end with a newline: \(bytes)")
                return bytes
            }
            bytes.removeLast()
        }
        return bytes
    }
}

/// A deterministic base64url-alphabet string, like the server's one-time codes.
func sampleCode(count: Int, seed: UInt64) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return String(
        (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return alphabet[Int(state % 64)]
        }
    )
}

@Suite("QR codes read back by zbarimg")
struct ZBarDecodingTests {
    struct Sample: Sendable, CustomTestStringConvertible {
        var name: String
        var text: String
        var level: QRCode.ErrorCorrection
        /// The version the standard's capacity table gives, or nil to accept any.
        var version: Int?
        var testDescription: String { "\(name) at \(level)" }
    }

    static let samples: [Sample] = [
        Sample(name: "short ASCII", text: "hi", level: .medium, version: 1),
        Sample(name: "a 60-character one-time code", text: sampleCode(count: 60, seed: 1), level: .medium, version: 4),
        Sample(name: "UTF-8 text", text: "Grüße aus Köln — 東京 ✓ 😀", level: .medium, version: 3),
        Sample(
            name: "14 bytes, the most version 1 holds",
            text: sampleCode(count: 14, seed: 2),
            level: .medium,
            version: 1
        ),
        Sample(name: "15 bytes", text: sampleCode(count: 15, seed: 3), level: .medium, version: 2),
        Sample(
            name: "122 bytes, version 7 (version information)",
            text: sampleCode(count: 122, seed: 4),
            level: .medium,
            version: 7
        ),
        Sample(name: "213 bytes", text: sampleCode(count: 213, seed: 5), level: .medium, version: 10),
        Sample(name: "666 bytes", text: sampleCode(count: 666, seed: 6), level: .medium, version: 20),
        Sample(name: "667 bytes", text: sampleCode(count: 667, seed: 7), level: .medium, version: 21),
        Sample(name: "17 bytes", text: sampleCode(count: 17, seed: 8), level: .low, version: 1),
        Sample(name: "11 bytes", text: sampleCode(count: 11, seed: 9), level: .quartile, version: 1),
        Sample(name: "7 bytes", text: sampleCode(count: 7, seed: 10), level: .high, version: 1),
        Sample(name: "64 bytes", text: sampleCode(count: 64, seed: 11), level: .high, version: 7),
        Sample(
            name: "a login URL",
            text: "https://login.example/device?code=" + sampleCode(count: 22, seed: 12),
            level: .quartile,
            version: nil
        ),
        Sample(name: "the longest at level H", text: sampleCode(count: 1273, seed: 13), level: .high, version: 40),
        Sample(name: "the longest at level L", text: sampleCode(count: 2953, seed: 14), level: .low, version: 40),
    ]

    @Test("chosen samples decode to their text, in the version the standard's table gives", arguments: samples)
    func chosenSamples(_ sample: Sample) async throws {
        let code = try QRCode(text: sample.text, errorCorrection: sample.level)
        if let version = sample.version { #expect(code.version == version) }
        #expect(code.size == 17 + 4 * code.version)
        let decoded = try #require(await ZBar.decode(code.png(scale: code.version > 20 ? 3 : 4)))
        #expect(String(decoding: decoded, as: UTF8.self) == sample.text)
    }

    @Test(
        "every version at every level, filled to capacity, decodes",
        arguments: Array(1...40),
        QRCode.ErrorCorrection.allCases
    )
    func everyVersion(version: Int, level: QRCode.ErrorCorrection) async throws {
        let capacity = QRCode.byteCapacity(version: version, errorCorrection: level)
        let levelIndex = QRCode.ErrorCorrection.allCases.firstIndex(of: level) ?? 0
        let text = sampleCode(count: capacity, seed: UInt64(version * 4 + levelIndex))
        let code = try QRCode(text: text, errorCorrection: level)
        #expect(code.version == version)
        #expect(code.errorCorrection == level)
        let decoded = try #require(await ZBar.decode(code.png(scale: 3, quietZone: 4)))
        #expect(String(decoding: decoded, as: UTF8.self) == text)
    }

    @Test("all 256 byte values survive byte mode", arguments: QRCode.ErrorCorrection.allCases)
    func binary(level: QRCode.ErrorCorrection) async throws {
        let bytes = (0...255).map { UInt8($0) } + (0...255).reversed().map { UInt8($0) }
        let code = try QRCode(bytes: bytes, errorCorrection: level)
        #expect(try #require(await ZBar.decode(code.png(scale: 3), binary: true)) == bytes)
    }

    @Test("a PNG of two pixels a module decodes")
    func smallScale() async throws {
        let text = sampleCode(count: 40, seed: 15)
        let code = try QRCode(text: text, errorCorrection: .medium)
        let decoded = try #require(await ZBar.decode(code.png(scale: 2, quietZone: 4)))
        #expect(String(decoding: decoded, as: UTF8.self) == text)
    }
}
