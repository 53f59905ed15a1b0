import Crypto
import Foundation
import GatehouseKernel
import GatehouseOutbound
import GatehouseProtocol
import GatehouseQRCode
import Logging
import Synchronization

// The portal API of mobile authentication: an API client (HTTP Basic) starts a transaction for a
// user, the server seals it to each enrolled device and pushes, and the portal reads the verdict.

extension TokenServer {
    private func apiClient(
        _ request: WireRequest,
        _ mobileAuth: MobileAuthConfiguration
    ) async throws -> MobileAuthConfiguration.APIClient {
        let index = try await basicCredential(
            request,
            among: portalCredentials,
            formEncoded: false,
            refusal: ServerError(
                401,
                "invalid_client",
                "Authenticate the API client with HTTP Basic credentials (Authorization: Basic base64(id:secret))."
            )
        )
        return mobileAuth.apiClients[index]
    }

    func startPortalMobileAuth(_ request: WireRequest) async throws -> WireResponse {
        let mobileAuth = try mobileAuthConfiguration()
        let client = try await apiClient(request, mobileAuth)
        let body = try decodeBody(PortalMobileAuthRequest.self, request)
        guard body.type.utf8.count <= 64, let type = mobileAuth.types.first(where: { $0.name == body.type }) else {
            throw ServerError(
                404,
                "invalid_request",
                "There is no mobile authentication type \"\(body.type.prefix(64))\".",
                code: 3005
            )
        }
        if let user = body.userID {
            guard (1...256).contains(user.utf8.count) else {
                throw ServerError.invalidRequest("Invalid field user_id: 1 to 256 bytes.")
            }
        } else if type.delivery == .push {
            throw ServerError.invalidRequest(
                "Missing field user_id: the type \"\(type.name)\" pushes to the user's devices."
            )
        }
        if body.qrCode != nil, type.delivery == .push {
            throw ServerError.invalidRequest("Invalid field qr_code: the type \"\(type.name)\" pushes; it has no code.")
        }
        let provider = body.identityProvider ?? defaultIdentityProvider.descriptor.id
        guard identityProviders.contains(where: { $0.descriptor.id == provider }) else {
            throw ServerError(404, "invalid_request", "There is no identity provider \"\(provider)\".", code: 1001)
        }
        guard let message = body.message ?? type.defaultMessage, !message.isEmpty else {
            throw ServerError(
                400,
                "invalid_request",
                "Send a message: the type \"\(type.name)\" has no default.",
                code: 1003
            )
        }
        // Characters as people count them; and bytes, so a push stays within APNs' and FCM's 4 KB.
        guard message.count <= MobileAuthConfiguration.maxMessageLength, message.utf8.count <= 620 else {
            throw ServerError(
                400,
                "invalid_request",
                "The message has \(message.count) characters in \(message.utf8.count) bytes; a push shows at most "
                    + "\(MobileAuthConfiguration.maxMessageLength) characters, in at most 620 bytes.",
                code: 1005
            )
        }
        if let secure = body.secureMessage, secure.utf8.count > configuration.maxRequestBytes / 2 {
            throw ServerError.invalidRequest("Invalid field secure_message: too long.")
        }
        if type.transactionSigning, (body.signingData ?? "").isEmpty {
            throw ServerError(
                400,
                "invalid_request",
                "The type \"\(type.name)\" signs transactions: send signing_data.",
                code: 1003
            )
        }
        if let uri = body.callbackURI {
            // Checked whole (every component, the port within 1–65535) and stored as it came: the
            // text kept is the text the callback goes to.
            do {
                _ = try client.callbackTarget(uri)
            } catch {
                throw ServerError.invalidRequest("Invalid field callback_uri: \(error.reason).")
            }
        }
        let id = Data.random(count: 24).base64URLEncodedString
        let number = type.numberMatching ? Int.random(in: 10...99) : nil
        let otp = type.delivery == .otp ? MobileAuthOTP.generate(for: id) : nil
        var otpContent: Data?
        if let otp, body.secureMessage != nil || body.signingData != nil {
            otpContent = try OTPContent(
                secureMessage: body.secureMessage,
                signingData: type.transactionSigning ? body.signingData : nil
            ).sealed(code: otp.code, transactionID: id)
        }
        // One moment for the stored transaction and its pushes, so both state the same expiry.
        let started = now
        let deliveries = try await store.startTransaction(
            ServerStore.NewTransaction(
                id: id,
                apiClient: client.id,
                // No user yet: the device that claims the OTP names them.
                user: MobileAuthUser(
                    identityProvider: body.userID == nil ? "" : provider,
                    subject: body.userID ?? ""
                ),
                type: type,
                message: message,
                secureMessage: body.secureMessage,
                signingData: type.transactionSigning ? body.signingData : nil,
                callbackURI: body.callbackURI,
                number: number,
                otpHash: otp?.hash,
                otpContent: otpContent,
                now: started
            )
        )
        let notification = { (profileID: String) in
            PushNotification(
                transactionID: id,
                profileID: profileID,
                message: message,
                createdAt: started,
                timeToLive: type.timeToLive
            )
        }
        await push(deliveries, notification)
        callbacks?.wake()
        return try json(
            PortalMobileAuthResponse(
                transactionID: id,
                authMethod: type.method,
                timeToLive: type.timeToLive * 1000,
                number: number,
                devices: deliveries.count,
                otp: otp?.text,
                qrCode: try otp.flatMap { try Self.qrCodeImage($0.text, body.qrCode ?? .svg) }
            ),
            status: 201
        )
    }

    /// The code as a `data:` URI of the format asked for; nil for `none`.
    static func qrCodeImage(_ text: String, _ format: PortalQRCodeFormat) throws -> String? {
        let code = try QRCode(text: text, errorCorrection: .medium)
        switch format {
        case .svg:
            return "data:image/svg+xml;base64,"
                + Data(code.svg(title: "Scan with your phone").utf8).base64EncodedString()
        case .png:
            return "data:image/png;base64," + Data(code.png()).base64EncodedString()
        case .none:
            return nil
        }
    }

    /// Sends each device its push (its events channel, on whichever instance holds it, was woken
    /// when the transaction committed), all at once, waiting for each first try at most
    /// `pushTimeout`: a stalled push service delays the portal's answer by that much at worst.
    /// Tries go on in the background (``PushDispatcher``): a temporary refusal is tried again, a
    /// dead token disenrols its device, anything else is logged. The device still finds the
    /// request on its events channel or in its pending list.
    func push(_ deliveries: [ServerStore.Delivery], _ notification: (String) -> PushNotification) async {
        await withTaskGroup(of: Void.self) { group in
            for delivery in deliveries {
                guard let token = delivery.pushToken, let platform = delivery.platform, platform != .events else {
                    continue
                }
                let push = PushDispatcher.Push(
                    notification: notification(delivery.profileID),
                    token: token,
                    platform: platform
                )
                group.addTask { [pushDispatcher] in await pushDispatcher.send(push, waitingAtMost: Self.pushTimeout) }
            }
        }
    }

    /// How long the portal's request waits for a push service.
    static let pushTimeout = Duration.seconds(2)

    func portalTransaction(_ id: String, _ request: WireRequest) async throws -> WireResponse {
        let client = try await apiClient(request, try mobileAuthConfiguration())
        guard (16...64).contains(id.utf8.count), Data(base64URLEncoded: id) != nil,
            let result = try await store.transactionResult(id, apiClient: client.id, now: now)
        else {
            throw ServerError(404, "not_found", "There is no such transaction for this API client.", code: 3004)
        }
        return try json(result)
    }
}
