import AsyncHTTPClient
import Foundation
import GatehouseServer
import NIOCore
import NIOHTTP1
import NIOSSL

/// One push service's HTTP client: HTTP/2 over TLS when the service offers it (ALPN), with the
/// system's certificate authorities and, when configured, those of a CA file beside them —
/// verification is never turned off. No redirects are followed; an answer is read up to 64 KiB.
/// Its connections stay open between pushes, as Apple asks; ``shutdown()`` closes them.
final class PushHTTPClient: Sendable {
    /// What the service answered.
    struct Answer: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
        /// The HTTP version the answer came over (`HTTP/2.0` for APNs).
        var version: HTTPVersion
    }

    private let client: HTTPClient
    /// The longest one request may take, connection included.
    static let requestTimeout = TimeAmount.seconds(10)
    static let maxAnswerBytes = 64 * 1024

    /// A client trusting the system's certificate authorities and those in `caFile` (PEM), the
    /// setting `key` names.
    init(caFile: String?, key: String) throws(PushSetupError) {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let caFile {
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMFile(caFile)
            } catch {
                throw PushSetupError(
                    key: key,
                    problem: "\(caFile) is not a readable PEM file of certificates (-----BEGIN CERTIFICATE-----)"
                )
            }
            guard !certificates.isEmpty else {
                throw PushSetupError(key: key, problem: "\(caFile) holds no certificate (-----BEGIN CERTIFICATE-----)")
            }
            tls.additionalTrustRoots = [.certificates(certificates)]
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(5), read: .seconds(10))
        )
        configuration.httpVersion = .automatic
        // AsyncHTTPClient's own spans record the whole URL, and an APNs URL ends in the device token.
        configuration.tracing.tracer = nil
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// POSTs `body` to `url`. A call that fails below HTTP (no connection, TLS refused, no
    /// answer in time) is a temporary `PushDeliveryError` whose reason names neither the URL
    /// (APNs' carries the device token) nor a header.
    func post(_ url: String, headers: [(String, String)], body: Data) async throws(PushDeliveryError) -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await client.execute(request, timeout: Self.requestTimeout)
            let collected = try await response.body.collect(upTo: Self.maxAnswerBytes)
            return Answer(
                status: Int(response.status.code),
                headers: response.headers,
                body: Data(collected.readableBytesView),
                version: response.version
            )
        } catch is CancellationError {
            throw PushDeliveryError(.temporary, reason: "cancelled")
        } catch {
            throw PushDeliveryError(.temporary, reason: "no answer: \(Self.describe(error))")
        }
    }

    /// Closes the connections; the client sends nothing after.
    func shutdown() async {
        try? await client.shutdown()
    }

    /// What went wrong below HTTP, in words without the URL.
    private static func describe(_ error: any Error) -> String {
        switch error {
        case let error as HTTPClientError: "\(error)"
        case let error as NIOSSLError: "TLS: \(error)"
        case let error as IOError: error.description
        case is NIOTooManyBytesError: "the answer is longer than \(maxAnswerBytes) bytes"
        default: String(describing: type(of: error))
        }
    }

    /// The wait a `Retry-After` header asks for (seconds, or an HTTP date), at most an hour.
    static func retryAfter(_ headers: HTTPHeaders, now: Date) -> Duration? {
        guard let value = headers.first(name: "retry-after")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Int(value), seconds >= 0 { return .seconds(min(seconds, 3600)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return .seconds(Int(min(max(date.timeIntervalSince(now), 0), 3600).rounded(.up)))
    }
}
