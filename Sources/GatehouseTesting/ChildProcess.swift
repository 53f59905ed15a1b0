public import Foundation

/// A command run to its end from an async test without holding a thread of Swift's cooperative
/// pool. That pool has as many threads as the machine has cores, and every loopback server a
/// test starts (Hummingbird's handlers included) answers on it: a test that blocked it waiting
/// for a child (`waitUntilExit`, `readDataToEndOfFile`) would stall every other test's requests
/// for as long as the child runs. The waiting happens on a thread of its own instead.
public enum ChildProcess {
    /// What the command wrote and how it ended.
    public struct Result: Sendable {
        /// Its exit status (or the signal that ended it).
        public var status: Int32
        /// Everything it wrote to its standard output.
        public var output: Data
        /// Everything it wrote to its standard error.
        public var errors: Data

        /// The standard output as UTF-8 text.
        public var outputText: String { String(decoding: output, as: UTF8.self) }
        /// The standard error as UTF-8 text.
        public var errorText: String { String(decoding: errors, as: UTF8.self) }
    }

    /// Runs `executable` with `arguments`, writes `input` to its standard input and closes it,
    /// and returns once the command has ended and both of its outputs are read to their end
    /// (read at once, so neither pipe can fill up and stall it). `environment` replaces the
    /// test process's when given.
    public static func run(
        _ executable: URL,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        currentDirectory: URL? = nil,
        input: Data? = nil
    ) async throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        let standardInput = Pipe()
        let standardOutput = Pipe()
        let standardError = Pipe()
        process.standardInput = standardInput
        process.standardOutput = standardOutput
        process.standardError = standardError
        try process.run()
        let child = Started(process: process, input: standardInput, output: standardOutput, errors: standardError)
        return await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: child.finish(writing: input)) }.start()
        }
    }

    /// `/usr/bin/env`-style: runs the first program of that name on the `PATH`.
    public static func run(
        command: String,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        currentDirectory: URL? = nil,
        input: Data? = nil
    ) async throws -> Result {
        try await run(
            URL(fileURLWithPath: "/usr/bin/env"),
            arguments: [command] + arguments,
            environment: environment,
            currentDirectory: currentDirectory,
            input: input
        )
    }
}

/// A started process and its pipes, handed to the one thread that waits for it.
private struct Started: @unchecked Sendable {
    let process: Process
    let input: Pipe
    let output: Pipe
    let errors: Pipe

    func finish(writing data: Data?) -> ChildProcess.Result {
        let errorsRead = ReadToEnd(errors.fileHandleForReading)
        if let data { try? input.fileHandleForWriting.write(contentsOf: data) }
        try? input.fileHandleForWriting.close()
        let outputRead = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return ChildProcess.Result(status: process.terminationStatus, output: outputRead, errors: errorsRead.data())
    }
}

/// Reads a pipe to its end on a thread of its own.
private final class ReadToEnd: @unchecked Sendable {
    // Written by the reading thread before it signals `done`, read only after waiting for it.
    private var read = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        let reading = Handle(handle: handle)
        Thread { [self] in
            read = reading.handle.readDataToEndOfFile()
            done.signal()
        }.start()
    }

    private struct Handle: @unchecked Sendable { let handle: FileHandle }

    func data() -> Data {
        done.wait()
        return read
    }
}
