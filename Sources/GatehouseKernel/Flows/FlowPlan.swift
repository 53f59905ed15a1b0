/// What a flow is for. Closed: the token server runs exactly these.
public enum FlowKind: String, Sendable, Codable, CaseIterable {
    /// An identity provider names the user, then the required authenticators are enrolled; ends
    /// with a new (or renewed) profile and a session.
    case registration
    /// One authenticator proves the user is present; ends with a session.
    case authentication
    /// The current PIN, then a new one.
    case changePin
    /// The PIN, then the enrolment of another authenticator.
    case authenticatorRegistration
    /// One authenticator approves a mobile authentication transaction; ends with the
    /// transaction approved, not with a session.
    case mobileAuthentication
}

/// One step of a flow: which plugin acts, and how. Plugins are named by their manifest id.
public enum FlowStage: Sendable, Hashable, Codable, CustomStringConvertible {
    /// An identity provider establishes who the user is.
    case identity(String)
    /// An authenticator is set up for the profile.
    case enrol(String)
    /// An authenticator proves the profile's user is present.
    case authenticate(String)

    /// The manifest id of the plugin that handles the stage.
    public var plugin: String {
        switch self {
        case .identity(let id), .enrol(let id), .authenticate(let id): id
        }
    }

    /// `identity`, `enrol` or `authenticate`.
    public var step: String {
        switch self {
        case .identity: "identity"
        case .enrol: "enrol"
        case .authenticate: "authenticate"
        }
    }

    /// The step and the plugin, e.g. `authenticate(pin)`, for logs and test failures.
    public var description: String { "\(step)(\(plugin))" }

    private enum CodingKeys: String, CodingKey { case step, plugin }

    /// Reads a stage stored as `{"step": "enrol", "plugin": "pin"}`; throws on an unknown step.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let plugin = try container.decode(String.self, forKey: .plugin)
        switch try container.decode(String.self, forKey: .step) {
        case "identity": self = .identity(plugin)
        case "enrol": self = .enrol(plugin)
        case "authenticate": self = .authenticate(plugin)
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .step,
                in: container,
                debugDescription: "unknown step \"\(other)\"; expected identity, enrol or authenticate"
            )
        }
    }

    /// Stores the stage as `{"step": "enrol", "plugin": "pin"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(step, forKey: .step)
        try container.encode(plugin, forKey: .plugin)
    }
}

/// The stages of one flow, decided when it starts (from the manifest, never from a type name),
/// and the authenticator an authentication may fall back to.
public struct FlowPlan: Sendable, Codable, Equatable {
    /// What the flow is for, which decides whether it ends in a session.
    public var kind: FlowKind
    /// The stages in the order they run, each naming its plugin by manifest id.
    public var stages: [FlowStage]
    /// The authenticator an `authenticate` stage may switch to (the PIN), if any.
    public var fallback: String?

    /// Makes a plan; the named constructors (``registration(identityProvider:enrol:)`` and the
    /// others) are the ones the token server uses.
    public init(kind: FlowKind, stages: [FlowStage], fallback: String? = nil) {
        self.kind = kind
        self.stages = stages
        self.fallback = fallback
    }

    /// Whether the flow ends in a session (new tokens).
    public var issuesTokens: Bool { kind == .registration || kind == .authentication }

    /// Identify the user, then enrol each required authenticator in order.
    public static func registration(identityProvider: String, enrol authenticators: [String]) -> FlowPlan {
        FlowPlan(kind: .registration, stages: [.identity(identityProvider)] + authenticators.map { .enrol($0) })
    }

    /// Authenticate with `authenticator`; `fallback` (the PIN) may take over.
    public static func authentication(with authenticator: String, fallback: String?) -> FlowPlan {
        FlowPlan(
            kind: .authentication,
            stages: [.authenticate(authenticator)],
            fallback: authenticator == fallback ? nil : fallback
        )
    }

    /// The current PIN, then a new one.
    public static func changePin(_ pin: String) -> FlowPlan {
        FlowPlan(kind: .changePin, stages: [.authenticate(pin), .enrol(pin)])
    }

    /// Approve a mobile authentication transaction with `authenticator`; `fallback` (the PIN)
    /// may take over.
    public static func mobileAuthentication(with authenticator: String, fallback: String?) -> FlowPlan {
        FlowPlan(
            kind: .mobileAuthentication,
            stages: [.authenticate(authenticator)],
            fallback: authenticator == fallback ? nil : fallback
        )
    }

    /// The PIN, then enrol `authenticator`.
    public static func authenticatorRegistration(_ authenticator: String, pin: String) -> FlowPlan {
        FlowPlan(kind: .authenticatorRegistration, stages: [.authenticate(pin), .enrol(authenticator)])
    }
}

/// The one per-profile failure counter, shared by every authenticator type, as read in the
/// transaction that applies the machine's actions.
public struct AttemptCounter: Sendable, Hashable {
    /// Failures counted since the last success (a released PIN evaluation counts as one).
    public var failures: Int
    /// Attempts other requests hold right now, while a plugin looks at their message.
    public var held: Int
    /// Failures allowed before the profile is deregistered; 0 means unlimited.
    public var maximum: Int

    /// Makes a counter; `held` is 0 unless other requests hold attempts.
    public init(failures: Int, held: Int = 0, maximum: Int) {
        self.failures = failures
        self.held = held
        self.maximum = maximum
    }

    /// No further attempt may be made: the profile must be deregistered.
    public var isExhausted: Bool { maximum > 0 && failures >= maximum }

    /// Every attempt left is held by a request in progress: a new one must wait.
    public var isBusy: Bool { maximum > 0 && failures + held >= maximum }

    /// The counts a challenge shows the user: the maximum, the failures so far and what is left.
    public var failureCounts: FailureCounts { FailureCounts(maximum: maximum, previous: failures) }
}
