#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Loopback ports for tests whose configuration must name an address before the server listens.
public enum LoopbackPort {
    /// A TCP port on 127.0.0.1 that was free a moment ago. It is released at once, so another
    /// process could take it in between; to make that unlikely it is drawn from 20000–32767,
    /// below the range the system hands out to outgoing connections and to servers that ask for
    /// port 0 (Linux: 32768–60999), which parallel tests use by the hundred. The system's own
    /// pick when none of the draws is free.
    public static func free() -> Int? {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<64 {
            let port = Int.random(in: 20000...32767, using: &generator)
            if bindable(port) == port { return port }
        }
        return bindable(0)
    }

    /// Binds 127.0.0.1:`port` (0: any) and returns the port bound, nil when it cannot be.
    private static func bindable(_ port: Int) -> Int? {
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return nil }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
            }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }
}
