public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A URLSession delegate that answers every redirect with "do not follow": the 3xx response is
/// the result. The SDK's transport uses it (a token server sends no redirect; the hosted login's
/// belongs to the app), and so do the server's callbacks (they go where the prefixes allowed,
/// nowhere else).
public final class RedirectsNotFollowed: NSObject, URLSessionTaskDelegate, Sendable {
    override public init() {}

    /// Answers the redirect with `nil`, so the task completes with the 3xx response itself.
    public func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
