import Crypto
public import Foundation
public import GatehouseKernel
import GatehouseProtocol

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Which token a resource call carries.
public enum ResourceAccess: Sendable, Equatable {
    /// The authenticated user's session.
    case user
    /// The implicitly authenticated profile's token (``UserClient/authenticateUserImplicitly(_:scopes:)``).
    case implicit
    /// The installation's device token (``UserClient/authenticateDevice(scopes:)``).
    case device
    /// No token: an unauthenticated call.
    case anonymous
}

/// Where to send the browser to land on a web page signed in (``UserClient/appToWebSingleSignOn(targetURL:)``).
public struct AppToWebSingleSignOn: Sendable, Equatable {
    /// Open this in the browser: it redeems the one-time token and goes on to the target.
    public var redirectURL: URL
    /// The one-time login token the redirect carries (single use, valid for a minute).
    public var token: String
}

/// A resource server's answer.
public struct ResourceResponse: Sendable {
    /// The HTTP status code the resource server answered.
    public var status: Int
    /// The response's headers as the resource server sent them.
    public var headers: [String: String]
    /// The response body, unread.
    public var body: Data
}

// Implicit and device authentication, and calls to the app's own resource servers with any of
// its tokens, DPoP-bound.

extension UserClient {
    /// Implicit authentication: an access token for `profile` without user interaction, for
    /// non-sensitive data such as a greeting. `scopes` must be among the registration's and the
    /// application's implicit scopes; empty asks for all of those.
    public func authenticateUserImplicitly(_ profile: UserProfile, scopes: [String] = []) async throws {
        guard let stored = try store.profile(profile.id, server: server) else {
            throw GenericError(
                .userDeregistered,
                message: "The profile \(profile.id) is not registered on this device."
            )
        }
        do {
            let token: AccessTokenResponse = try await calls.call(
                "POST",
                Endpoint.token,
                body: TokenRequest(
                    grantType: GrantType.implicit,
                    scope: scopes.isEmpty ? nil : scopes.joined(separator: " "),
                    profileID: profile.id
                ),
                key: stored.key
            )
            implicitSession = ImplicitSession(profile: profile, key: stored.key, token: token)
        } catch let error as GenericError where error.code == .userDeregistered {
            try store.removeProfile(profile.id)
            if implicitSession?.profile == profile { implicitSession = nil }
            throw error
        }
    }

    /// The profile with an implicit token, if any.
    public var implicitlyAuthenticatedUserProfile: UserProfile? { implicitSession?.profile }

    /// Device authentication (client credentials): a token for this installation, no user, for
    /// the application's anonymous resources. `scopes` must be among the application's device
    /// scopes; empty asks for all of them.
    public func authenticateDevice(scopes: [String] = []) async throws {
        let request = TokenRequest(
            grantType: GrantType.clientCredentials,
            scope: scopes.isEmpty ? nil : scopes.joined(separator: " ")
        )
        var device = try await registeredDevice()
        let token: AccessTokenResponse
        do {
            token = try await calls.call("POST", Endpoint.token, body: request, key: device.key)
        } catch let error as GenericError where error.code == .deviceDeregistered {
            // The server let this installation go (idle for long): register the key again, once.
            try store.forgetDevice(server: server)
            device = try await registeredDevice()
            token = try await calls.call("POST", Endpoint.token, body: request, key: device.key)
        }
        deviceSession = DeviceSession(key: device.key, token: token)
    }

    /// App-to-web single sign-on: a one-time login for `targetURL`, which must be among the
    /// application's web login targets. The authenticated user's browser opens `redirectURL`
    /// and lands on the target signed in.
    public func appToWebSingleSignOn(targetURL: URL) async throws -> AppToWebSingleSignOn {
        guard session != nil else { throw AppToWebSingleSignOnError(.userNotAuthenticated) }
        let response: WebLoginResponse = try await authorized { token, key in
            try await self.calls.call(
                "POST",
                Endpoint.webLogin,
                body: WebLoginRequest(targetURL: targetURL.absoluteString),
                key: key,
                accessToken: token
            )
        }
        guard let redirect = URL(string: response.redirectURL) else {
            throw GenericError(.requestInvalid, message: "The server's sign-in address is malformed.")
        }
        return AppToWebSingleSignOn(redirectURL: redirect, token: response.token)
    }

    /// The `Authorization` and `DPoP` headers for a request to one of the app's resource servers
    /// with the token of `access` (none for `.anonymous`); `nonce` is the resource server's
    /// latest `DPoP-Nonce`, when it asks for one.
    public func resourceHeaders(
        _ access: ResourceAccess,
        method: String,
        url: String,
        nonce: String? = nil
    ) throws -> [String: String] {
        let credential: (token: String, key: P256.Signing.PrivateKey)
        switch access {
        case .anonymous:
            return [:]
        case .user:
            guard let session else { throw ResourceError(.userNotAuthenticated) }
            credential = (session.tokens.accessToken, session.key)
        case .implicit:
            guard let implicitSession else { throw ResourceError(.userNotAuthenticatedImplicitly) }
            credential = (implicitSession.token.accessToken, implicitSession.key)
        case .device:
            guard let deviceSession else { throw ResourceError(.deviceNotAuthenticated) }
            credential = (deviceSession.token.accessToken, deviceSession.key)
        }
        guard let target = DPoP.normalizedHTU(url) else {
            throw ResourceError(.invalidRequest, message: "\(url.prefix(200)) is not an http or https URL.")
        }
        return [
            "Authorization": "DPoP \(credential.token)",
            "DPoP": try DPoP.proof(
                method: method,
                url: target,
                accessToken: credential.token,
                nonce: nonce,
                key: credential.key,
                now: configuration.clock.now
            ),
        ]
    }

    /// Calls one of the app's resource servers over HTTP with the token of `access`. When the
    /// resource server asks for a DPoP nonce (401 `use_dpop_nonce`), the call goes once more with it.
    public func fetchResource(
        _ url: URL,
        method: String = "GET",
        headers: [String: String] = [:],
        body: Data? = nil,
        access: ResourceAccess
    ) async throws -> ResourceResponse {
        var nonce: String?
        var attempt = 0
        while true {
            attempt += 1
            var request = URLRequest(url: url)
            request.httpMethod = method
            request.httpBody = body
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            for (name, value) in try resourceHeaders(access, method: method, url: url.absoluteString, nonce: nonce) {
                request.setValue(value, forHTTPHeaderField: name)
            }
            let data: Data
            let response: URLResponse
            do {
                (data, response) = try await ResourceSession.shared.data(for: request)
            } catch {
                throw GenericError(
                    .serverNotReachable,
                    message: "The resource server at \(url.host ?? "?") could not be reached."
                )
            }
            guard let http = response as? HTTPURLResponse else { throw GenericError(.unknown) }
            var fields: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { fields[name] = value }
            }
            let answer = ResourceResponse(status: http.statusCode, headers: fields, body: data)
            let wire = WireResponse(status: http.statusCode, headers: fields, body: data)
            if attempt == 1, access != .anonymous, ServerCalls.asksForNonce(wire),
                let fresh = wire.header("DPoP-Nonce")
            {
                nonce = fresh
                continue
            }
            return answer
        }
    }
}

/// The URL session resource calls share: it follows no redirect (a token must not travel to
/// wherever a redirect points) and keeps no cookie (the token is the only credential sent).
enum ResourceSession {
    static let shared: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        return URLSession(configuration: configuration, delegate: RedirectsNotFollowed(), delegateQueue: nil)
    }()
}
