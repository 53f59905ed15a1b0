import Crypto
public import Foundation
public import GatehouseKernel
/// `example.totp`: RFC 6238 one-time passwords; the device makes the secret, the service takes each code once.
public enum TOTPAuthenticatorPlugin: CustomAuthenticatorPlugin {
    /// The configuration is the ``TOTP`` value itself: `digits` and `period`.
    public typealias Configuration = TOTP
    /// `"example.totp"`.
    public static let typeIdentifier: PluginTypeIdentifier = "example.totp"
    /// One line for listings.
    public static let summary = "Time-based one-time passwords (RFC 6238) from a device-made secret"
    /// `digits` and `period`: the device needs both to make its codes.
    public static let publishedConfigurationKeys: Set<String> = ["digits", "period"]  // the device needs both
    /// The device half is the configured ``TOTP``.
    public static func makeDevice(configuration: TOTP, context: PluginContext) -> TOTP { configuration }
    /// The service half is the configured ``TOTP``.
    public static func makeService(configuration: TOTP, context: PluginContext) -> TOTP { configuration }
}

/// Both halves: the device computes codes, the service checks them. Configuration: `digits` (6–8), `period` (s).
public struct TOTP: Decodable, Sendable, CustomAuthenticatorDevice, CustomAuthenticatorService {
    public var digits = 6, period = 30
    /// Reads `config`: `digits` 6–8 (default 6), `period` 10–120 seconds (default 30).
    public init(from decoder: any Decoder) throws {
        let config = try decoder.container(keyedBy: Keys.self)
        digits = try config.decode(Int.self, forKey: .digits, default: 6, in: 6...8)
        period = try config.decode(Int.self, forKey: .period, default: 30, in: 10...120)
    }
    private enum Keys: String, CodingKey { case digits, period }
    /// What both halves keep: the secret and the settings at registration, so a later change applies to new ones only.
    public struct Key: Codable, Sendable, Equatable {
        public var secret: Data, digits: Int, period: Int, lastStep = 0  // the last step accepted (the service's)
        /// Makes a key; `lastStep` starts at 0, no code used yet.
        public init(secret: Data, digits: Int, period: Int) {
            (self.secret, self.digits, self.period) = (secret, digits, period)
        }
        /// Whether a decoded key can make codes (stored data is checked, never trusted to be in range).
        public var isUsable: Bool { secret.count >= 16 && (6...8).contains(digits) && (10...120).contains(period) }
        /// The RFC 6238 (HMAC-SHA1) code for `time`, with RFC 4226's dynamic truncation. Needs `isUsable`.
        public func code(at time: Date) -> String {
            let step = withUnsafeBytes(of: (UInt64(time.timeIntervalSince1970) / UInt64(period)).bigEndian) { Data($0) }
            let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: step, using: SymmetricKey(data: secret)))
            let value = mac[Int(mac[19] & 0x0f)...].prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7fff_ffff
            let code = String(value % [1_000_000, 10_000_000, 100_000_000][digits - 6])
            return String(repeating: "0", count: digits - code.count) + code
        }
    }
    /// Makes a 20-byte secret, keeps it with the settings on the device, and sends both for the service to keep.
    public func registrationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        let secret = Data((0..<20).map { _ in UInt8.random(in: 0...255) })  // the system's CSPRNG
        let key = try JSONEncoder().encode(Key(secret: secret, digits: digits, period: period))
        try await request.storage.setValue(key, forKey: "totp.key")
        return String(decoding: key, as: UTF8.self)  // the service checks the settings are its own
    }
    /// The code for the request's time; throws `AuthenticationError` `authenticatorNotRegistered` when no key is
    /// stored.
    public func authenticationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        guard let stored = try await request.storage.value(forKey: "totp.key") else {
            throw AuthenticationError(.authenticatorNotRegistered)  // nothing to answer with: no attempt spent
        }
        guard let key = try? JSONDecoder().decode(Key.self, from: stored), key.isUsable else { return nil }  // wrong
        return key.code(at: request.now)
    }
    /// Keeps the device's key if it is usable and made with this server's `digits` and `period`; fails it otherwise.
    public func register(_ request: CustomServiceRequest<Key>) async throws -> CustomAuthenticatorResult<Key> {
        guard let key = try? JSONDecoder().decode(Key.self, from: Data((request.payload ?? "").utf8)), key.isUsable,
            key.digits == digits, key.period == period
        else { return .failure(payload: "the key is unusable, or not made with this server's digits and period") }
        return .success(registrationData: Key(secret: key.secret, digits: digits, period: period))
    }
    /// Accepts the previous, current or next step's code, each step at most once.
    public func authenticate(_ request: CustomServiceRequest<Key>) async throws -> CustomAuthenticatorResult<Key> {
        guard var key = request.registrationData, key.isUsable else { return .notRegistered() }
        let now = Int(request.now.timeIntervalSince1970) / key.period
        for step in stride(from: max(now - 1, key.lastStep + 1), through: now + 1, by: 1) {
            let expected = key.code(at: Date(timeIntervalSince1970: Double(step * key.period)))
            if ConstantTime.equals(expected, request.payload ?? "") {
                key.lastStep = step
                return .success(registrationData: key)
            }
        }
        return .retry(payload: "wrong or already used code")
    }
}
