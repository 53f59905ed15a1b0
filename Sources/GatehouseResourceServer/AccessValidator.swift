public import Foundation
import GatehouseKernel
public import GatehouseProtocol
import Synchronization

/// Who a valid request acts for: what the route gets.
public struct VerifiedAccess: Sendable, Equatable {
    /// The user as the identity provider named them; nil for a device token.
    public var subject: String?
    /// The identity provider that named `subject`.
    public var identityProvider: String?
    /// The scopes the token grants.
    public var scopes: Set<String>
    /// Who the token acts for: a user's session, an implicit grant, a device or a stateless session.
    public var kind: IntrospectionResponse.Kind
    /// The installation (OAuth client) the token was issued to.
    public var clientID: String
    /// The application (the manifest's `server.clients[].id`) of that installation.
    public var appID: String?
    /// The thumbprint of the DPoP key that holds the token.
    public var keyThumbprint: String
    /// When the token expires; the route may refuse work that would outlive it.
    public var expiresAt: Date
}

/// Why a request was refused, as the resource server answers it (RFC 6750 §3, RFC 9449 §7.1).
public struct AccessRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// 400, 401, 403 or 503.
    public var status: Int
    /// `invalid_request`, `invalid_token`, `invalid_dpop_proof`, `use_dpop_nonce`,
    /// `insufficient_scope`, `insufficient_user_authentication` or `temporarily_unavailable`;
    /// nil when the request carried no credentials at all.
    public var error: String?
    /// What was wrong, in words; sent as `error_description`.
    public var message: String
    /// The `WWW-Authenticate` challenge to send.
    public var challenge: String
    /// A fresh nonce to send as `DPoP-Nonce`, when the validator requires nonces.
    public var nonce: String?

    /// The status, the error and the message, as a log line carries them.
    public var description: String { "\(status) \(error ?? "unauthenticated"): \(message)" }
}

/// Checks a DPoP-bound Gatehouse access token the way RFC 9449 §7 asks a resource server to:
/// the `Authorization: DPoP` token, a proof for this very method and URI signed by the key the
/// token is bound to (`cnf.jkt`) and carrying the token's hash, a proof used once, and then the
/// token's kind and scopes. It is framework-free: hand it the method, the path and the headers.
public struct AccessValidator<Introspector: TokenIntrospecting>: Sendable {
    /// What a route asks of the token.
    public struct Requirement: Sendable, Equatable {
        /// Every one of these scopes must be granted.
        public var scopes: Set<String>
        /// The token kinds accepted (default: a user's session only).
        public var kinds: Set<IntrospectionResponse.Kind>

        /// A requirement of these scopes from a token of one of these kinds (default: no scope, a user's session).
        public init(scopes: Set<String> = [], kinds: Set<IntrospectionResponse.Kind> = [.user]) {
            self.scopes = scopes
            self.kinds = kinds
        }
    }

    /// Where the validator learns what a token is: the token server in-process, or ``HTTPIntrospection``.
    public let introspector: Introspector
    /// The URL clients reach this resource server at, without a trailing slash
    /// (`https://api.example.com`): proofs must name it and the request's path (`htu`). Behind a
    /// proxy it is the proxy's, which is configuration, not something to guess from headers.
    public let publicURL: String
    let nonces: DPoPNonces?
    let proofs: SeenProofs

    /// A validator that asks `introspector` about each token and checks proofs against `publicURL`.
    ///
    /// - Parameters:
    ///   - introspector: Where the validator learns what a token is.
    ///   - publicURL: The URL clients reach this resource server at; a trailing slash is dropped.
    ///   - nonceSecret: When set, proofs must carry a nonce this resource server gave out
    ///     (RFC 9449 §9); instances sharing the secret accept each other's nonces.
    ///   - seenProofCapacity: Proofs remembered (for the clock-skew window) to refuse a replay;
    ///     when that many are live, new requests are refused with 503 rather than forgetting one.
    public init(
        introspector: Introspector,
        publicURL: String,
        nonceSecret: Data? = nil,
        seenProofCapacity: Int = 200_000
    ) {
        self.introspector = introspector
        self.publicURL = publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL
        nonces = nonceSecret.map(DPoPNonces.init)
        proofs = SeenProofs(capacity: seenProofCapacity)
    }

    /// Validates a request: `path` is the request target as received (its query is ignored),
    /// `header` looks a header up by name in any case.
    public func validate(
        method: String,
        path: String,
        header: (String) -> String?,
        requirement: Requirement = Requirement(),
        now: Date = Date()
    ) async throws(AccessRefusal) -> VerifiedAccess {
        guard let authorization = header("Authorization") else {
            throw refusal(401, nil, "An access token is required (Authorization: DPoP <token>).", now: now)
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "dpop", !parts[1].isEmpty, parts[1].utf8.count <= 512,
            !parts[1].contains(" ")
        else {
            throw refusal(
                401,
                "invalid_token",
                "Send the access token as \"Authorization: DPoP <token>\": Gatehouse tokens are bound to a key.",
                now: now
            )
        }
        let token = String(parts[1])
        guard let proofHeader = header("DPoP") else {
            throw refusal(401, "invalid_dpop_proof", "A DPoP proof is required.", now: now)
        }
        let target = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        let proof: DPoP.VerifiedProof
        do {
            proof = try DPoP.verify(
                proofHeader,
                method: method,
                url: publicURL + target,
                accessToken: token,
                now: now
            )
        } catch {
            throw refusal(401, "invalid_dpop_proof", "The DPoP proof is not valid: \(error.reason).", now: now)
        }
        if let nonces {
            guard let nonce = proof.nonce, nonces.accepts(nonce, now: now.timeIntervalSince1970) else {
                throw refusal(401, "use_dpop_nonce", "Send the proof again with the DPoP-Nonce given.", now: now)
            }
        }
        let answer: IntrospectionResponse
        do {
            answer = try await introspector.introspect(token)
        } catch {
            throw refusal(503, "temporarily_unavailable", "The token server could not be asked.", now: now)
        }
        guard answer.active, let kind = answer.kind, let jkt = answer.cnf?.jkt, let clientID = answer.clientID,
            let exp = answer.exp, Double(exp) > now.timeIntervalSince1970
        else {
            throw refusal(
                401,
                "invalid_token",
                "The access token is not valid (unknown, expired or revoked).",
                now: now
            )
        }
        guard ConstantTime.equals(jkt, proof.keyThumbprint) else {
            throw refusal(401, "invalid_token", "The access token is bound to another key.", now: now)
        }
        guard requirement.kinds.contains(kind) else {
            let accepted = requirement.kinds.map(\.rawValue).sorted().joined(separator: ", ")
            throw refusal(
                401,
                "insufficient_user_authentication",
                "A \(kind.rawValue) token is not accepted here (accepted: \(accepted)).",
                now: now
            )
        }
        let scopes = Set((answer.scope ?? "").split(separator: " ").map(String.init))
        guard requirement.scopes.isSubset(of: scopes) else {
            let missing = requirement.scopes.subtracting(scopes).sorted().joined(separator: " ")
            var refused = refusal(403, "insufficient_scope", "The token lacks the scope \(missing).", now: now)
            refused.challenge += #", scope="\#(requirement.scopes.sorted().joined(separator: " "))""#
            throw refused
        }
        // The proof is spent only once everything else holds: a refused request spends nothing.
        let seconds = now.timeIntervalSince1970
        let proofID = proof.keyThumbprint + ":" + proof.jti
        switch proofs.insert(proofID, expiresAt: seconds + 2 * DPoP.allowedClockSkew, now: seconds) {
        case .inserted: break
        case .seen: throw refusal(401, "invalid_dpop_proof", "The DPoP proof was already used.", now: now)
        case .full: throw refusal(503, "temporarily_unavailable", "Too many requests at once; try again.", now: now)
        }
        return VerifiedAccess(
            subject: answer.sub,
            identityProvider: answer.identityProvider,
            scopes: scopes,
            kind: kind,
            clientID: clientID,
            appID: answer.appID,
            keyThumbprint: proof.keyThumbprint,
            expiresAt: Date(timeIntervalSince1970: TimeInterval(exp))
        )
    }

    /// The nonce to send with a successful response, when nonces are required.
    public func currentNonce(now: Date = Date()) -> String? { nonces?.current(now: now.timeIntervalSince1970) }

    private func refusal(_ status: Int, _ error: String?, _ message: String, now: Date) -> AccessRefusal {
        var challenge = "DPoP"
        var parameters: [String] = []
        if let error { parameters.append(#"error="\#(error)""#) }
        parameters.append(#"algs="\#(DPoP.algorithms.joined(separator: " "))""#)
        challenge += " " + parameters.joined(separator: ", ")
        return AccessRefusal(
            status: status,
            error: error,
            message: message,
            challenge: challenge,
            nonce: currentNonce(now: now)
        )
    }
}

/// Proof ids seen in the last clock-skew window, bounded.
final class SeenProofs: Sendable {
    enum Outcome { case inserted, seen, full }

    private let state = Mutex<(entries: [String: Double], lastPurge: Double)>(([:], 0))
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    func insert(_ id: String, expiresAt: Double, now: Double) -> Outcome {
        state.withLock { state in
            if let expiry = state.entries[id], expiry > now { return .seen }
            // Expired ids go when the set is full, at most once a second: a flood of fresh
            // proofs cannot make every request pay for a sweep.
            if state.entries.count >= capacity, now - state.lastPurge >= 1 {
                state.entries = state.entries.filter { $0.value > now }
                state.lastPurge = now
            }
            guard state.entries.count < capacity else { return .full }
            state.entries[id] = expiresAt
            return .inserted
        }
    }
}
