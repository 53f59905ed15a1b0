import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A URLSession delegate that answers every redirect with "do not follow": the 3xx response is
/// the result. The SDK's transport uses it: a token server sends no redirect, and the hosted
/// login's belongs to the app. (The server's own calls go through `OutboundHTTP`, which follows
/// none either.)
final class RedirectsNotFollowed: NSObject, URLSessionTaskDelegate, Sendable {
    override init() {}

    /// Answers the redirect with `nil`, so the task completes with the 3xx response itself.
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
