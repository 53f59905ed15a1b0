import Crypto
public import Foundation
import GatehouseOutbound
public import GatehouseProtocol
import Synchronization

/// Introspection over HTTP (RFC 7662) at the token server's `/v1/introspect`, as a resource
/// server with HTTP Basic credentials (the manifest's `server.resourceServers`).
///
/// Answers are cached for at most `cacheLifetime` (and never past the token's expiry), so a
/// revoked token is refused here at most `cacheLifetime` after its revocation: that is the
/// revocation's propagation window. The cache holds at most `cacheCapacity` tokens, by hash.
public final class HTTPIntrospection: TokenIntrospecting {
    /// The token server's introspection endpoint, `<tokenServer>/v1/introspect`.
    public let endpoint: URL
    /// `endpoint` as checked when configured; the only form the call is made with.
    let target: OutboundURL
    /// Seconds an answer is reused (0–60): the longest a revoked token can still pass here.
    public let cacheLifetime: TimeInterval
    let authorization: String
    let timeout: Duration
    let cache: IntrospectionCache

    /// An introspector for the token server at `tokenServer`, calling as a resource server of its manifest.
    ///
    /// - Parameters:
    ///   - tokenServer: The token server's URL, e.g. `https://auth.example.com`.
    ///   - resourceServerID: The resource server's id in the manifest's `server.resourceServers`.
    ///   - secret: That resource server's secret; sent with the id as HTTP Basic.
    ///   - cacheLifetime: Seconds an answer is reused (0–60, default 5): the longest a revoked
    ///     token can still pass here.
    ///   - cacheCapacity: The most tokens whose answers are cached at once (default 10,000).
    ///   - timeout: Seconds for one introspection call (0.1–600, default 5).
    /// - Throws: ``IntrospectionURLRefusal`` when the endpoint is not a URL the server may call:
    ///   http(s), a lower-case host or IP address, a port 1–65535, no user, no dot segments.
    public init(
        tokenServer: URL,
        resourceServerID: String,
        secret: String,
        cacheLifetime: TimeInterval = 5,
        cacheCapacity: Int = 10_000,
        timeout: TimeInterval = 5
    ) throws {
        endpoint = tokenServer.appendingPathComponent("v1/introspect")
        do {
            target = try OutboundURL(endpoint.absoluteString)
        } catch {
            throw IntrospectionURLRefusal(url: endpoint.absoluteString, reason: error.reason)
        }
        // NaN passes neither bound of min/max: it is read as the default.
        self.cacheLifetime = cacheLifetime.isNaN ? 5 : min(max(cacheLifetime, 0), 60)
        // RFC 6749 §2.3.1: id and secret are form-encoded before they are joined.
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let id = resourceServerID.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
        let encodedSecret = secret.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
        authorization = "Basic " + Data("\(id):\(encodedSecret)".utf8).base64EncodedString()
        // Kept finite and small: the conversion to a Duration traps on NaN, infinity or overflow.
        self.timeout = .milliseconds(Int64((timeout.isNaN ? 5 : min(max(timeout, 0.1), 600)) * 1000))
        cache = IntrospectionCache(capacity: cacheCapacity)
    }

    /// What the token server says of `token`, from the cache when a fresh answer is there. Throws
    /// ``IntrospectionFailure`` for an answer other than 200, or the transport's error when the server cannot be
    /// reached.
    public func introspect(_ token: String) async throws -> IntrospectionResponse {
        let key = Data(SHA256.hash(data: Data(token.utf8)))
        let now = Date().timeIntervalSince1970
        if let cached = cache.answer(for: key, now: now) { return cached }
        let response = try await OutboundHTTP.post(
            target,
            headers: [
                ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
                ("Authorization", authorization),
            ],
            body: Data(FormFields.encode([("token", token), ("token_type_hint", "access_token")]).utf8),
            timeout: timeout
        )
        guard response.status == 200 else {
            throw IntrospectionFailure(
                status: response.status,
                body: String(decoding: response.body.prefix(300), as: UTF8.self)
            )
        }
        let answer = try JSONDecoder().decode(IntrospectionResponse.self, from: response.body)
        var until = now + cacheLifetime
        if answer.active, let exp = answer.exp { until = min(until, Double(exp)) }
        if until > now { cache.keep(answer, for: key, until: until, now: now) }
        return answer
    }
}

/// The token server's URL does not make an introspection endpoint the resource server may call.
public struct IntrospectionURLRefusal: Error, Sendable, CustomStringConvertible {
    /// The endpoint that was refused.
    public var url: String
    /// Why the URL may not be called.
    public var reason: String
    /// The endpoint and the reason, as a log line carries them.
    public var description: String { "introspection endpoint \(url): \(reason)" }
}

/// The token server refused to introspect (wrong credentials, say) or could not.
public struct IntrospectionFailure: Error, Sendable, CustomStringConvertible {
    /// The HTTP status the token server answered, such as 401 for wrong credentials.
    public var status: Int
    /// The start of the answer's body (at most 300 bytes), to tell why.
    public var body: String
    /// The status and the body, as a log line carries them.
    public var description: String { "introspection answered HTTP \(status): \(body)" }
}

/// Introspection answers by token hash, each until its own time, bounded.
final class IntrospectionCache: Sendable {
    private let entries = Mutex<[Data: (answer: IntrospectionResponse, until: Double)]>([:])
    let capacity: Int

    init(capacity: Int) { self.capacity = max(0, capacity) }

    func answer(for key: Data, now: Double) -> IntrospectionResponse? {
        entries.withLock { entries in
            guard let entry = entries[key] else { return nil }
            guard entry.until > now else {
                entries[key] = nil
                return nil
            }
            return entry.answer
        }
    }

    func keep(_ answer: IntrospectionResponse, for key: Data, until: Double, now: Double) {
        guard capacity > 0 else { return }
        entries.withLock { entries in
            if entries.count >= capacity { entries = entries.filter { $0.value.until > now } }
            // Still full of live answers: this one is simply not kept.
            guard entries.count < capacity else { return }
            entries[key] = (answer, until)
        }
    }
}
