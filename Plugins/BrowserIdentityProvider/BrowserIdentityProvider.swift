import Crypto
public import Foundation
public import GatehouseKernel

// Registration through a browser: OAuth 2.0 authorization code with PKCE (RFC 6749, RFC 7636,
// RFC 8252 for native apps, RFC 9700 for today's practice). The device makes the PKCE verifier
// and keeps it; the server half makes the state and builds the authorization URL; the app opens
// it and hands back the redirect; the server half checks the state and redeems the code, with
// the verifier, at the login that issued it.

/// The login that issues and redeems the codes (the token server's hosted login, or another one
/// the host adapts). The host provides it under ``BrowserLoginServiceKey``, named for manifests to pick.
public protocol BrowserLoginService: Sendable {
    /// The user a code was issued for; throws when the code is unknown, expired, used, or not for
    /// this client, redirect and verifier — a ``BrowserLoginReplay`` when it was used before.
    func redeem(code: String, clientID: String, redirectURI: String, verifier: String) async throws -> String
}

/// A code was redeemed before: the sessions it issued to `subject` must be revoked.
public struct BrowserLoginReplay: Error, Sendable, Equatable {
    /// The provider's user the replayed code was issued for, whose sessions from it are revoked.
    public var subject: String
    /// Makes the error for a code issued to `subject`.
    public init(subject: String) { self.subject = subject }
}

struct BrowserMessage: Codable {
    enum Step: String, Codable { case start, finish }
    var step: Step
    var redirectURI: String?
    var codeChallenge: String?
    var code: String?
    var state: String?
    var codeVerifier: String?
}

struct BrowserChallenge: Codable {
    var authorizationURL: String
}

struct BrowserSession: Codable {
    var state: String
    var redirectURI: String
    var codeChallenge: String
}

enum PKCEValues {
    /// 32 random bytes, base64url: a 43-character verifier (RFC 7636 §4.1).
    static func verifier() -> String { base64URL(Data((0..<32).map { _ in UInt8.random(in: 0...255) })) }

    static func challenge(for verifier: String) -> String { base64URL(Data(SHA256.hash(data: Data(verifier.utf8)))) }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// The client half: makes the PKCE verifier, asks the app to open the login, checks the redirect
/// (its address and the state) and sends the code with the verifier.
public struct BrowserIdentityProvider: IdentityProvider {
    /// This identity provider as the manifest configures it: its id, name and plugin type.
    public let descriptor: IdentityProviderDescriptor
    /// Where the login sends the browser back; the app listens there (on any port, for a loopback
    /// address).
    public let redirectURI: URL

    /// Makes the client half.
    public init(descriptor: IdentityProviderDescriptor, redirectURI: URL) {
        self.descriptor = descriptor
        self.redirectURI = redirectURI
    }

    /// Runs the registration: asks the app to open the login, checks that the redirect it hands
    /// back is to the redirect URI with the state sent, and sends the code with the PKCE verifier.
    /// Throws `GenericError` `actionCancelled` when the app cancels (or the login was not allowed),
    /// and `RegistrationError` `invalidState` when the redirect's state does not match.
    public func register(_ context: RegistrationContext) async throws -> RegistrationResult {
        let verifier = PKCEValues.verifier()
        let start = BrowserMessage(
            step: .start,
            redirectURI: redirectURI.absoluteString,
            codeChallenge: PKCEValues.challenge(for: verifier)
        )
        guard case .challenge(let payload) = try await context.server.send(try JSONEncoder().encode(start)),
            let challenge = try? JSONDecoder().decode(BrowserChallenge.self, from: payload),
            let url = URL(string: challenge.authorizationURL),
            let state = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first(where: {
                $0.name == "state"
            })?.value
        else {
            throw GenericError(.requestInvalid, message: "The server sent no login address.", plugin: descriptor.type)
        }
        let answer = await context.responder.browserRegistration(
            BrowserRegistrationChallenge(identityProvider: descriptor, url: url, redirectURI: redirectURI)
        )
        guard case .redirect(let redirect) = answer else { throw GenericError(.actionCancelled) }
        let (usedRedirectURI, fields) = try returned(redirect)
        if let error = fields["error"] {
            if error == "access_denied" { throw GenericError(.actionCancelled, message: "The login was not allowed.") }
            throw RegistrationError(
                .externalIdentityProviderFailure,
                message: "The login refused: \(fields["error_description"] ?? error).",
                plugin: descriptor.type
            )
        }
        // The state this registration sent must come back: anything else is another login's answer.
        guard let returnedState = fields["state"], ConstantTime.equals(returnedState, state) else {
            throw RegistrationError(.invalidState, plugin: descriptor.type)
        }
        guard let code = fields["code"], !code.isEmpty else {
            throw RegistrationError(
                .externalIdentityProviderFailure,
                message: "The login sent no code.",
                plugin: descriptor.type
            )
        }
        let finish = BrowserMessage(
            step: .finish,
            redirectURI: usedRedirectURI,
            code: code,
            state: returnedState,
            codeVerifier: verifier
        )
        guard case .completed(_, let info) = try await context.server.send(try JSONEncoder().encode(finish)) else {
            throw GenericError(
                .requestInvalid,
                message: "The server asked for more than the code.",
                plugin: descriptor.type
            )
        }
        return RegistrationResult(info: info)
    }

    /// The redirect URI the browser came back to and the redirect's query, if it is this
    /// provider's redirect URI; for a loopback one, on any port (RFC 8252 §7.3).
    private func returned(_ redirect: URL) throws -> (redirectURI: String, fields: [String: String]) {
        guard let parts = URLComponents(url: redirect, resolvingAgainstBaseURL: false),
            let used = BrowserRedirects.sameExceptLoopbackPort(parts, as: redirectURI.absoluteString)
        else {
            throw RegistrationError(
                .invalidState,
                message: "The browser returned to \(redirect.absoluteString.prefix(120)), not to \(redirectURI).",
                plugin: descriptor.type
            )
        }
        var fields: [String: String] = [:]
        for item in parts.queryItems ?? [] where fields[item.name] == nil { fields[item.name] = item.value ?? "" }
        return (used, fields)
    }
}

enum BrowserRedirects {
    /// `candidate` without its query and fragment, when it is `configured` or, for a loopback
    /// `configured`, differs from it only in the port (RFC 8252 §7.3).
    static func sameExceptLoopbackPort(_ candidate: URLComponents, as configured: String) -> String? {
        guard let expected = URLComponents(string: configured), candidate.scheme == expected.scheme,
            candidate.host == expected.host, candidate.path == expected.path, candidate.user == nil,
            candidate.password == nil
        else { return nil }
        let loopback = expected.scheme == "http" && ["127.0.0.1", "::1", "[::1]"].contains(expected.host ?? "")
        guard candidate.port == expected.port || (loopback && (1...65535).contains(candidate.port ?? 0)) else {
            return nil
        }
        var bare = candidate
        bare.query = nil
        bare.fragment = nil
        return bare.string
    }
}
