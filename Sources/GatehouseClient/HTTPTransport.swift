public import Foundation
import GatehouseKernel
public import GatehouseProtocol

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Reaches a token server over HTTP.
public struct HTTPTransport: TokenServerTransport {
    /// The server's base URL without a trailing slash; each request's path is appended to it.
    public let baseURL: String
    /// Seconds a request may take before it fails. Default 15.
    public let timeout: TimeInterval

    /// A transport to the server at `baseURL`, e.g. `http://127.0.0.1:8080`.
    public init(baseURL: String, timeout: TimeInterval = 15) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.timeout = timeout
    }

    /// Sends one request and returns the server's answer, whatever its status; a redirect is returned, not followed.
    /// Throws when the base URL is not http(s) or the server cannot be reached.
    public func send(_ request: WireRequest) async throws -> WireResponse {
        try Self.checkBaseURL(baseURL)
        guard let url = URL(string: baseURL + request.path) else {
            throw GenericError(.configurationInvalid, message: "The path \(request.path) does not make a URL.")
        }
        #if canImport(FoundationNetworking)
        return try await sendThroughNIO(request, to: url.absoluteString)
        #else
        var urlRequest = URLRequest(url: url, timeoutInterval: timeout)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if !request.body.isEmpty { urlRequest.httpBody = request.body }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await Self.session.data(for: urlRequest)
        } catch let error as URLError {
            switch error.code {
            case .notConnectedToInternet, .networkConnectionLost, .dataNotAllowed:
                throw GenericError(.networkConnectivityFailure, underlying: error)
            default:
                throw GenericError(
                    .serverNotReachable,
                    message: "The token server at \(baseURL) could not be reached: \(Self.reason(error)).",
                    underlying: error
                )
            }
        }
        guard let http = response as? HTTPURLResponse else { throw GenericError(.serverNotReachable) }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        return WireResponse(status: http.statusCode, headers: headers, body: data)
        #endif
    }

    /// Refuses a server URL no device could use: it must be http or https, with a host.
    public static func checkBaseURL(_ baseURL: String) throws {
        guard let url = URL(string: baseURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host?.isEmpty == false
        else {
            throw GenericError(
                .configurationInvalid,
                message: "The server URL \(baseURL) is not valid: use http:// or https:// and a host name."
            )
        }
    }

    /// Why a request failed, in words a person at a terminal can act on.
    static func reason(_ error: URLError) -> String {
        switch error.code {
        case .cannotConnectToHost: "the connection was refused (is the server running on that port?)"
        case .cannotFindHost, .dnsLookupFailed: "the host name is unknown"
        case .timedOut: "no answer in time"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected:
            "the TLS connection failed (\(error.localizedDescription))"
        case .badURL, .unsupportedURL: "the URL is not usable"
        case .badServerResponse: "the answer was not HTTP (is it the right port?)"
        default: error.localizedDescription
        }
    }

    /// The server's answer as it is: redirects are returned, not followed (a token server sends
    /// none, and the hosted login's redirect belongs to the app).
    /// Follows no redirect and keeps no cookie: every request carries exactly what the SDK put in
    /// it (a web session the server opens belongs to the user's browser, not to the app).
    static let session: URLSession = {
        let configuration = URLSessionConfiguration.default
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        return URLSession(configuration: configuration, delegate: RedirectsNotFollowed(), delegateQueue: nil)
    }()
}
