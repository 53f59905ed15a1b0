import Foundation
import GatehouseProtocol
import GatehouseServer
import Testing

@Suite("Rate limits per client address")
struct RateLimiterTests {
    @Test("a burst, then one request per interval; each address has its own bucket")
    func bucket() {
        let limiter = RateLimiter(perMinute: 6, burst: 2)
        #expect(limiter.take("192.0.2.1", now: 0) == nil)
        #expect(limiter.take("192.0.2.1", now: 0) == nil)
        #expect(limiter.take("192.0.2.1", now: 0) == 10)
        #expect(limiter.take("192.0.2.2", now: 0) == nil)
        #expect(limiter.take("192.0.2.1", now: 5) == 5)
        #expect(limiter.take("192.0.2.1", now: 10) == nil)
        #expect(limiter.take("192.0.2.1", now: 10) != nil)
        #expect(RateLimiter(perMinute: 0, burst: 1).take("192.0.2.1", now: 0) == nil)
    }

    @Test("an IPv6 host is one key for its whole /64")
    func ipv6Prefix() {
        #expect(RateLimiter.key(forAddress: "2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(RateLimiter.key(forAddress: "2001:db8:1:2:ffff:ffff:ffff:1") == "2001:db8:1:2::/64")
        #expect(RateLimiter.key(forAddress: "2001:db8::1") == "2001:db8:0:0::/64")
        #expect(RateLimiter.key(forAddress: "::1") == "0:0:0:0::/64")
        #expect(RateLimiter.key(forAddress: "198.51.100.7") == "198.51.100.7")
        // An IPv4 client of a dual-stack listener is its IPv4 address, not the ::ffff:0:0/64.
        #expect(RateLimiter.key(forAddress: "::ffff:198.51.100.7") == "198.51.100.7")
        #expect(RateLimiter.key(forAddress: "::FFFF:192.0.2.1") == "192.0.2.1")
    }

    @Test("the number of remembered addresses stays bounded")
    func bounded() {
        let limiter = RateLimiter(perMinute: 60, burst: 1, maxKeys: 100)
        for index in 0..<1000 { _ = limiter.take("10.0.\(index / 256).\(index % 256)", now: Double(index) / 1000) }
        // The newest address still has its bucket: its second request is refused.
        #expect(limiter.take("10.0.3.231", now: 0.999) != nil)
    }
}

@Suite("Connection limits")
struct ConnectionLimitTests {
    @Test("one address never holds every connection slot: its limit is at most half of them")
    func perAddressAtMostHalf() {
        #expect(
            HTTPServerLimits(maxConnections: 40, maxConnectionsPerAddress: 128).effectiveMaxConnectionsPerAddress == 20
        )
        #expect(
            HTTPServerLimits(maxConnections: 40, maxConnectionsPerAddress: 8).effectiveMaxConnectionsPerAddress == 8
        )
        #expect(
            HTTPServerLimits(maxConnections: 40, maxConnectionsPerAddress: 0).effectiveMaxConnectionsPerAddress == 0
        )
        #expect(HTTPServerLimits(maxConnections: 1, maxConnectionsPerAddress: 5).effectiveMaxConnectionsPerAddress == 1)
    }
}
