public import Foundation

// The integrator's API for custom authenticators: two small halves, a device half that produces
// payloads and a service half that checks them with the seed server's statuses. A
// ``CustomAuthenticatorPlugin`` (or the closure adapters) turns them into a full Gatehouse
// authenticator: messages, PIN fallback, attempt counting and `CustomInfo` are the framework's.

/// What a custom authenticator's service half decided: one case for each of the seed server's
/// statuses, each with the payload that reaches the app (as `CustomInfo.data`, on success and on
/// failure) and, on success, the registration data to keep — of the service's own type.
public enum CustomAuthenticatorResult<RegistrationData: Codable & Sendable>: Sendable {
    /// 2000: registered, or authenticated. `registrationData` is kept for the next authentication;
    /// `nil` keeps what is stored.
    case success(payload: String? = nil, registrationData: RegistrationData? = nil)
    /// 4000: a wrong answer; counted, and the user may try again.
    case retry(payload: String? = nil)
    /// 4001: the user already has this authenticator.
    case alreadyRegistered(payload: String? = nil)
    /// 4002: the service does not know the user's registration; it is removed, not counted.
    case notRegistered(payload: String? = nil)
    /// 5000: failed for good; counted, the registration is removed and the PIN takes over.
    case failure(payload: String? = nil)

    /// The seed server's status for this result, as the app sees it in `CustomInfo.status`.
    public var status: Int {
        switch self {
        case .success: CustomAuthenticatorStatus.success
        case .retry: CustomAuthenticatorStatus.retry
        case .alreadyRegistered: CustomAuthenticatorStatus.alreadyRegistered
        case .notRegistered: CustomAuthenticatorStatus.notRegistered
        case .failure: CustomAuthenticatorStatus.failure
        }
    }

    /// What reaches the app as `CustomInfo.data`.
    public var payload: String? {
        switch self {
        case .success(let payload, _), .retry(let payload), .alreadyRegistered(let payload),
            .notRegistered(let payload), .failure(let payload):
            payload
        }
    }
}

extension CustomAuthenticatorResult: Equatable where RegistrationData: Equatable {}

/// The seed server's custom-authenticator status codes, as apps see them in `CustomInfo.status`.
public enum CustomAuthenticatorStatus {
    /// 2000: registered, or authenticated.
    public static let success = 2000
    /// 4000: a wrong answer; counted, and the user may try again.
    public static let retry = 4000
    /// 4001: the user already has this authenticator.
    public static let alreadyRegistered = 4001
    /// 4002: the service does not know the user's registration; it is removed, not counted.
    public static let notRegistered = 4002
    /// 5000: failed for good; counted, the registration is removed and the PIN takes over.
    public static let failure = 5000
}

/// What the device half is given.
public struct CustomDeviceRequest: Sendable {
    /// The profile the authenticator registers or authenticates.
    public var profile: UserProfile
    /// This authenticator's values for the profile on the device, sealed by the SDK.
    public var storage: any KeyValueStore
    /// What the app answered to the challenge (`.data(…)`), if anything.
    public var appData: String?
    /// What the service half sent with its challenge (authentication only).
    public var challengeData: String?
    /// The time of the request, from the SDK's clock, so that a device half computing a time-based
    /// answer can be tested.
    public var now: Date

    /// Makes the request; `appData` and `challengeData` are `nil` when the app or the service sent
    /// none.
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
    /// A secret called "Answer".
    public var answerPrompt: CustomAnswerPrompt { CustomAnswerPrompt(label: "Answer") }
    /// A secret called "Registration data".
    public var registrationPrompt: CustomAnswerPrompt { CustomAnswerPrompt(label: "Registration data") }
    /// Does nothing: the SDK removes the profile's storage itself.
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

    /// Makes a prompt: a secret, typed once, unless said otherwise.
    public init(label: String, isSecret: Bool = true, confirms: Bool = false) {
        self.label = label
        self.isSecret = isSecret
        self.confirms = confirms
    }
}

/// What the service half is given; `RegistrationData` is the service's own type for what it keeps.
public struct CustomServiceRequest<RegistrationData: Codable & Sendable>: Sendable {
    /// The server's identifier of the user.
    public var subject: String
    /// The profile on the device that made the request, as the server knows it.
    public var profile: UserProfile
    /// What the device half sent (`nil` when asking for challenge data).
    public var payload: String?
    /// What the last successful registration or authentication left to keep.
    public var registrationData: RegistrationData?
    /// Authentication: what ``CustomAuthenticatorService/challengeData(_:)`` sent for this very
    /// attempt, so an answer can be bound to it (a nonce, a question).
    public var challengeData: String?
    /// The time of the request, from the server's clock; check time-based answers against it, not
    /// the system clock.
    public var now: Date

    /// Makes the request; `challengeData` is `nil` when the service sent none for this attempt.
    public init(
        subject: String,
        profile: UserProfile,
        payload: String?,
        registrationData: RegistrationData?,
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
///
/// What it keeps per registration is a type of its own (`RegistrationData`, `String` unless it
/// says otherwise), stored as JSON. Keep in it whatever later answers depend on — a secret, the
/// last step accepted, and the settings the registration was made with (TOTP keeps its `digits`
/// and `period`) — so that changing the plugin's configuration applies to new registrations and
/// never turns a registered user's right answers into counted wrong ones.
public protocol CustomAuthenticatorService: Sendable {
    associatedtype RegistrationData: Codable & Sendable = String

    /// Checks a registration payload; `.success(registrationData:)` keeps data for later.
    func register(
        _ request: CustomServiceRequest<RegistrationData>
    ) async throws -> CustomAuthenticatorResult<RegistrationData>
    /// Data the device half needs to answer (a nonce, a question). Default: none.
    func challengeData(_ request: CustomServiceRequest<RegistrationData>) async throws -> String?
    /// Checks an authentication payload against the registration data.
    func authenticate(
        _ request: CustomServiceRequest<RegistrationData>
    ) async throws -> CustomAuthenticatorResult<RegistrationData>
}

extension CustomAuthenticatorService {
    /// None: the device half answers without data from the service.
    public func challengeData(_ request: CustomServiceRequest<RegistrationData>) async throws -> String? { nil }
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
    /// Makes the device half of the authenticator from ``makeDevice(configuration:context:)``.
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

    /// Makes the server half of the authenticator from ``makeService(configuration:context:)``.
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

    /// Calls the `register` closure.
    public func registrationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        try await register(request)
    }
    /// Calls the `authenticate` closure.
    public func authenticationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        try await authenticate(request)
    }
}

/// A service half from closures, for the smallest cases; it keeps its registration data as a string.
public struct ClosureCustomAuthenticatorService: CustomAuthenticatorService {
    /// What the closures are given; the registration data is a string.
    public typealias Request = CustomServiceRequest<String>
    /// What the closures decide; the registration data is a string.
    public typealias Decision = CustomAuthenticatorResult<String>

    private let register: @Sendable (Request) async throws -> Decision
    private let challenge: @Sendable (Request) async throws -> String?
    private let authenticate: @Sendable (Request) async throws -> Decision

    /// Makes the service half; without `challengeData` it sends no challenge data.
    public init(
        register: @escaping @Sendable (Request) async throws -> Decision,
        challengeData: @escaping @Sendable (Request) async throws -> String? = { _ in nil },
        authenticate: @escaping @Sendable (Request) async throws -> Decision
    ) {
        self.register = register
        self.challenge = challengeData
        self.authenticate = authenticate
    }

    /// Calls the `register` closure.
    public func register(_ request: Request) async throws -> Decision { try await register(request) }
    /// Calls the `challengeData` closure.
    public func challengeData(_ request: Request) async throws -> String? { try await challenge(request) }
    /// Calls the `authenticate` closure.
    public func authenticate(_ request: Request) async throws -> Decision { try await authenticate(request) }
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
