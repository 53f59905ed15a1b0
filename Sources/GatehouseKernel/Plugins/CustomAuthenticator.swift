public import Foundation

// The integrator's API for custom authenticators: two small halves, a device half that produces
// payloads and a service half that checks them with the seed server's statuses. A
// ``CustomAuthenticatorPlugin`` (or the closure adapters) turns them into a full Gatehouse
// authenticator: messages, PIN fallback, attempt counting and `CustomInfo` are the framework's.

/// What a custom authenticator's service half answers: the seed server's status, a payload for
/// the app (`CustomInfo.data`) and the registration data to keep.
public struct CustomAuthenticatorResult: Sendable, Equatable {
    public var status: Int
    /// Reaches the app as `CustomInfo.data`, on success and on failure.
    public var responsePayload: String?
    /// Kept by the server for later authentications; `nil` keeps what is stored.
    public var registrationData: String?

    public init(status: Int, responsePayload: String? = nil, registrationData: String? = nil) {
        self.status = status
        self.responsePayload = responsePayload
        self.registrationData = registrationData
    }

    /// 2000: registered, or authenticated.
    public static func success(payload: String? = nil, registrationData: String? = nil) -> Self {
        Self(status: CustomAuthenticatorStatus.success, responsePayload: payload, registrationData: registrationData)
    }
    /// 4000: a wrong answer; counted, and the user may try again.
    public static func retry(payload: String? = nil) -> Self {
        Self(status: CustomAuthenticatorStatus.retry, responsePayload: payload)
    }
    /// 4001: the user already has this authenticator.
    public static func alreadyRegistered(payload: String? = nil) -> Self {
        Self(status: CustomAuthenticatorStatus.alreadyRegistered, responsePayload: payload)
    }
    /// 4002: the service does not know the user's registration; it is removed.
    public static func notRegistered(payload: String? = nil) -> Self {
        Self(status: CustomAuthenticatorStatus.notRegistered, responsePayload: payload)
    }
    /// 5000: failed for good; counted, the registration is removed and the PIN takes over.
    public static func failure(payload: String? = nil) -> Self {
        Self(status: CustomAuthenticatorStatus.failure, responsePayload: payload)
    }
}

/// The seed server's custom-authenticator status codes.
public enum CustomAuthenticatorStatus {
    public static let success = 2000
    public static let retry = 4000
    public static let alreadyRegistered = 4001
    public static let notRegistered = 4002
    public static let failure = 5000
}

/// What the device half is given.
public struct CustomDeviceRequest: Sendable {
    public var profile: UserProfile
    /// This authenticator's values for the profile on the device, sealed by the SDK.
    public var storage: any KeyValueStore
    /// What the app answered to the challenge (`.data(…)`), if anything.
    public var appData: String?
    /// What the service half sent with its challenge (authentication only).
    public var challengeData: String?
    public var now: Date

    public init(
        profile: UserProfile,
        storage: any KeyValueStore,
        appData: String? = nil,
        challengeData: String? = nil,
        now: Date
    ) {
        self.profile = profile
        self.storage = storage
        self.appData = appData
        self.challengeData = challengeData
        self.now = now
    }
}

/// The device half of a custom authenticator.
public protocol CustomAuthenticatorDevice: Sendable {
    /// How the app asks the user for the answer to a challenge (the app's `.data`). Default: a
    /// secret called "Answer": never shown as typed, never logged.
    var answerPrompt: CustomAnswerPrompt { get }
    /// How the app asks for registration data, if the user gives any. Default: a secret called
    /// "Registration data".
    var registrationPrompt: CustomAnswerPrompt { get }
    /// The payload that registers the authenticator (after the PIN).
    func registrationPayload(_ request: CustomDeviceRequest) async throws -> String?
    /// The payload that answers the service's challenge.
    func authenticationPayload(_ request: CustomDeviceRequest) async throws -> String?
    /// Cleans up outside the profile's storage when the authenticator is deregistered. Default: nothing.
    func deregister(_ request: CustomDeviceRequest) async throws
}

extension CustomAuthenticatorDevice {
    public var answerPrompt: CustomAnswerPrompt { CustomAnswerPrompt(label: "Answer") }
    public var registrationPrompt: CustomAnswerPrompt { CustomAnswerPrompt(label: "Registration data") }
    public func deregister(_ request: CustomDeviceRequest) async throws {}
}

/// How an app asks the user for what a custom authenticator needs: what to call it, whether it
/// is a secret, and whether to have it typed twice.
public struct CustomAnswerPrompt: Sendable, Hashable {
    /// What the user is asked for ("Code from your authenticator app").
    public var label: String
    /// Never shown as typed, never echoed back, never logged (a code, a password). Secret unless
    /// a plugin says otherwise: an answer shown by mistake cannot be taken back.
    public var isSecret: Bool
    /// Typed twice and compared before it is sent (a new secret the user cannot see).
    public var confirms: Bool

    public init(label: String, isSecret: Bool = true, confirms: Bool = false) {
        self.label = label
        self.isSecret = isSecret
        self.confirms = confirms
    }
}

/// What the service half is given.
public struct CustomServiceRequest: Sendable {
    /// The server's identifier of the user.
    public var subject: String
    public var profile: UserProfile
    /// What the device half sent (`nil` when asking for challenge data).
    public var payload: String?
    /// What the last successful registration or authentication left to keep.
    public var registrationData: String?
    /// Authentication: what ``CustomAuthenticatorService/challengeData(_:)`` sent for this very
    /// attempt, so an answer can be bound to it (a nonce, a question).
    public var challengeData: String?
    public var now: Date

    public init(
        subject: String,
        profile: UserProfile,
        payload: String?,
        registrationData: String?,
        challengeData: String? = nil,
        now: Date
    ) {
        self.subject = subject
        self.profile = profile
        self.payload = payload
        self.registrationData = registrationData
        self.challengeData = challengeData
        self.now = now
    }
}

/// The service half of a custom authenticator, on the token server.
public protocol CustomAuthenticatorService: Sendable {
    /// Checks a registration payload; `.success(registrationData:)` keeps data for later.
    func register(_ request: CustomServiceRequest) async throws -> CustomAuthenticatorResult
    /// Data the device half needs to answer (a nonce, a question). Default: none.
    func challengeData(_ request: CustomServiceRequest) async throws -> String?
    /// Checks an authentication payload against the registration data.
    func authenticate(_ request: CustomServiceRequest) async throws -> CustomAuthenticatorResult
}

extension CustomAuthenticatorService {
    public func challengeData(_ request: CustomServiceRequest) async throws -> String? { nil }
}

/// An authenticator plugin made of a ``CustomAuthenticatorDevice`` and a
/// ``CustomAuthenticatorService``: implement the two factories, the framework makes the halves.
public protocol CustomAuthenticatorPlugin: AuthenticatorPlugin {
    associatedtype Device: CustomAuthenticatorDevice
    associatedtype Service: CustomAuthenticatorService

    static func makeDevice(configuration: Configuration, context: PluginContext) throws -> Device
    static func makeService(configuration: Configuration, context: PluginContext) throws -> Service
}

extension CustomAuthenticatorPlugin {
    public static func makeAuthenticator(
        configuration: Configuration,
        context: PluginContext
    ) throws
        -> any Authenticator
    {
        CustomAuthenticatorClient(
            descriptor: context.descriptor,
            device: try makeDevice(configuration: configuration, context: context),
            clock: context.clock
        )
    }

    public static func makeVerifier(
        configuration: Configuration,
        context: PluginContext
    ) throws
        -> any AuthenticatorVerifier
    {
        CustomAuthenticatorVerifier(
            descriptor: context.descriptor,
            service: try makeService(configuration: configuration, context: context)
        )
    }
}

/// A device half from closures, for the smallest cases.
public struct ClosureCustomAuthenticatorDevice: CustomAuthenticatorDevice {
    private let register: @Sendable (CustomDeviceRequest) async throws -> String?
    private let authenticate: @Sendable (CustomDeviceRequest) async throws -> String?

    /// By default the device sends what the app answered.
    public init(
        register: @escaping @Sendable (CustomDeviceRequest) async throws -> String? = { $0.appData },
        authenticate: @escaping @Sendable (CustomDeviceRequest) async throws -> String? = { $0.appData }
    ) {
        self.register = register
        self.authenticate = authenticate
    }

    public func registrationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        try await register(request)
    }
    public func authenticationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        try await authenticate(request)
    }
}

/// A service half from closures, for the smallest cases.
public struct ClosureCustomAuthenticatorService: CustomAuthenticatorService {
    private let register: @Sendable (CustomServiceRequest) async throws -> CustomAuthenticatorResult
    private let challenge: @Sendable (CustomServiceRequest) async throws -> String?
    private let authenticate: @Sendable (CustomServiceRequest) async throws -> CustomAuthenticatorResult

    public init(
        register: @escaping @Sendable (CustomServiceRequest) async throws -> CustomAuthenticatorResult,
        challengeData: @escaping @Sendable (CustomServiceRequest) async throws -> String? = { _ in nil },
        authenticate: @escaping @Sendable (CustomServiceRequest) async throws -> CustomAuthenticatorResult
    ) {
        self.register = register
        self.challenge = challengeData
        self.authenticate = authenticate
    }

    public func register(_ request: CustomServiceRequest) async throws -> CustomAuthenticatorResult {
        try await register(request)
    }
    public func challengeData(_ request: CustomServiceRequest) async throws -> String? { try await challenge(request) }
    public func authenticate(_ request: CustomServiceRequest) async throws -> CustomAuthenticatorResult {
        try await authenticate(request)
    }
}

extension PluginRegistry {
    /// Registers a custom authenticator made of two instances (closure adapters, say) under
    /// `type`, with no configuration of its own.
    public mutating func registerCustomAuthenticator(
        _ type: PluginTypeIdentifier,
        summary: String,
        device: some CustomAuthenticatorDevice,
        service: some CustomAuthenticatorService
    ) throws(PluginRegistryError) {
        try register(
            type: type,
            kind: .custom,
            summary: summary,
            makeAuthenticator: { context in
                CustomAuthenticatorClient(descriptor: context.descriptor, device: device, clock: context.clock)
            },
            makeVerifier: { context in CustomAuthenticatorVerifier(descriptor: context.descriptor, service: service) }
        )
    }
}
