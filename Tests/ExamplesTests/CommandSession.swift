import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

func binary(_ name: String) throws -> URL {
    if name.hasPrefix("/") { return URL(fileURLWithPath: name) }
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory.deleteLastPathComponent()
    }
    throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "\(name) near \(CommandLine.arguments[0])"])
}

/// Text collected from a pipe as it arrives, and whether the pipe reached its end.
final class Collected: Sendable {
    private let text = Mutex("")
    private let ended = Atomic<Bool>(false)
    /// Appends what arrived; no data means the writer closed the pipe.
    func append(_ data: Data) {
        guard !data.isEmpty else { return ended.store(true, ordering: .releasing) }
        text.withLock { $0 += String(decoding: data, as: UTF8.self) }
    }
    var isComplete: Bool { ended.load(ordering: .acquiring) }
    func withLock<T: Sendable>(_ body: @Sendable (inout String) -> T) -> T { text.withLock { body(&$0) } }
}

/// A running `gatehouse` process whose output is collected as it comes, so a test can answer
/// prompts. Used from one test task only.
final class Session {
    let process = Process()
    let input = Pipe()
    let output = Collected()
    let errors = Collected()

    init(
        _ arguments: [String],
        binary name: String = "gatehouse",
        environment: [String: String] = [:],
        in directory: URL = packageRoot
    ) throws {
        process.executableURL = try binary(name)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.currentDirectoryURL = directory
        let outputPipe = Pipe()
        let errorPipe = Pipe()
        process.standardInput = input
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        try process.run()
        Self.collect(outputPipe.fileHandleForReading, into: output)
        Self.collect(errorPipe.fileHandleForReading, into: errors)
    }

    /// Reads `handle` to its end on a thread of its own, with blocking reads. Not a
    /// `readabilityHandler`: libdispatch's event loop crashed (a bad pointer in
    /// `_dispatch_event_loop_drain`) with many such pipes opening and closing in one test process.
    private static func collect(_ handle: FileHandle, into collected: Collected) {
        let reader = Thread {
            // What has arrived, as it arrives (`read(upToCount:)` would wait for the whole
            // count); empty at the end, which tells `collected` so.
            while true {
                let data = handle.availableData
                collected.append(data)
                if data.isEmpty { break }
            }
            try? handle.close()
        }
        reader.start()
    }

    /// Waits (at most 20 s) until standard output or error contains `text`.
    func waitFor(_ text: String) async throws -> String {
        for _ in 0..<400 {
            let seen = output.withLock { $0 } + errors.withLock { $0 }
            if seen.contains(text) { return seen }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw CocoaError(
            .fileReadUnknown,
            userInfo: [NSDebugDescriptionErrorKey: "never saw \(text): \(errors.withLock { $0 })"]
        )
    }

    func type(_ line: String) { send(Data((line + "\n").utf8)) }

    /// Writes `bytes` to the process's standard input. A process that has already ended (its
    /// pipe closed) is not an error here: the test checks what it did. SIGPIPE is ignored, so
    /// such a write fails with EPIPE instead of ending the test process.
    func send(_ bytes: Data) {
        _ = Self.ignoringBrokenPipes
        try? input.fileHandleForWriting.write(contentsOf: bytes)
    }

    private static let ignoringBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

    /// Waits (at most `seconds`) for the process to end and returns its status.
    func finish(within seconds: Int = 20) async throws -> Int32 {
        try? input.fileHandleForWriting.close()
        for _ in 0..<(seconds * 20) where process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        // What the process wrote last may still be in the pipes: read on to their end (bounded;
        // a child that inherited them could keep them open).
        for _ in 0..<100 where !(output.isComplete && errors.isComplete) {
            try await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }
}

/// Starts `gatehouse serve` (or another build of the commands) on a free loopback port with its
/// state in `directory`, or in `database` when given; `manifest` holds further arguments.
func startServer(
    in directory: URL,
    binary: String = "gatehouse",
    manifest: [String] = [],
    database: String? = nil
) async throws -> (Session, String) {
    let server = try Session(
        ["serve", "--database", database ?? directory.appendingPathComponent("server.sqlite").path, "--port", "0"]
            + manifest,
        binary: binary
    )
    _ = try await server.waitFor("listening on http://")
    let announced = server.output.withLock { $0 }
    guard let start = announced.range(of: "http://") else {
        server.process.terminate()
        throw CocoaError(.fileReadUnknown, userInfo: [NSDebugDescriptionErrorKey: "no URL in \(announced)"])
    }
    return (server, String(announced[start.lowerBound...].prefix { !$0.isWhitespace }))
}

/// A fresh directory for one test's server and devices.
func scratchDirectory(_ name: String) throws -> URL {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

/// Registers `email` with PIN 258147 through `gatehouse register` against a running server,
/// reading the code from the prompt as a user would; returns the command's output.
@discardableResult
func registerOverCommandLine(
    _ device: [String],
    email: String = "ann@example.com",
    in directory: URL = packageRoot
) async throws -> String {
    let register = try Session(["register"] + device, in: directory)
    _ = try await register.waitFor("E-mail address: ")
    register.type(email)
    let prompt = try await register.waitFor("Code: ")
    guard let sent = prompt.range(of: "Code sent to "),
        let digits = prompt[sent.upperBound...].range(of: #"[0-9]{6}"#, options: .regularExpression)
    else { throw CocoaError(.fileReadUnknown, userInfo: [NSDebugDescriptionErrorKey: "no code in \(prompt)"]) }
    register.type(String(prompt[digits]))
    _ = try await register.waitFor("Choose a PIN of 6 digits: ")
    register.type("258147")
    guard try await register.finish() == 0 else {
        throw CocoaError(.fileReadUnknown, userInfo: [NSDebugDescriptionErrorKey: register.errors.withLock { $0 }])
    }
    return register.output.withLock { $0 }
}

/// Examples/manifests/server.yaml, as a new user runs it: its URLs follow `${publicURL}`, the
/// address served, whatever the port.
func exampleManifest(in directory: URL, port: Int) throws -> URL {
    packageRoot.appendingPathComponent("Examples/manifests/server.yaml")
}

/// swift-log's lines in `text` (`2026-01-05T09:30:00+0000 info label: … message`): what a person
/// reading a story should not meet unless they asked for it.
func logLines(_ text: String) -> [Substring] {
    text.split(separator: "\n").filter {
        $0.range(
            of: #"^\d{4}-\d\d-\d\dT\S+ (trace|debug|info|notice|warning|error|critical) "#,
            options: .regularExpression
        ) != nil
    }
}
