import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP connection to a port on 127.0.0.1, below any HTTP client: it sends exactly what a test
/// writes and closes (or half-closes) when told, not when a library decides. Reads block on a
/// thread of their own, never on the cooperative pool (an in-process server needs it).
public final class LoopbackConnection: Sendable {
    private let descriptor: Int32

    /// Connects, and makes each read wait at most `readTimeout` seconds.
    public init(port: Int, readTimeout: Int = 20) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(clamping: port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw POSIXError(.ECONNREFUSED)
        }
        var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(descriptor) }

    /// Writes all of `text`.
    public func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else { throw POSIXError(.EIO) }
    }

    /// What arrives next, at most 64 KiB; throws when nothing came before the read timeout or
    /// the peer closed.
    public func receive() async throws -> String {
        let descriptor = descriptor
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                var buffer = [UInt8](repeating: 0, count: 65536)
                let count = read(descriptor, &buffer, buffer.count)
                guard count > 0 else { return continuation.resume(throwing: POSIXError(.EIO)) }
                continuation.resume(returning: String(decoding: buffer[..<count], as: UTF8.self))
            }
        }
    }

    /// Shuts down the sending side only: the server reads the end, and could still write.
    public func closeSendingSide() { shutdown(descriptor, Int32(SHUT_WR)) }

    /// Shuts down both sides (the descriptor itself is closed when this is released).
    public func closeBothSides() { shutdown(descriptor, Int32(SHUT_RDWR)) }
}
