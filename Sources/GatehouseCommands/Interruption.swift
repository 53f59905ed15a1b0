import Dispatch
import Foundation
import GatehouseClient
import GatehouseServerCommand
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ctrl-C in the device commands. The first restores the terminal (when a secret is being read
/// without echo), says "Cancelling…", cancels the flow the command's client has open at the
/// server (at most 2 s) and exits 130; a second exits at once. SIGINT arrives through a dispatch
/// source, so all this runs on a queue rather than in signal context, and nothing waits for the
/// read the command may be blocked in.
enum Interruption {
    private struct State {
        var source: (any DispatchSourceSignal)?
        /// The client whose flow a Ctrl-C cancels.
        var client: UserClient?
        /// The terminal's settings to put back while a secret is read without echo.
        var echoing: termios?
        var interrupted = false
    }

    private static let state = Mutex(State())
    private static let queue = DispatchQueue(label: "gatehouse.interruption")
    /// How long the server has to answer the cancellation.
    static let cancellationTimeout: Duration = .milliseconds(1500)
    /// When the process exits whatever the cancellation is doing.
    static let deadline: DispatchTimeInterval = .seconds(2)

    /// A Ctrl-C from now on cancels `client`'s flow in progress.
    static func cancelsFlows(of client: UserClient) {
        install()
        state.withLock { $0.client = client }
    }

    /// A secret is being read with echo off (`settings`: what to put back), or no longer (nil).
    static func readingSecret(restoring settings: termios?) {
        if settings != nil { install() }
        state.withLock { $0.echoing = settings }
    }

    /// Whether Ctrl-C was pressed: the command is on its way out with status 130.
    static var isInterrupted: Bool { state.withLock { $0.interrupted } }

    /// Ends the process with 130 (128 + SIGINT, as shells report it), flushing nothing: the
    /// standard input may be locked by a read that never returns.
    static func exitInterrupted() -> Never {
        _exit(ExitStatus.interrupted)
    }

    /// Handles SIGINT from now on, for the rest of the process.
    private static func install() {
        let registered = DispatchSemaphore(value: 0)
        let installed = state.withLock { state -> Bool in
            guard state.source == nil else { return false }
            // The source alone sees SIGINT: ignored as a signal, it is not lost.
            signal(SIGINT, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: queue)
            source.setEventHandler { interrupted() }
            source.setRegistrationHandler { registered.signal() }
            source.resume()
            state.source = source
            return true
        }
        // A Ctrl-C right after must find the source listening.
        if installed { _ = registered.wait(timeout: .now() + .seconds(1)) }
    }

    /// On the queue, for each SIGINT.
    private static func interrupted() {
        let (first, client, echoing) = state.withLock { state in
            defer {
                state.interrupted = true
                state.echoing = nil
            }
            return (!state.interrupted, state.client, state.echoing)
        }
        if var echoing { tcsetattr(STDIN_FILENO, TCSANOW, &echoing) }
        guard first, let client else {
            FileHandle.standardError.write(Data("\n".utf8))
            exitInterrupted()
        }
        FileHandle.standardError.write(Data("\nCancelling…\n".utf8))
        queue.asyncAfter(deadline: .now() + deadline) { exitInterrupted() }
        Task.detached {
            await client.cancelFlowInProgress(timeout: cancellationTimeout)
            exitInterrupted()
        }
    }
}
