import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ctrl-C while `serve` runs. The first starts the drain and says so; a second ends the process
/// with 130 at once. Both are handled on a dispatch queue of their own, never on Swift's
/// cooperative pool: a server busy enough to keep the pool's threads occupied must still stop on
/// the second Ctrl-C, and `_exit` runs no exit handlers that could wait on its threads.
struct ServeInterrupts {
    private let source: any DispatchSourceSignal

    /// How many times Ctrl-C was pressed.
    private final class Presses: Sendable {
        let count = Atomic<Int>(0)
    }

    /// Handles SIGINT until `cancel()`; `drain` runs on the first.
    static func install(
        shutdownTimeout: Duration,
        drain: @escaping @Sendable () -> Void
    ) -> ServeInterrupts {
        // The source alone sees SIGINT: ignored as a signal, it is not lost.
        signal(SIGINT, SIG_IGN)
        let queue = DispatchQueue(label: "gatehouse.serve.interrupts")
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: queue)
        let registered = DispatchSemaphore(value: 0)
        let presses = Presses()
        source.setEventHandler {
            let count = presses.count.add(1, ordering: .relaxed).newValue
            if count == 1 {
                FileHandle.standardError.write(
                    Data(
                        """
                        Draining: no new connections; waiting up to \(shutdownTimeout.components.seconds) s \
                        for open requests. Press Ctrl-C again to stop at once.

                        """.utf8
                    )
                )
                drain()
            } else {
                FileHandle.standardError.write(Data("Stopped at once.\n".utf8))
                _exit(ExitStatus.interrupted)
            }
        }
        source.setRegistrationHandler { registered.signal() }
        source.resume()
        // A Ctrl-C right after must find the source listening.
        _ = registered.wait(timeout: .now() + .seconds(1))
        return ServeInterrupts(source: source)
    }

    /// Stops handling SIGINT; it ends the process again, as by default.
    func cancel() {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
