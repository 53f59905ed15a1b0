public import Foundation
public import GatehouseKernel
import GatehouseOutbound

// Messages between the two halves: the client says which step it answers and with what data; the
// server answers with the custom API's info, and whether the step may be tried again. The
// benchmark (Benchmarks/, a package of its own) registers below the SDK with them: its SPI.

/// A message from the custom-API identity provider's client half to its server half, as JSON.
@_spi(Benchmarks)
public struct CustomAPIMessage: Codable, Sendable {
    /// Which step the message is: `start` asks whether the registration has two steps, then
    /// `initialize` (two-step only) and `complete` carry the app's data.
    public enum Step: String, Codable, Sendable { case start, initialize, complete }
    /// The step the message answers.
    public var step: Step
    /// What the app supplied for the step; `nil` when it supplied nothing.
    public var data: String?

    /// Makes a message; without `data` for `start`.
    public init(step: Step, data: String? = nil) {
        self.step = step
        self.data = data
    }
}

/// The server half's answer to a message, as JSON.
@_spi(Benchmarks)
public struct CustomAPIChallenge: Codable, Sendable {
    /// Whether the registration has an `initialize` step before `complete`.
    public var twoStep: Bool
    /// What the registration API answered to the previous step, for the app.
    public var info: CustomInfo?
    /// The last step's data was refused and may be sent again (status 4000–4999).
    public var retry: Bool
}

struct CustomAPISession: Codable {
    var initialized: Bool
    var state: String?
    var attempts: Int
}

/// The client half of a custom-API identity provider: asks the app for the data of each step
/// (init, then finish; or finish only) and relays it; a refused finish is asked again with the
/// API's info, as long as the API allows retries.
public struct CustomAPIIdentityProvider: IdentityProvider {
    /// This identity provider as the manifest configures it: its id, name and plugin type.
    public let descriptor: IdentityProviderDescriptor

    /// Makes the client half.
    public init(descriptor: IdentityProviderDescriptor) { self.descriptor = descriptor }

    /// Runs the registration: asks the app for the data of each step and relays it, asking again
    /// after a refusal the API lets the user retry. Throws `GenericError`
    /// `actionCancelled` when the app cancels, and the API's refusal as
    /// `RegistrationError` `customRegistrationFailure`.
    public func register(_ context: RegistrationContext) async throws -> RegistrationResult {
        var reply = try await send(CustomAPIMessage(step: .start), context)
        if reply.twoStep {
            let answer = await context.responder.customRegistration(
                CustomRegistrationChallenge(identityProvider: descriptor, step: .initialize, info: reply.info)
            )
            guard case .data(let data) = answer else { throw GenericError(.actionCancelled) }
            reply = try await send(CustomAPIMessage(step: .initialize, data: data), context)
        }
        var previousError: (any DomainError)?
        while true {
            let answer = await context.responder.customRegistration(
                CustomRegistrationChallenge(
                    identityProvider: descriptor,
                    step: .finish,
                    info: reply.info,
                    error: previousError
                )
            )
            guard case .data(let data) = answer else { throw GenericError(.actionCancelled) }
            let message = try JSONEncoder().encode(CustomAPIMessage(step: .complete, data: data))
            switch try await context.server.send(message) {
            case .completed(_, let info):
                return RegistrationResult(info: info)
            case .challenge(let payload):
                reply = try decode(payload)
                previousError = RegistrationError(
                    .customRegistrationFailure,
                    message: "The registration data was refused; try again.",
                    details: ErrorDetails(customInfo: reply.info),
                    plugin: descriptor.type
                )
            }
        }
    }

    private func send(_ message: CustomAPIMessage, _ context: RegistrationContext) async throws -> CustomAPIChallenge {
        guard case .challenge(let payload) = try await context.server.send(try JSONEncoder().encode(message)) else {
            throw GenericError(
                .requestInvalid,
                message: "The server ended the custom registration early.",
                plugin: descriptor.type
            )
        }
        return try decode(payload)
    }

    private func decode(_ payload: Data) throws -> CustomAPIChallenge {
        do {
            return try JSONDecoder().decode(CustomAPIChallenge.self, from: payload)
        } catch {
            throw GenericError(
                .requestInvalid,
                message: "The server's custom registration message is malformed.",
                plugin: descriptor.type
            )
        }
    }
}

/// The server half: calls the integrator's ``CustomRegistrationAPI`` and turns its statuses into
/// outcomes: 2xxx continues (or, on completion, names the user), 4xxx lets the app try again,
/// anything else ends the registration with `customRegistrationFailure` and the API's info.
public struct CustomAPIIdentityProviderHost: IdentityProviderHost {
    /// This identity provider as the manifest configures it: its id, name and plugin type.
    public let descriptor: IdentityProviderDescriptor
    /// Whether the registration calls ``CustomRegistrationAPI/initialize(_:)`` before
    /// ``CustomRegistrationAPI/complete(_:)``.
    public let twoStep: Bool
    /// How many times a step refused with a 4000–4999 status may be tried, in all.
    public let maxAttempts: Int
    /// The integrator's registration API, in process or over HTTP.
    public let api: any CustomRegistrationAPI

    /// Makes the server half.
    public init(descriptor: IdentityProviderDescriptor, twoStep: Bool, maxAttempts: Int, api: any CustomRegistrationAPI)
    {
        self.descriptor = descriptor
        self.twoStep = twoStep
        self.maxAttempts = maxAttempts
        self.api = api
    }

    /// Handles one step: calls the API and turns its status into a challenge for the next step, the
    /// named user, or a refusal.
    public func handle(_ request: RegistrationStepRequest) async throws -> RegistrationOutcome {
        let message: CustomAPIMessage
        do {
            message = try JSONDecoder().decode(CustomAPIMessage.self, from: request.message)
        } catch {
            throw GenericError(
                .requestInvalid,
                message: "Custom registration: the message is malformed.",
                plugin: descriptor.type
            )
        }
        var session =
            try request.session.map { try JSONDecoder().decode(CustomAPISession.self, from: $0) }
            ?? CustomAPISession(initialized: false, state: nil, attempts: 0)
        let call = { (data: String?) in
            CustomRegistrationRequest(
                identityProvider: self.descriptor.id,
                data: data,
                state: session.state,
                scopes: request.scopes
            )
        }
        switch message.step {
        case .start:
            return try challenge(CustomAPIChallenge(twoStep: twoStep, info: nil, retry: false), session)
        case .initialize:
            guard twoStep, !session.initialized else { throw outOfOrder() }
            let reply = try await api.initialize(call(message.data))
            guard (2000..<3000).contains(reply.status) else { return failure(reply) }
            session.initialized = true
            session.state = reply.state
            return try challenge(CustomAPIChallenge(twoStep: true, info: reply.info, retry: false), session)
        case .complete:
            guard !twoStep || session.initialized else { throw outOfOrder() }
            let reply = try await api.complete(call(message.data))
            session.attempts += 1
            if (2000..<3000).contains(reply.status) {
                guard let userID = reply.userID, !userID.isEmpty else {
                    return .failure(
                        RegistrationError(
                            .externalIdentityProviderFailure,
                            message: "The custom registration API accepted the user without naming them.",
                            plugin: descriptor.type
                        )
                    )
                }
                return .registered(RegisteredIdentity(subject: userID, info: reply.info))
            }
            if (4000..<5000).contains(reply.status), session.attempts < maxAttempts {
                session.state = reply.state ?? session.state
                return try challenge(CustomAPIChallenge(twoStep: twoStep, info: reply.info, retry: true), session)
            }
            return failure(reply)
        }
    }

    private func challenge(_ payload: CustomAPIChallenge, _ session: CustomAPISession) throws -> RegistrationOutcome {
        .challenge(payload: try JSONEncoder().encode(payload), session: try JSONEncoder().encode(session))
    }

    private func failure(_ reply: CustomRegistrationReply) -> RegistrationOutcome {
        .failure(
            RegistrationError(
                .customRegistrationFailure,
                message: "The registration was refused (status \(reply.status)).",
                details: ErrorDetails(customInfo: reply.info),
                plugin: descriptor.type
            )
        )
    }

    private func outOfOrder() -> GenericError {
        GenericError(
            .requestInvalid,
            message: "Custom registration: the step is out of order.",
            plugin: descriptor.type
        )
    }
}

/// `idp.customAPI`: registration through the integrator's own API, one or two steps.
///
/// Configuration: `twoStep` (default false); exactly one of `handler` (the name of a
/// ``CustomRegistrationAPI`` the host provides under ``CustomRegistrationAPIKey``) or `url`
/// (an HTTP endpoint, see ``HTTPCustomRegistrationAPI``); `maxAttempts` (default 3, 1–10): how
/// many times a retryable refusal of the finish step is asked again.
public enum CustomAPIIdentityProviderPlugin: IdentityProviderPlugin {
    /// The `config` of an `idp.customAPI` entry.
    public struct Configuration: Decodable, Sendable {
        /// `twoStep`: whether the registration has an `initialize` step. Default `false`.
        public var twoStep: Bool
        /// `handler`: the name under which the host provides an in-process
        /// ``CustomRegistrationAPI``; `nil` when `url` is given.
        public var handler: String?
        /// `url`: the http or https endpoint of an HTTP registration API; `nil` when `handler` is
        /// given.
        public var url: URL?
        /// `maxAttempts`: how many times a retryable refusal may be tried, 1–10. Default 3.
        public var maxAttempts: Int

        private enum CodingKeys: String, CodingKey { case twoStep, handler, url, maxAttempts }

        /// Reads `config`; throws when `maxAttempts` is out of range or `url` is not an http or
        /// https URL.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            twoStep = try container.decode(Bool.self, forKey: .twoStep, default: false)
            handler = try container.decodeIfPresent(String.self, forKey: .handler)
            let urlText = try container.decodeIfPresent(String.self, forKey: .url)
            maxAttempts = try container.decode(Int.self, forKey: .maxAttempts, default: 3, in: 1...10)
            if let urlText {
                // The port too: one the HTTP stack cannot represent must stop the start, not a call.
                guard let url = URL(string: urlText), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
                    url.port.map({ (1...65535).contains($0) }) ?? true
                else {
                    throw container.invalid(.url, "expected an http or https URL, found \"\(urlText)\"")
                }
                self.url = url
            } else {
                url = nil
            }
        }
    }

    /// `"idp.customAPI"`.
    public static let typeIdentifier: PluginTypeIdentifier = "idp.customAPI"
    /// One line for listings.
    public static let summary = "Custom API registration, one or two steps, in-process or over HTTP"

    /// Makes the client half, ``CustomAPIIdentityProvider``.
    public static func makeIdentityProvider(
        configuration: Configuration,
        context: PluginContext
    ) -> any IdentityProvider {
        CustomAPIIdentityProvider(descriptor: context.descriptor)
    }

    /// Makes the server half with the API `handler` or `url` names; throws a
    /// `ConfigurationError` unless exactly one of them is given, or when the host
    /// provides no API named `handler`.
    public static func makeHost(configuration: Configuration, context: PluginContext) throws -> any IdentityProviderHost
    {
        // Checked here, not when decoding: the client half is built without the server's settings.
        guard (configuration.handler == nil) != (configuration.url == nil) else {
            throw ConfigurationError(
                path: [.key("handler")],
                problem: "give exactly one of handler (an in-process API) or url (an HTTP API)"
            )
        }
        let api: any CustomRegistrationAPI
        if let url = configuration.url {
            // Checked as every outbound call's URL is (canonical spelling only), so a URL the
            // server would refuse to call fails at start-up, not at the first registration.
            do {
                _ = try OutboundURL(url.absoluteString)
            } catch {
                throw ConfigurationError(path: [.key("url")], problem: error.reason)
            }
            api = HTTPCustomRegistrationAPI(url: url)
        } else {
            api = try context.services.require(
                CustomRegistrationAPIKey.self,
                named: configuration.handler ?? "",
                forConfigurationKey: "handler"
            )
        }
        return CustomAPIIdentityProviderHost(
            descriptor: context.descriptor,
            twoStep: configuration.twoStep,
            maxAttempts: configuration.maxAttempts,
            api: api
        )
    }
}
