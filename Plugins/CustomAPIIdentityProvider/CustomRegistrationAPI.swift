public import Foundation
import GatehouseKernel
import GatehouseOutbound

/// The integrator's registration API behind a custom-API identity provider.
///
/// Two-step providers call ``initialize(_:)`` first (its reply's data reaches the app, e.g. "type
/// the code we sent you"), then ``complete(_:)``; one-step providers call only ``complete(_:)``.
/// Reply statuses follow the seed server's ranges: 2000–2999 success (``complete(_:)`` must then name
/// the user), 4000–4999 the user may try again, 5000–5999 the registration is over.
public protocol CustomRegistrationAPI: Sendable {
    /// The first step of a two-step registration: starts it, and its reply's data reaches the app
    /// (e.g. "type the code we sent you"). Throw when the API cannot answer; the registration then
    /// fails as `externalIdentityProviderFailure`, to be tried again later.
    func initialize(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply
    /// The last (or only) step: a reply of 2000–2999 must name the user in
    /// ``CustomRegistrationReply/userID``. Throw when the API cannot answer; the registration then
    /// fails as `externalIdentityProviderFailure`, to be tried again later.
    func complete(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply
}

/// One call to a custom registration API.
public struct CustomRegistrationRequest: Codable, Sendable, Equatable {
    /// The identity provider's manifest id.
    public var identityProvider: String
    /// What the app sent for this step.
    public var data: String?
    /// What ``CustomRegistrationReply/state`` said at the previous step; kept on the server.
    public var state: String?
    /// The scopes the app requested (`scopes`); empty means the application's defaults.
    public var scopes: [String]

    /// Makes a request; the identity provider does this for each step.
    public init(identityProvider: String, data: String?, state: String?, scopes: [String]) {
        self.identityProvider = identityProvider
        self.data = data
        self.state = state
        self.scopes = scopes
    }

    enum CodingKeys: String, CodingKey {
        case identityProvider = "identity_provider"
        case data, state, scopes
    }
}

/// A custom registration API's answer.
public struct CustomRegistrationReply: Codable, Sendable, Equatable {
    /// The seed server's status (`status`): 2000–2999 success, 4000–4999 the user may try again,
    /// 5000–5999 the registration is over.
    public var status: Int
    /// Shown to the app as the custom info's data.
    public var data: String?
    /// On a successful ``CustomRegistrationAPI/complete(_:)``: the user's stable id. Registering
    /// the same id again on the same device reuses its profile.
    public var userID: String?
    /// Kept by the server (never sent to the app) and handed to the next call.
    public var state: String?

    /// Makes a reply; only `status` is required.
    public init(status: Int, data: String? = nil, userID: String? = nil, state: String? = nil) {
        self.status = status
        self.data = data
        self.userID = userID
        self.state = state
    }

    enum CodingKeys: String, CodingKey {
        case status, data
        case userID = "user_id"
        case state
    }

    var info: CustomInfo { CustomInfo(status: status, data: data) }
}

/// A custom registration API reached over HTTP: each step is a `POST` of a
/// ``CustomRegistrationRequest`` as JSON with `"step": "init" | "complete"`, answered by a
/// ``CustomRegistrationReply``.
public struct HTTPCustomRegistrationAPI: CustomRegistrationAPI {
    /// Where each step is posted.
    public let url: URL
    /// How long one step may take, in seconds (default 10); a step that takes longer fails as
    /// `externalIdentityProviderFailure`.
    public let timeout: TimeInterval

    /// Makes the client of the API at `url`; `timeout` is in seconds.
    public init(url: URL, timeout: TimeInterval = 10) {
        self.url = url
        self.timeout = timeout
    }

    /// Posts the request with `"step": "init"`. Throws `RegistrationError`
    /// `externalIdentityProviderFailure` when the API answers with an HTTP error or a malformed
    /// reply.
    public func initialize(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        try await post(step: "init", request)
    }

    /// Posts the request with `"step": "complete"`. Throws `RegistrationError`
    /// `externalIdentityProviderFailure` when the API answers with an HTTP error or a malformed
    /// reply.
    public func complete(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        try await post(step: "complete", request)
    }

    private struct Body: Encodable {
        var step: String
        var request: CustomRegistrationRequest

        func encode(to encoder: any Encoder) throws {
            try request.encode(to: encoder)
            var container = encoder.container(keyedBy: StepKey.self)
            try container.encode(step, forKey: .step)
        }

        enum StepKey: String, CodingKey { case step }
    }

    /// Through the server's outbound client (``OutboundHTTP``): no redirects followed (a 3xx is an
    /// error answer), at most 64 KiB read, the whole step within ``timeout``.
    private func post(step: String, _ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        func failure(_ what: String) -> RegistrationError {
            RegistrationError(
                .externalIdentityProviderFailure,
                message: "The custom registration API at \(url) \(what).",
                plugin: CustomAPIIdentityProviderPlugin.typeIdentifier
            )
        }
        let target: OutboundURL
        do {
            target = try OutboundURL(url.absoluteString)
        } catch {
            throw failure("cannot be called (\(error.reason))")
        }
        let response: OutboundHTTP.Response
        do {
            response = try await OutboundHTTP.post(
                target,
                headers: [("Content-Type", "application/json")],
                body: try JSONEncoder().encode(Body(step: step, request: request)),
                timeout: .milliseconds(Int64(max(0.001, timeout) * 1000))
            )
        } catch let error as OutboundHTTP.Failure {
            throw failure("could not be reached (\(error.reason))")
        }
        guard (200..<300).contains(response.status) else { throw failure("answered with an error") }
        do {
            return try JSONDecoder().decode(CustomRegistrationReply.self, from: response.body)
        } catch {
            throw failure("sent a malformed reply")
        }
    }
}
