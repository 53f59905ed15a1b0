import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

/// Configured HTTP Basic credentials with their SHA-256 digests, made once when the server
/// starts rather than on every request (they were a tenth of an introspection's CPU).
struct BasicCredentialSet: Sendable {
    struct Credential: Sendable {
        var id: String
        var idDigest: Data
        var secretDigest: Data
    }

    let credentials: [Credential]

    init(_ pairs: [(id: String, secret: String)]) {
        credentials = pairs.map {
            Credential(
                id: $0.id,
                idDigest: Data(SHA256.hash(data: Data($0.id.utf8))),
                secretDigest: Data(SHA256.hash(data: Data($0.secret.utf8)))
            )
        }
    }
}

extension TokenServer {
    /// The position in `credentials` of the id and secret the request's `Authorization: Basic`
    /// header carries; throws `refusal` when it carries none that match. Every configured pair is
    /// compared, by SHA-256 digests of equal length, so timing tells nothing about which id exists
    /// or how long its secret is. With `formEncoded` (OAuth clients, RFC 6749 §2.3.1) the id and
    /// secret are percent-decoded first.
    ///
    /// Guesses are limited per client address (`clientAuthenticationFailuresPerMinute`), counted
    /// once for the whole cluster in the shared bucket `client-authentication`: a wrong secret
    /// takes one request from the address' bucket in the same change that writes it to the audit
    /// trail (`client_authentication_failure`), so concurrent guesses at every instance are counted
    /// one after another. Only then is the answer given: a guess the bucket had no request left
    /// for gets 429, whether it was right or wrong, since answering a right one would tell a
    /// guesser it had found the secret. A right secret takes nothing; once it has passed at an
    /// address, the same bytes from there are taken on trust for a minute without the database
    /// (``ClientAuthenticationMemory``), so a busy resource server's introspection stays free of
    /// writes, unless the address is locked out meanwhile. An in-memory limit with the same
    /// figures stands in front for wrong secrets, so a flood at one instance never reaches the
    /// database; a right one does not wait on it (however many are in flight at once). Once the
    /// shared bucket is empty the address is locked, and every request from it is refused before
    /// any comparison.
    ///
    /// No `WWW-Authenticate: Basic` challenge goes with the refusal: URLSession on Linux waits
    /// forever on one it has no credential for (swift-corelibs-foundation#5456); the error body
    /// says what to send.
    func basicCredential(
        _ request: WireRequest,
        among configured: BasicCredentialSet,
        formEncoded: Bool,
        refusal: ServerError
    ) async throws -> Int {
        guard let header = request.header("Authorization"), header.utf8.count <= 1024,
            header.utf8.prefix(5).map({ $0 | 0x20 }).elementsEqual("basic".utf8),
            header.utf8.dropFirst(5).first == UInt8(ascii: " "),
            let decoded = Data(base64Encoded: String(header.dropFirst(6).trimmingSpacesAndTabs)),
            let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { throw refusal }
        // Form encoding: `+` is a space, `%XX` a byte.
        func decode(_ part: Substring) -> String? { formEncoded ? FormFields.decode(part) : String(part) }
        guard let id = decode(text[..<colon]), let secret = decode(text[text.index(after: colon)...]) else {
            throw refusal
        }
        let address = request.clientAddress.map(RateLimiter.key(forAddress:))
        if let address, let seconds = clientAuthentications.lockedSeconds(address) {
            throw rateLimited(seconds)
        }
        let idDigest = Data(SHA256.hash(data: Data(id.utf8)))
        let secretDigest = Data(SHA256.hash(data: Data(secret.utf8)))
        var found: Int?
        var named: Int?
        for (index, credential) in configured.credentials.enumerated() {
            let idMatches = ConstantTime.equals(credential.idDigest, idDigest)
            let secretMatches = ConstantTime.equals(credential.secretDigest, secretDigest)
            if idMatches { named = index }
            if idMatches && secretMatches { found = index }
        }
        // The pair's own digest: an id and secret that pass together, never either alone.
        let presented = Data(SHA256.hash(data: idDigest + secretDigest))
        if let found, let address, clientAuthentications.trusts(presented, at: address) { return found }
        // Only a wrong secret waits on this instance's bucket: a right one spends nothing, and
        // taking one from here for each right secret in flight would refuse a burst of them.
        if found == nil { try limit(request, by: clientAuthenticationLimiter) }
        let endpoint = endpointLabel(request.path)
        // The id only when it is a configured one: the rest is the sender's text.
        let client = named.map { configured.credentials[$0].id } ?? "unknown"
        let wait = try await countPresentedSecret(
            address: address,
            right: found != nil,
            failure: AuditEntry(
                event: .clientAuthenticationFailure,
                actor: .server,
                detail: ["endpoint": endpoint, "client": client, "address": address ?? "in-process"]
            )
        )
        if let seconds = wait { throw rateLimited(seconds) }
        guard let found else {
            metrics.event("client_authentication_failure")
            audit.notice(
                "Client authentication failed",
                metadata: ["event": "client_authentication_failure", "endpoint": "\(endpoint)", "client": "\(client)"]
            )
            throw refusal
        }
        if let address { clientAuthentications.remember(presented, at: address) }
        return found
    }

    /// Asks the shared bucket about one presented secret: a wrong one takes a request and is
    /// written to the audit trail, a right one only needs a request left. Nil when it may be
    /// answered, else the seconds to wait. A bucket found empty, or emptied by this wrong secret,
    /// locks the address at every instance until it has a request again, remembered credentials
    /// included.
    ///
    /// With the limit off (`clientAuthenticationFailuresPerMinute: 0`, behind a proxy) nothing is
    /// written: an unlimited stream of wrong secrets must not become as many transactions; the
    /// metric and the audit log line still count each.
    private func countPresentedSecret(address: String?, right: Bool, failure: AuditEntry) async throws -> Int? {
        guard clientAuthenticationLimit.interval > 0 else { return nil }
        // In-process and right: nothing to count or write.
        guard !right || address != nil else { return nil }
        let (limit, now) = (clientAuthenticationLimit, self.now)
        let (refused, locked) = try await store.write { [store] db -> (Int?, Int?) in
            if let seconds = try ServerStore.retryAfter(
                taking: limit,
                forAddress: address,
                now: now,
                spending: !right,
                db
            ) {
                if let address {
                    try db.announce(
                        ClientAuthenticationMemory.lockoutAnnouncement(address, until: now + Double(seconds))
                    )
                }
                return (seconds, seconds)
            }
            guard !right else { return (nil, nil) }
            try store.appendAudit([failure], now: now, db)
            // The last request this wrong secret took: the right one is refused from now on too.
            guard
                let address,
                let emptied = try ServerStore.retryAfter(
                    taking: limit,
                    forAddress: address,
                    now: now,
                    spending: false,
                    db
                )
            else { return (nil, nil) }
            try db.announce(ClientAuthenticationMemory.lockoutAnnouncement(address, until: now + Double(emptied)))
            return (nil, emptied)
        }
        if let locked, let address { clientAuthentications.lock(address, until: now + Double(locked)) }
        return refused
    }

    private func rateLimited(_ seconds: Int) -> ServerError {
        metrics.event("rate_limited")
        return .tooManyRequests(retryAfter: seconds, "failed client authentications")
    }
}
