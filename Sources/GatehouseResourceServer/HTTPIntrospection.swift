import Crypto
public import Foundation
public import GatehouseProtocol
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Introspection over HTTP (RFC 7662) at the token server's `/v1/introspect`, as a resource
/// server with HTTP Basic credentials (the manifest's `server.resourceServers`).
///
/// Answers are cached for at most `cacheLifetime` (and never past the token's expiry), so a
/// revoked token is refused here at most `cacheLifetime` after its revocation: that is the
/// revocation's propagation window. The cache holds at most `cacheCapacity` tokens, by hash.
public final class HTTPIntrospection: TokenIntrospecting {
    public let endpoint: URL
    public let cacheLifetime: TimeInterval
    let authorization: String
    let session: URLSession
    let cache: IntrospectionCache

    /// - Parameters:
    ///   - tokenServer: The token server's URL, e.g. `https://auth.example.com`.
    ///   - cacheLifetime: Seconds an answer is reused (0–60, default 5): the longest a revoked
    ///     token can still pass here.
    public init(
        tokenServer: URL,
        resourceServerID: String,
        secret: String,
        cacheLifetime: TimeInterval = 5,
        cacheCapacity: Int = 10_000,
        timeout: TimeInterval = 5
    ) {
        endpoint = tokenServer.appendingPathComponent("v1/introspect")
        self.cacheLifetime = min(max(cacheLifetime, 0), 60)
        // RFC 6749 §2.3.1: id and secret are form-encoded before they are joined.
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let id = resourceServerID.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
        let encodedSecret = secret.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
        authorization = "Basic " + Data("\(id):\(encodedSecret)".utf8).base64EncodedString()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        session = URLSession(configuration: configuration, delegate: RedirectsNotFollowed(), delegateQueue: nil)
        cache = IntrospectionCache(capacity: cacheCapacity)
    }

    public func introspect(_ token: String) async throws -> IntrospectionResponse {
        let key = Data(SHA256.hash(data: Data(token.utf8)))
        let now = Date().timeIntervalSince1970
        if let cached = cache.answer(for: key, now: now) { return cached }
        var request = URLRequest(url: endpoint)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue(authorization, forHTTPHeaderField: "Authorization")
        request.httpBody = Data(FormFields.encode([("token", token), ("token_type_hint", "access_token")]).utf8)
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse, http.statusCode == 200 else {
            throw IntrospectionFailure(
                status: (response as? HTTPURLResponse)?.statusCode ?? 0,
                body: String(decoding: data.prefix(300), as: UTF8.self)
            )
        }
        let answer = try JSONDecoder().decode(IntrospectionResponse.self, from: data)
        var until = now + cacheLifetime
        if answer.active, let exp = answer.exp { until = min(until, Double(exp)) }
        if until > now { cache.keep(answer, for: key, until: until, now: now) }
        return answer
    }
}

/// The token server refused to introspect (wrong credentials, say) or could not.
public struct IntrospectionFailure: Error, Sendable, CustomStringConvertible {
    public var status: Int
    public var body: String
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
