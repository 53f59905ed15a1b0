import Foundation
import GatehouseKernel
public import GatehouseProtocol
import Synchronization

/// An extension that signs users in with their phones (the hosted login): the token server
/// hands it ``PhoneSignIn`` once it is built, since the extension is made before the server.
public protocol PhoneSignInExtension: ServerExtension {
    /// Called once, when the token server mounting the extension is built.
    func mounted(with phoneSignIn: PhoneSignIn)
}

/// The token server's mobile authentication for its own sign-in pages: a push with number
/// matching to a user's enrolled devices, or a QR code (an OTP) that whoever's enrolled phone
/// scans it answers. The transactions belong to the API client `@login`, which no portal can be
/// (API client ids cannot start with `@`), so no portal reads or supersedes them.
public struct PhoneSignIn: Sendable {
    private let server: WeakServer

    init(_ server: TokenServer) { self.server = WeakServer(server) }

    /// The API client the sign-in transactions are started as.
    static let apiClient = "@login"

    /// A started sign-in approval.
    public struct Started: Sendable {
        /// The transaction to ask about with ``verdict(_:)``.
        public var transactionID: String
        /// The number the page shows and the user types on the phone (pushes only: always on).
        public var number: Int?
        /// The code the page shows as a QR code (QR sign-in only).
        public var otp: String?
        /// When the phone can no longer answer, in seconds since 1970.
        public var expiresAt: Double
    }

    /// Where a sign-in approval stands.
    public struct Verdict: Sendable {
        /// Pending, approved, denied or expired.
        public var status: MobileAuthTransactionStatus
        /// Who approved: the identity provider and subject of the device's user (nil until known).
        public var identityProvider: String?
        /// The user's subject at `identityProvider`.
        public var subject: String?
        /// How the user proved it on the phone, as OpenID `amr` values (RFC 8176): `swk` (the
        /// device's key) and, for a PIN, biometric or custom method, `pin` or `face`, and `mfa`.
        public var amr: [String]
    }

    /// Why a sign-in approval was not started.
    public enum Refusal: Error, Sendable, Equatable {
        /// The server has no mobile authentication, or not the type.
        case notConfigured(String)
        /// The user has no enrolled device under any of the identity providers.
        case noEnrolledDevice
        /// A sign-in push for this user is waiting already (push fatigue is bounded to one).
        case alreadyPending(until: Double)
    }

    private func tokenServer() throws(Refusal) -> TokenServer {
        guard let server = server.value else { throw .notConfigured("The token server has stopped.") }
        return server
    }

    /// Pushes a sign-in request with number matching to the devices of `subject`, under the first
    /// of `identityProviders` where the user has an enrolled device.
    public func push(
        to subject: String,
        identityProviders: [String],
        type name: String,
        message: String?
    ) async throws -> Started {
        let server = try tokenServer()
        let type = try server.signInType(name, delivery: .push)
        for provider in identityProviders {
            let user = MobileAuthUser(identityProvider: provider, subject: subject)
            do {
                return try await server.startSignIn(type, user: user, message: message, otp: nil)
            } catch StoreRefusal.noEnrolledDevice {
                continue
            } catch let open as ServerStore.OpenTransactionExists {
                throw Refusal.alreadyPending(until: open.until)
            }
        }
        throw Refusal.noEnrolledDevice
    }

    /// Starts a QR sign-in: an OTP transaction without a user, for whichever enrolled phone scans it.
    public func qrCode(type name: String, message: String?) async throws -> Started {
        let server = try tokenServer()
        let type = try server.signInType(name, delivery: .otp)
        return try await server.startSignIn(
            type,
            user: MobileAuthUser(identityProvider: "", subject: ""),
            message: message,
            otp: MobileAuthOTP.generate(for: Data.random(count: 24).base64URLEncodedString)
        )
    }

    /// Where the sign-in transaction `id` stands; nil when there is no such transaction.
    public func verdict(_ id: String) async throws -> Verdict? {
        let server = try tokenServer()
        guard (16...64).contains(id.utf8.count),
            let result = try await server.store.transactionResult(id, apiClient: Self.apiClient, now: server.now)
        else { return nil }
        return Verdict(
            status: result.status,
            identityProvider: result.identityProvider,
            subject: result.userID,
            amr: result.status == .approved ? server.amr(approvedWith: result.authenticationMethod) : []
        )
    }

    /// Whether `subject` has a device enrolled for mobile authentication under one of
    /// `identityProviders`.
    public func hasEnrolledDevice(_ subject: String, identityProviders: [String]) async throws -> Bool {
        try await tokenServer().store.hasEnrolledDevice(subject, identityProviders: identityProviders)
    }

    /// Seconds a transaction of the type stays open; nil for a type the server does not have.
    public func timeToLive(type name: String) -> Int? {
        server.value?.configuration.mobileAuth?.types.first { $0.name == name }?.timeToLive
    }

    /// Whether the server offers the type with this delivery (for checking a manifest at start-up).
    public func offers(type name: String, delivery: MobileAuthConfiguration.Delivery) -> Bool {
        guard let server = server.value else { return false }
        return (try? server.signInType(name, delivery: delivery)) != nil
    }
}

/// A reference that does not keep the token server alive: the server owns its extensions.
private final class WeakServer: Sendable {
    private let reference: Mutex<Reference>
    private struct Reference { weak var server: TokenServer? }
    init(_ server: TokenServer) { reference = Mutex(Reference(server: server)) }
    var value: TokenServer? { reference.withLock { $0.server } }
}

extension TokenServer {
    fileprivate func signInType(
        _ name: String,
        delivery: MobileAuthConfiguration.Delivery
    ) throws(PhoneSignIn.Refusal) -> MobileAuthConfiguration.TransactionType {
        guard let type = configuration.mobileAuth?.types.first(where: { $0.name == name && $0.delivery == delivery })
        else {
            throw .notConfigured("server.mobileAuth has no \(delivery.rawValue) type \"\(name)\".")
        }
        return type
    }

    fileprivate func startSignIn(
        _ type: MobileAuthConfiguration.TransactionType,
        user: MobileAuthUser,
        message: String?,
        otp: MobileAuthOTP?
    ) async throws -> PhoneSignIn.Started {
        let id = otp?.transactionID ?? Data.random(count: 24).base64URLEncodedString
        // Number matching is always on for a pushed sign-in: a push the user did not ask for
        // cannot be approved by tapping.
        let number = otp == nil || type.numberMatching ? Int.random(in: 10...99) : nil
        let message = String(
            (message ?? type.defaultMessage ?? "Sign in?").prefix(MobileAuthConfiguration.maxMessageLength)
        )
        let started = now
        let deliveries = try await store.startTransaction(
            ServerStore.NewTransaction(
                id: id,
                apiClient: PhoneSignIn.apiClient,
                user: user,
                type: type,
                message: message,
                secureMessage: nil,
                signingData: nil,
                callbackURI: nil,
                number: number,
                otpHash: otp?.hash,
                otpContent: nil,
                // A pushed sign-in waits alone: push fatigue is one request at a time.
                onlyOneOpen: otp == nil,
                now: started
            )
        )
        await push(deliveries) { profileID in
            PushNotification(
                transactionID: id,
                profileID: profileID,
                message: message,
                createdAt: started,
                timeToLive: type.timeToLive
            )
        }
        return PhoneSignIn.Started(
            transactionID: id,
            number: number,
            otp: otp?.text,
            expiresAt: started + Double(type.timeToLive)
        )
    }

    /// The `amr` of an approval made with `method` (the plugin id the transaction recorded).
    fileprivate func amr(approvedWith method: String?) -> [String] {
        guard let method, method != MobileAuthMethod.confirmation.rawValue,
            let authenticator = authenticators.first(where: { $0.descriptor.id == method })
        else { return ["swk"] }
        switch authenticator.kind {
        case .pin: return ["swk", "pin", "mfa"]
        // RFC 8176 has no value for "the phone's biometric, whichever": `face`, as the seed's
        // biometric authenticator is presented.
        case .biometric: return ["swk", "face", "mfa"]
        case .custom: return ["swk", "mfa"]
        }
    }
}
