/// What one simulated scan answers.
public enum SensorResult: String, Sendable, Codable, CaseIterable {
    /// The finger or face matched: the OS releases the authenticator's key.
    case match
    /// It did not match; the user may try again.
    case noMatch
    /// Too many failed scans: the OS locks the sensor (and this authenticator falls back to the PIN).
    case lockout
    /// No sensor, or no biometrics enrolled in the OS.
    case unavailable

    /// Decodes a manifest's word, refusing an unknown one with the words it accepts.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let word = try container.decode(String.self)
        guard let result = Self(rawValue: word) else {
            let known = Self.allCases.map(\.rawValue).joined(separator: ", ")
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "expected one of: \(known); found \"\(word)\""
            )
        }
        self = result
    }
}

/// A biometric sensor and the OS key store behind it, simulated: scripted from the manifest or at
/// run time, with an optional latency. It stands in for LocalAuthentication and the Secure
/// Enclave (or Android's BiometricPrompt and Keystore) so every biometric flow can run on Linux.
///
/// Keys are tied to the biometrics enrolled in the OS: ``changeEnrolledBiometrics()`` (a finger
/// added, a face reset) bumps ``enrollmentGeneration`` and invalidates every key made before, as
/// iOS does for keys created with `.biometryCurrentSet`.
public actor SimulatedBiometricSensor {
    private var script: [SensorResult]
    private var fallback: SensorResult
    private let latency: Duration
    /// The prompts the sensor was shown, in order.
    public private(set) var prompts: [String] = []
    /// Bumped whenever the OS's enrolled biometrics change.
    public private(set) var enrollmentGeneration = 0
    /// After a `lockout`, every scan answers `lockout` until ``resetLockout()``.
    public private(set) var isLockedOut = false

    /// A sensor answering `script` in order, then `default`, each after `latency`.
    public init(script: [SensorResult] = [], default fallback: SensorResult = .match, latency: Duration = .zero) {
        self.script = script
        self.fallback = fallback
        self.latency = latency
    }

    /// Answers to give next, in order.
    public func enqueue(_ results: SensorResult...) { script += results }

    /// What the sensor answers once the script is used up.
    public func setDefault(_ result: SensorResult) { fallback = result }

    /// The OS's enrolled biometrics changed: keys made before no longer open.
    public func changeEnrolledBiometrics() { enrollmentGeneration += 1 }

    /// The user unlocked the sensor (with the device passcode, say).
    public func resetLockout() { isLockedOut = false }

    /// Scans with `prompt` shown to the user.
    public func scan(prompt: String) async -> SensorResult {
        prompts.append(prompt)
        if latency > .zero { try? await Task.sleep(for: latency) }
        if isLockedOut { return .lockout }
        let result = script.isEmpty ? fallback : script.removeFirst()
        if result == .lockout { isLockedOut = true }
        return result
    }
}
