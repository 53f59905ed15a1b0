import Crypto
public import Foundation
public import GatehouseKernel

/// The server half: makes the state, builds the authorization URL (PKCE S256 always), and on
/// the way back checks the state before the login redeems the code with the verifier.
public struct BrowserIdentityProviderHost: IdentityProviderHost {
    /// This identity provider as the manifest configures it: its id, name and plugin type.
    public let descriptor: IdentityProviderDescriptor
    /// The login's authorization endpoint, as the user's browser reaches it.
    public let authorizationURL: URL
    /// The `client_id` the authorization URL carries and the login redeems codes for.
    public let clientID: String
    /// The `redirect_uri` the authorization URL carries; for a loopback address any port is
    /// accepted.
    public let redirectURI: String
    /// The `scope` the authorization URL asks for, space-separated.
    public let scope: String
    /// The login that issued the codes and redeems them.
    public let login: any BrowserLoginService

    /// Makes the server half.
    public init(
        descriptor: IdentityProviderDescriptor,
        authorizationURL: URL,
        clientID: String,
        redirectURI: String,
        scope: String,
        login: any BrowserLoginService
    ) {
        self.descriptor = descriptor
        self.authorizationURL = authorizationURL
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.scope = scope
        self.login = login
    }

    /// Handles one step: `start` answers with the authorization URL (a fresh state, PKCE S256);
    /// `finish` checks the state and has the login redeem the code with the verifier, naming the
    /// user. A replayed code is refused and revokes what it issued before.
    public func handle(_ request: RegistrationStepRequest) async throws -> RegistrationOutcome {
        guard let message = try? JSONDecoder().decode(BrowserMessage.self, from: request.message) else {
            throw invalid("the message is malformed")
        }
        switch message.step {
        case .start:
            guard request.session == nil else { throw invalid("the registration has started already") }
            guard message.redirectURI == redirectURI else { throw invalid("the redirect URI is not this provider's") }
            guard let challenge = message.codeChallenge, challenge.utf8.count == 43,
                challenge.utf8.allSatisfy({ $0.isBase64URL })
            else { throw invalid("a PKCE S256 code challenge (43 characters) is required") }
            let session = BrowserSession(
                state: PKCEValues.base64URL(Data((0..<24).map { _ in UInt8.random(in: 0...255) })),
                redirectURI: redirectURI,
                codeChallenge: challenge
            )
            var url = URLComponents(url: authorizationURL, resolvingAgainstBaseURL: false)
            url?.queryItems = [
                URLQueryItem(name: "response_type", value: "code"),
                URLQueryItem(name: "client_id", value: clientID),
                URLQueryItem(name: "redirect_uri", value: redirectURI),
                URLQueryItem(name: "scope", value: scope),
                URLQueryItem(name: "state", value: session.state),
                URLQueryItem(name: "code_challenge", value: challenge),
                URLQueryItem(name: "code_challenge_method", value: "S256"),
            ]
            guard let address = url?.url?.absoluteString else { throw invalid("the authorization URL cannot be built") }
            return .challenge(
                payload: try JSONEncoder().encode(BrowserChallenge(authorizationURL: address)),
                session: try JSONEncoder().encode(session)
            )
        case .finish:
            guard let stored = request.session,
                let session = try? JSONDecoder().decode(BrowserSession.self, from: stored)
            else { throw invalid("the registration has not started") }
            guard let state = message.state, ConstantTime.equals(state, session.state) else {
                return .failure(RegistrationError(.invalidState, plugin: descriptor.type))
            }
            // The app may have listened on another loopback port than the configured one; the
            // login checks the code was issued for exactly this redirect URI.
            let usedRedirectURI = message.redirectURI ?? session.redirectURI
            guard let components = URLComponents(string: usedRedirectURI),
                BrowserRedirects.sameExceptLoopbackPort(components, as: session.redirectURI) == usedRedirectURI
            else { throw invalid("the redirect URI is not this provider's") }
            guard let code = message.code, (1...512).contains(code.utf8.count), let verifier = message.codeVerifier,
                ConstantTime.equals(PKCEValues.challenge(for: verifier), session.codeChallenge)
            else {
                return .failure(
                    RegistrationError(
                        .externalIdentityProviderFailure,
                        message: "The code or its PKCE verifier is missing or wrong.",
                        plugin: descriptor.type
                    )
                )
            }
            do {
                let subject = try await login.redeem(
                    code: code,
                    clientID: clientID,
                    redirectURI: usedRedirectURI,
                    verifier: verifier
                )
                return .registered(RegisteredIdentity(subject: subject, grant: Self.grant(code)))
            } catch let replay as BrowserLoginReplay {
                return .replayed(
                    RegistrationError(
                        .externalIdentityProviderFailure,
                        message: "The code was used before; what it issued is revoked.",
                        plugin: descriptor.type
                    ),
                    subject: replay.subject,
                    grant: Self.grant(code)
                )
            } catch {
                return .failure(
                    RegistrationError(
                        .externalIdentityProviderFailure,
                        message: "The login did not accept the code: it is unknown, expired, or not for this app.",
                        plugin: descriptor.type
                    )
                )
            }
        }
    }

    /// What names a code's sessions: its SHA-256, so the code itself is stored nowhere.
    static func grant(_ code: String) -> String {
        "code:" + PKCEValues.base64URL(Data(SHA256.hash(data: Data(code.utf8))))
    }

    private func invalid(_ problem: String) -> GenericError {
        GenericError(.requestInvalid, message: "Browser registration: \(problem).", plugin: descriptor.type)
    }
}

extension UInt8 {
    fileprivate var isBase64URL: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) || self == 0x2D
            || self == 0x5F
    }
}

/// `idp.browser`: registration through a browser login (authorization code with PKCE).
///
/// Configuration: `authorizationURL` (the login's authorization endpoint, as the user's browser
/// reaches it), `clientID` [gatehouse], `redirectURI` [http://127.0.0.1:53180/callback: a
/// loopback address the app listens on, RFC 8252; for a loopback one the app may listen on any
/// port the system gives it, and the server accepts that port], `scope` [openid], and for the server half
/// `login`: the name of a ``BrowserLoginService`` the host provides.
public enum BrowserIdentityProviderPlugin: IdentityProviderPlugin {
    /// The `config` of an `idp.browser` entry.
    public struct Configuration: Decodable, Sendable {
        /// `authorizationURL`: the login's authorization endpoint, as the user's browser reaches
        /// it. Required.
        public var authorizationURL: URL
        /// `clientID`: the OAuth client id. Default `gatehouse`.
        public var clientID: String
        /// `redirectURI`: where the browser comes back, an http or https URL without query. Default
        /// `http://127.0.0.1:53180/callback`.
        public var redirectURI: URL
        /// `scope`: the OAuth scope asked for. Default `openid`.
        public var scope: String
        /// `login`: the name under which the host provides the ``BrowserLoginService``; only the
        /// server half needs it.
        public var login: String?

        private enum CodingKeys: String, CodingKey { case authorizationURL, clientID, redirectURI, scope, login }

        /// Reads `config`; throws when a URL is not http or https, or has a query or a fragment.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            func url(_ key: CodingKeys, default fallback: String? = nil) throws -> URL {
                let text =
                    try fallback.map { try container.decode(String.self, forKey: key, default: $0) }
                    ?? container.decode(String.self, forKey: key)
                guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
                    url.query == nil, url.fragment == nil
                else { throw container.invalid(key, "expected an http or https URL without query, found \"\(text)\"") }
                return url
            }
            authorizationURL = try url(.authorizationURL)
            redirectURI = try url(.redirectURI, default: "http://127.0.0.1:53180/callback")
            clientID = try container.decode(String.self, forKey: .clientID, default: "gatehouse")
            scope = try container.decode(String.self, forKey: .scope, default: "openid")
            login = try container.decodeIfPresent(String.self, forKey: .login)
        }
    }

    /// `"idp.browser"`.
    public static let typeIdentifier: PluginTypeIdentifier = "idp.browser"
    /// The client half opens the authorization URL and listens on the redirect URI.
    public static let publishedConfigurationKeys: Set<String> = [
        "authorizationURL", "clientID", "redirectURI", "scope",
    ]
    /// One line for listings.
    public static let summary = "Registration through a browser login: authorization code with PKCE"

    /// Makes the client half, ``BrowserIdentityProvider``, with the redirect URI.
    public static func makeIdentityProvider(
        configuration: Configuration,
        context: PluginContext
    ) -> any IdentityProvider {
        BrowserIdentityProvider(descriptor: context.descriptor, redirectURI: configuration.redirectURI)
    }

    /// Makes the server half with the login `login` names; throws a `ConfigurationError` when the
    /// host provides no login by that name.
    public static func makeHost(configuration: Configuration, context: PluginContext) throws -> any IdentityProviderHost
    {
        // The server half cannot work without a login: no `login` is reported as a missing one.
        let login = try context.services.require(
            BrowserLoginServiceKey.self,
            named: configuration.login ?? "",
            forConfigurationKey: "login"
        )
        return BrowserIdentityProviderHost(
            descriptor: context.descriptor,
            authorizationURL: configuration.authorizationURL,
            clientID: configuration.clientID,
            redirectURI: configuration.redirectURI.absoluteString,
            scope: configuration.scope,
            login: login
        )
    }
}
