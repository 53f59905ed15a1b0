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
    /// The RFC 6238 (HMAC-SHA1) code for `time`, with RFC 4226's dynamic truncation.
    public func code(secret: Data, time: Date) -> String {
        let step = withUnsafeBytes(of: (UInt64(time.timeIntervalSince1970) / UInt64(period)).bigEndian) { Data($0) }
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: step, using: SymmetricKey(data: secret)))
        let value = mac[Int(mac[19] & 0x0f)...].prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7fff_ffff
        let code = String(value % [1_000_000, 10_000_000, 100_000_000][digits - 6])
        return String(repeating: "0", count: digits - code.count) + code
    }
    public func registrationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        let secret = Data((0..<20).map { _ in UInt8.random(in: 0...255) })  // the system's CSPRNG
        try await request.storage.setValue(secret, forKey: "totp.secret")
        return secret.base64EncodedString()
    }
    public func authenticationPayload(_ request: CustomDeviceRequest) async throws -> String? {
        try await request.storage.value(forKey: "totp.secret").map { code(secret: $0, time: request.now) }
    }
    public func register(_ request: CustomServiceRequest) async throws -> CustomAuthenticatorResult {
        guard let secret = request.payload.flatMap({ Data(base64Encoded: $0) }), secret.count >= 16 else {
            return .failure(payload: "the secret is missing or too short")
        }
        return .success(registrationData: "\(secret.base64EncodedString()) 0")
    }
    /// Accepts the previous, current or next step's code, each step at most once.
    public func authenticate(_ request: CustomServiceRequest) async throws -> CustomAuthenticatorResult {
        let stored = (request.registrationData ?? "").split(separator: " ").map(String.init)
        guard stored.count == 2, let secret = Data(base64Encoded: stored[0]), let used = Int(stored[1]) else {
            return .notRegistered()
        }
        let now = Int(request.now.timeIntervalSince1970) / period
        for step in stride(from: max(now - 1, used + 1), through: now + 1, by: 1) {
            let expected = code(secret: secret, time: Date(timeIntervalSince1970: Double(step * period)))
            if ConstantTime.equals(expected, request.payload ?? "") {
                return .success(registrationData: "\(stored[0]) \(step)")
            }
        }
        return .retry(payload: "wrong or already used code")
    }
}
