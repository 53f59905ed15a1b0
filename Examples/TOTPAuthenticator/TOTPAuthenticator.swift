import Crypto
public import Foundation
public import GatehouseKernel
/// `example.totp`: RFC 6238 one-time passwords; the device makes the secret, the service takes each code once.
public enum TOTPAuthenticatorPlugin: CustomAuthenticatorPlugin {
    public typealias Configuration = TOTP
    public static let typeIdentifier: PluginTypeIdentifier = "example.totp"
    public static let summary = "Time-based one-time passwords (RFC 6238) from a device-made secret"
    public static let publishedConfigurationKeys: Set<String> = ["digits", "period"]  // the device needs both
    public static func makeDevice(configuration: TOTP, context: PluginContext) -> TOTP { configuration }
    public static func makeService(configuration: TOTP, context: PluginContext) -> TOTP { configuration }
}

/// Both halves: the device computes codes, the service checks them. Configuration: `digits` (6–8), `period` (s).
public struct TOTP: Decodable, Sendable, CustomAuthenticatorDevice, CustomAuthenticatorService {
    public var digits = 6, period = 30
    public init(from decoder: any Decoder) throws {
        let config = try decoder.container(keyedBy: Keys.self)
        digits = try config.decode(Int.self, forKey: .digits, default: 6, in: 6...8)
        period = try config.decode(Int.self, forKey: .period, default: 30, in: 10...120)
    }
    private enum Keys: String, CodingKey { case digits, period }
    /// What both halves keep: the secret and the settings at registration, so a later change applies to new ones only.
    public struct Key: Codable, Sendable, Equatable {
        public var secret: Data, digits: Int, period: Int, lastStep = 0  // the last step accepted (the service's)
        public init(secret: Data, digits: Int, period: Int) {
            (self.secret, self.digits, self.period) = (secret, digits, period)
        }
        /// The RFC 6238 (HMAC-SHA1) code for `time`, with RFC 4226's dynamic truncation.
        public func code(at time: Date) -> String {
            let step = withUnsafeBytes(of: (UInt64(time.timeIntervalSince1970) / UInt64(period)).bigEndian) { Data($0) }
            let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: step, using: SymmetricKey(data: secret)))
            let value = mac[Int(mac[19] & 0x0f)...].prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7fff_ffff
            let code = String(value % [1_000_000, 10_000_000, 100_000_000][digits - 6])
            return String(repeating: "0", count: digits - code.count) + code
        }
    }
    public func registrationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        let secret = Data((0..<20).map { _ in UInt8.random(in: 0...255) })  // the system's CSPRNG
        let key = Key(secret: secret, digits: digits, period: period)
        try await request.storage.setValue(JSONEncoder().encode(key), forKey: "totp.key")
        return secret.base64EncodedString()
    }
    public func authenticationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        let stored = try await request.storage.value(forKey: "totp.key")  // unreadable: no code, a wrong answer
        return stored.flatMap { try? JSONDecoder().decode(Key.self, from: $0) }?.code(at: request.now)
    }
    public func register(_ request: CustomServiceRequest<Key>) async throws -> CustomAuthenticatorResult<Key> {
        guard let secret = request.payload.flatMap({ Data(base64Encoded: $0) }), secret.count >= 16 else {
            return .failure(payload: "the secret is missing or too short")
        }
        return .success(registrationData: Key(secret: secret, digits: digits, period: period))
    }
    /// Accepts the previous, current or next step's code, each step at most once.
    public func authenticate(_ request: CustomServiceRequest<Key>) async throws -> CustomAuthenticatorResult<Key> {
        guard var key = request.registrationData else { return .notRegistered() }
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
