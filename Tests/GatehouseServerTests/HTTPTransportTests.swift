import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import Glibc

// Linux only: what it checks is the Linux transport's (Apple's URLSession rewinds a body).

/// The SDK's HTTP transport when a keep-alive connection closes under a request: what a
/// balancer does when it ends a lost instance's sessions, or an idle timeout racing the request.
@Suite("The SDK's HTTP transport")
struct HTTPTransportTests {
    @Test(
        "a request whose reused connection closes under it fails as a lost answer at once, and is never re-sent without its body"
    )
    func reusedConnectionClosed() async throws {
        let server = try ClosingServer()
        defer { server.stop() }
        let transport = HTTPTransport(baseURL: "http://127.0.0.1:\(server.port)", timeout: 10)
        func post(_ path: String) -> WireRequest {
            WireRequest(
                method: "POST",
                path: path,
                headers: ["Content-Type": "application/json"],
                body: Data(#"{"padding":"\#(String(repeating: "x", count: 300))"}"#.utf8)
            )
        }
        #expect(try await transport.send(post("/first")).status == 200)
        // The server reads this one's head on the same connection and closes it.
        do {
            let answer = try await transport.send(post("/second"))
            // Sent again whole on a new connection is fine too: the server saw all of it.
            #expect(answer.status == 200)
        } catch let error as GenericError {
            // Not "no answer in time": a head re-sent without its body waits for the timeout.
            #expect(error.code == .networkConnectivityFailure, "\(error)")
        }
        #expect(try await transport.send(post("/third")).status == 200)
        #expect(server.incomplete == [], "requests that came without their whole body: \(server.incomplete)")
    }
}

/// A loopback HTTP/1.1 server on plain sockets: it answers every whole request 200 and keeps the
/// connection, except the second request of its first connection, whose head it reads before
/// closing the connection. A request whose body never comes whole is recorded.
private final class ClosingServer: Sendable {
    let port: Int
    private let listener: Int32
    private let state = Mutex((connections: 0, incomplete: [String](), stopped: false))

    var incomplete: [String] { state.withLock { $0.incomplete } }

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard descriptor >= 0, bound == 0, listen(descriptor, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in accept() }.start()
    }

    func stop() {
        state.withLock { $0.stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func accept() {
        while true {
            let connection = Glibc.accept(listener, nil, nil)
            guard connection >= 0 else { return }
            let number = state.withLock { state in
                state.connections += 1
                return state.connections
            }
            Thread { [self] in serve(connection, number) }.start()
        }
    }

    private func serve(_ connection: Int32, _ number: Int) {
        defer { close(connection) }
        // Longer than the transport's timeout: a body that never comes is waited for until the
        // client gives up.
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8]()
        var served = 0
        while true {
            guard let end = headEnd(buffer) else {
                guard read(connection, into: &buffer) else {
                    if !buffer.isEmpty { record("\(number): \(String(decoding: buffer, as: UTF8.self))") }
                    return
                }
                continue
            }
            let head = String(decoding: buffer[..<end], as: UTF8.self)
            if number == 1, served == 1 { return }
            let length =
                head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            while buffer.count < end + 4 + length {
                guard read(connection, into: &buffer) else {
                    record("\(number): \(head) with \(buffer.count - end - 4) of \(length) body bytes")
                    return
                }
            }
            buffer.removeFirst(end + 4 + length)
            served += 1
            let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
            guard answer.utf8CString.withUnsafeBufferPointer({ send(connection, $0.baseAddress, $0.count - 1, 0) }) > 0
            else { return }
        }
    }

    private func headEnd(_ buffer: [UInt8]) -> Int? {
        guard buffer.count >= 4 else { return nil }
        return (0...(buffer.count - 4)).first { buffer[$0..<($0 + 4)].elementsEqual([13, 10, 13, 10]) }
    }

    /// Appends what arrives; false at the end of the stream, an error or the timeout.
    private func read(_ connection: Int32, into buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = recv(connection, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffer += chunk[..<count]
        return true
    }

    private func record(_ what: String) {
        state.withLock { state in
            if !state.stopped { state.incomplete.append(what) }
        }
    }
}
#endif
