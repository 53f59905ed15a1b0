import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

extension TokenServer {
    /// The position in `credentials` of the id and secret the request's `Authorization: Basic`
    /// header carries; throws `refusal` when it carries none that match. Every configured pair is
    /// compared, by SHA-256 digests of equal length, so timing tells nothing about which id exists
    /// or how long its secret is. With `formEncoded` (OAuth clients, RFC 6749 §2.3.1) the id and
    /// secret are percent-decoded first.
    ///
    /// Guesses are limited per client address (`clientAuthenticationFailuresPerMinute`): every
    /// presented secret takes one from the address' bucket before it is compared, and the right
    /// one gives it back, so only wrong secrets use it up, concurrent guesses included. An empty
    /// bucket refuses every Basic request from the address with 429, the right secret too:
    /// answering it would tell a guesser it had found the secret. Each wrong secret is counted
    /// (`client_authentication_failure`) and written to the audit log.
    ///
    /// No `WWW-Authenticate: Basic` challenge goes with the refusal: URLSession on Linux waits
    /// forever on one it has no credential for (swift-corelibs-foundation#5456); the error body
    /// says what to send.
    func basicCredential(
        _ request: WireRequest,
        among credentials: [(id: String, secret: String)],
        formEncoded: Bool,
        refusal: ServerError
    ) throws -> Int {
        guard let header = request.header("Authorization"), header.utf8.count <= 1024,
            header.utf8.prefix(5).map({ $0 | 0x20 }).elementsEqual("basic".utf8),
            header.utf8.dropFirst(5).first == UInt8(ascii: " "),
            let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { throw refusal }
        // Form encoding: `+` is a space, `%XX` a byte.
        func decode(_ part: Substring) -> String? { formEncoded ? FormFields.decode(part) : String(part) }
        guard let id = decode(text[..<colon]), let secret = decode(text[text.index(after: colon)...]) else {
            throw refusal
        }
        try limit(request, by: clientAuthenticationLimiter)
        let idDigest = Data(SHA256.hash(data: Data(id.utf8)))
        let secretDigest = Data(SHA256.hash(data: Data(secret.utf8)))
        var found: Int?
        var named: Int?
        for (index, credential) in credentials.enumerated() {
            let idMatches = ConstantTime.equals(Data(SHA256.hash(data: Data(credential.id.utf8))), idDigest)
            let secretMatches = ConstantTime.equals(Data(SHA256.hash(data: Data(credential.secret.utf8))), secretDigest)
            if idMatches { named = index }
            if idMatches && secretMatches { found = index }
        }
        guard let found else {
            metrics.event("client_authentication_failure")
            // The id only when it is a configured one: the rest is the sender's text.
            audit.notice(
                "Client authentication failed",
                metadata: [
                    "event": "client_authentication_failure", "endpoint": "\(endpointLabel(request.path))",
                    "client": "\(named.map { credentials[$0].id } ?? "unknown")",
                ]
            )
            throw refusal
        }
        clientAuthenticationLimiter.giveBack(forAddress: request.clientAddress)
        return found
    }
}
