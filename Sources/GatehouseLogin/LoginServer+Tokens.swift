import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

// The token endpoint for web clients (authorization_code, refresh_token) and userinfo. Errors are
// RFC 6749 §5.2 JSON; nothing is changed by a refused request except what a refusal must change
// (a replayed code or refresh token revokes its grant).

extension LoginServer {
    struct TokenError: Error {
        var status: Int
        var error: String
        var description: String
        var headers: [String: String] = [:]
    }

    struct TokenResponse: Encodable {
        var accessToken: String
        var tokenType = "Bearer"
        var expiresIn: Int
        var refreshToken: String?
        var idToken: String?
        var scope: String

        enum CodingKeys: String, CodingKey {
            case scope
            case accessToken = "access_token"
            case tokenType = "token_type"
            case expiresIn = "expires_in"
            case refreshToken = "refresh_token"
            case idToken = "id_token"
        }
    }

    func token(_ request: WireRequest) async -> WireResponse {
        do {
            guard
                request.header("Content-Type")?.lowercased().split(separator: ";").first
                    == "application/x-www-form-urlencoded",
                request.body.count <= 16_384, let fields = FormFields(body: request.body)
            else {
                throw TokenError(
                    status: 400,
                    error: "invalid_request",
                    description: "Send a form (application/x-www-form-urlencoded) with each parameter once."
                )
            }
            let client = try authenticateClient(request, fields)
            switch fields["grant_type"] {
            case "authorization_code": return try await exchangeCode(fields, client)
            case "refresh_token": return try await refresh(fields, client)
            case nil: throw TokenError(status: 400, error: "invalid_request", description: "grant_type is missing.")
            default:
                throw TokenError(
                    status: 400,
                    error: "unsupported_grant_type",
                    description: "The grant types are authorization_code and refresh_token."
                )
            }
        } catch let refusal as TokenError {
            return json(
                refusal.status,
                ["error": refusal.error, "error_description": refusal.description],
                headers: refusal.headers
            )
        } catch is StorageUnavailable {
            return json(503, ["error": "temporarily_unavailable", "error_description": "Try again."])
        } catch {
            logger.error("Token request failed", metadata: ["error": "\(String(reflecting: error))"])
            return json(500, ["error": "server_error", "error_description": "The token could not be issued."])
        }
    }

    /// The client the request authenticates as: a confidential client by its secret, with HTTP
    /// Basic or in the form (one of the two), a public one by its id alone.
    func authenticateClient(_ request: WireRequest, _ fields: FormFields) throws -> LoginConfiguration.Client {
        var basic: (id: String, secret: String)?
        if let header = request.header("Authorization") {
            guard header.utf8.count <= 1024, header.lowercased().hasPrefix("basic "),
                let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
                let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":"),
                let id = FormFields.decode(text[..<colon]),
                let secret = FormFields.decode(text[text.index(after: colon)...])
            else {
                throw TokenError(
                    status: 401,
                    error: "invalid_client",
                    description: "The Authorization header is not HTTP Basic client credentials.",
                    headers: ["WWW-Authenticate": #"Basic realm="gatehouse-login""#]
                )
            }
            basic = (id, secret)
        }
        if basic != nil, fields["client_secret"] != nil {
            throw TokenError(
                status: 400,
                error: "invalid_request",
                description: "Authenticate with one method: HTTP Basic or client_secret, not both."
            )
        }
        if let basic, let id = fields["client_id"], id != basic.id {
            throw TokenError(status: 400, error: "invalid_request", description: "client_id differs from the Basic id.")
        }
        let unknown = TokenError(
            status: 401,
            error: "invalid_client",
            description: "Client authentication failed.",
            headers: basic != nil ? ["WWW-Authenticate": #"Basic realm="gatehouse-login""#] : [:]
        )
        guard let id = basic?.id ?? fields["client_id"] else { throw unknown }
        let secret = basic?.secret ?? fields["client_secret"]
        if let retry = clientSecretLimiter.retryAfter(forAddress: request.clientAddress, now: now) {
            throw TokenError(
                status: 429,
                error: "invalid_client",
                description: "Too many failed client authentications; try again in \(retry) seconds.",
                headers: ["Retry-After": String(retry)]
            )
        }
        let client = configuration.clients.first { $0.id == id }
        let authenticated: Bool
        switch (client?.secret, secret) {
        case (let expected?, let given?):
            authenticated = ConstantTime.equals(
                Data(SHA256.hash(data: Data(expected.utf8))),
                Data(SHA256.hash(data: Data(given.utf8)))
            )
        case (nil, nil): authenticated = client != nil
        default: authenticated = false
        }
        guard authenticated, let client else {
            logger.notice("Client authentication failed", metadata: ["client": "\(id.prefix(64))"])
            throw unknown
        }
        clientSecretLimiter.giveBack(forAddress: request.clientAddress)
        return client
    }

    private func exchangeCode(_ fields: FormFields, _ client: LoginConfiguration.Client) async throws -> WireResponse {
        guard let code = fields["code"], (1...128).contains(code.utf8.count), let redirectURI = fields["redirect_uri"],
            let verifier = fields["code_verifier"]
        else {
            throw TokenError(
                status: 400,
                error: "invalid_request",
                description: "code, redirect_uri and code_verifier are required."
            )
        }
        let redeemed: LoginStore.RedeemedCode
        do {
            redeemed = try await store.redeemCode(
                code,
                clientID: client.id,
                redirectURI: redirectURI,
                verifier: verifier,
                now: now
            )
        } catch let refusal as LoginStore.RedemptionError {
            if case .replayed = refusal {
                logger.warning("An authorization code was used twice", metadata: ["client": "\(client.id)"])
            }
            throw TokenError(status: 400, error: "invalid_grant", description: Self.describe(refusal))
        }
        let details =
            redeemed.details
            ?? GrantDetails(nonce: nil, authTime: now, sessionID: nil, amr: ["pwd"], acr: Self.passwordACR)
        var grant = LoginStore.TokenGrant(
            grantID: redeemed.grantID,
            clientID: client.id,
            subject: redeemed.subject,
            scope: redeemed.scope,
            details: details
        )
        grant.details.nonce = nil
        return try await issue(grant, client, nonce: details.nonce)
    }

    private func refresh(_ fields: FormFields, _ client: LoginConfiguration.Client) async throws -> WireResponse {
        guard let token = fields["refresh_token"], (1...128).contains(token.utf8.count) else {
            throw TokenError(status: 400, error: "invalid_request", description: "refresh_token is required.")
        }
        let grant: LoginStore.TokenGrant
        do {
            // A narrower scope may be asked for (RFC 6749 §6), never a wider one; the store
            // refuses a wider one without spending the token.
            grant = try await store.spendRefreshToken(token, clientID: client.id, scope: fields["scope"], now: now)
        } catch let refusal as LoginStore.RefreshRefusal {
            if refusal == .widerScope {
                throw TokenError(status: 400, error: "invalid_scope", description: "Ask for granted scopes only.")
            }
            if refusal == .reused {
                logger.warning(
                    "A spent refresh token was used again; its grant is revoked",
                    metadata: ["client": "\(client.id)"]
                )
            }
            throw TokenError(
                status: 400,
                error: "invalid_grant",
                description: "The refresh token is not valid (expired, revoked, spent or another client's)."
            )
        }
        // The new refresh token keeps the grant's whole scope (RFC 6749 §6); only the access token
        // is narrowed.
        let narrowed = fields["scope"].map { $0.split(separator: " ").joined(separator: " ") }
        return try await issue(grant, client, nonce: nil, accessScope: narrowed)
    }

    private func issue(
        _ grant: LoginStore.TokenGrant,
        _ client: LoginConfiguration.Client,
        nonce: String?,
        accessScope: String? = nil
    ) async throws -> WireResponse {
        guard
            let (access, refresh) = try await store.issueTokens(
                grant,
                accessExpiresAt: now + Double(configuration.accessTokenLifetime),
                refreshExpiresAt: client.refreshTokens ? now + Double(configuration.refreshTokenLifetime) : nil,
                accessScope: accessScope,
                now: now
            )
        else {
            throw TokenError(
                status: 400,
                error: "invalid_grant",
                description:
                    "The grant was revoked (a code or refresh token used twice) or its sign-in session has ended."
            )
        }
        var grant = grant
        if let accessScope { grant.scope = accessScope }
        let openID = grant.scope.split(separator: " ").contains("openid")
        return json(
            200,
            TokenResponse(
                accessToken: access,
                expiresIn: configuration.accessTokenLifetime,
                refreshToken: refresh,
                idToken: openID ? try await idToken(grant, for: client, accessToken: access, nonce: nonce) : nil,
                scope: grant.scope
            )
        )
    }

    static func describe(_ refusal: LoginStore.RedemptionError) -> String {
        switch refusal {
        case .unknown: "The code is not valid."
        case .expired: "The code has expired."
        case .replayed: "The code was used before; what it issued is revoked."
        case .wrongClient: "The code was issued to another client."
        case .wrongRedirect: "redirect_uri differs from the authorization request's."
        case .wrongVerifier: "The code_verifier does not match the code_challenge."
        }
    }

    // MARK: - Userinfo

    func userinfo(_ request: WireRequest) async -> WireResponse {
        func refuse(_ status: Int, _ error: String, _ description: String) -> WireResponse {
            json(
                status,
                ["error": error, "error_description": description],
                headers: ["WWW-Authenticate": #"Bearer realm="gatehouse-login", error="\#(error)""#]
            )
        }
        guard let header = request.header("Authorization"), header.utf8.count <= 1024,
            header.lowercased().hasPrefix("bearer ")
        else {
            return json(
                401,
                ["error": "invalid_token", "error_description": "Send the access token as a Bearer token."],
                headers: ["WWW-Authenticate": #"Bearer realm="gatehouse-login""#]
            )
        }
        let token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        do {
            guard (1...128).contains(token.utf8.count), let grant = try await store.accessGrant(token, now: now),
                let client = configuration.clients.first(where: { $0.id == grant.clientID })
            else { return refuse(401, "invalid_token", "The access token is not valid (expired or revoked).") }
            guard grant.scope.split(separator: " ").contains("openid") else {
                return refuse(403, "insufficient_scope", "The access token was not issued with the openid scope.")
            }
            var profile = try await profile(grant.subject, scope: grant.scope)
            profile.sub = try await publicSubject(grant.subject, for: client)
            return json(200, profile)
        } catch is StorageUnavailable {
            return json(503, ["error": "temporarily_unavailable", "error_description": "Try again."])
        } catch {
            logger.error("Userinfo request failed", metadata: ["error": "\(String(reflecting: error))"])
            return json(500, ["error": "server_error", "error_description": "The claims could not be read."])
        }
    }
}
