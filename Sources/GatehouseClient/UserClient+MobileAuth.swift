import Crypto
import Foundation
public import GatehouseKernel
public import GatehouseProtocol

// Mobile authentication with push, the device's side: enrolments, reading pushes, the pending
// list, the events channel, and answering a request with the method its type asks for.

/// How handling a mobile authentication request ended.
public enum MobileAuthHandlingResult: Sendable {
    /// The user approved it and the server accepted the answer; `info`: what a custom
    /// authenticator reported.
    case approved(info: CustomInfo?)
    /// The user denied it and the server recorded the denial.
    case denied
    /// It could not be handled (the delegate's `didFail` got the same error).
    case failed(any Error)
}

extension UserClient {
    // MARK: - Enrolment

    /// Enrols the authenticated user's profile for mobile authentication: this device's HPKE key
    /// for the profile goes to the server, whose key for the answers comes back.
    public func enrollForMobileAuth() async throws {
        guard let current = session else { throw MobileAuthEnrollmentError(.userNotAuthenticated) }
        guard !current.stateless else { throw MobileAuthEnrollmentError(.statelessUser) }
        let key = Curve25519.KeyAgreement.PrivateKey()
        let response: MobileAuthEnrolmentResponse = try await authorized { token, signingKey in
            try await self.calls.call(
                "POST",
                Endpoint.mobileAuthEnrolment,
                body: MobileAuthEnrolmentRequest(publicKey: key.publicKey.rawRepresentation),
                key: signingKey,
                accessToken: token,
                errors: .mobileAuthEnrollment
            )
        }
        guard let serverKey = Curve25519.KeyAgreement.PublicKey(wire: response.serverPublicKey) else {
            throw GenericError(.requestInvalid, message: "The server's mobile-auth key is malformed.")
        }
        try store.saveMobileAuthEnrolment(profile: current.profile.id, key: key, serverKey: serverKey)
    }

    /// Whether `profile` is enrolled for mobile authentication on this device.
    public func isUserEnrolledForMobileAuth(_ profile: UserProfile) throws -> Bool {
        try store.mobileAuthEnrolment(profile: profile.id) != nil
    }

    /// Enrols the authenticated user for push with the token the push service gave the app. Needs
    /// ``enrollForMobileAuth()`` first. Calling it again with a new token refreshes the token.
    public func enrollForPushMobileAuth(deviceToken: String, platform: PushPlatform = .apns) async throws {
        try await sendPushToken(deviceToken, platform: platform, to: Endpoint.pushEnrolment)
    }

    /// Replaces the push token (the push service issued a new one, e.g. FCM's `onNewToken`). The
    /// profile must be enrolled for push.
    public func refreshPushToken(_ deviceToken: String, platform: PushPlatform = .apns) async throws {
        try await sendPushToken(deviceToken, platform: platform, to: Endpoint.pushToken)
    }

    private func sendPushToken(_ deviceToken: String, platform: PushPlatform, to endpoint: String) async throws {
        guard let current = session else { throw MobileAuthEnrollmentError(.userNotAuthenticated) }
        guard try store.mobileAuthEnrolment(profile: current.profile.id) != nil else {
            throw MobileAuthEnrollmentError(.notEnrolled)
        }
        let _: MobileAuthEnrolmentStatus = try await authorized { token, key in
            try await self.calls.call(
                "POST",
                endpoint,
                body: PushEnrolmentRequest(pushToken: deviceToken, platform: platform),
                key: key,
                accessToken: token,
                errors: .mobileAuthEnrollment
            )
        }
        try store.savePushToken(deviceToken, platform: platform.rawValue, profile: current.profile.id)
    }

    /// Whether `profile` is enrolled for push on this device.
    public func isUserEnrolledForPushMobileAuth(_ profile: UserProfile) throws -> Bool {
        try store.mobileAuthEnrolment(profile: profile.id)?.pushToken != nil
    }

    // MARK: - Receiving requests

    /// The request a push announces, or nil when the push is not Gatehouse's or names a profile
    /// this device does not have.
    public nonisolated func pendingMobileAuthRequest(fromUserInfo userInfo: [String: Any]) -> PendingMobileAuthRequest?
    {
        guard let push = PushNotification(userInfo: userInfo),
            (try? store.profile(push.profileID, server: server)) != nil
        else { return nil }
        return PendingMobileAuthRequest(push, userInfo: ConfigValue.pushPayload(userInfo))
    }

    /// Every pending request of every enrolled profile on this device, newest first: the fallback
    /// when pushes are lost.
    public func pendingPushMobileAuthRequests() async throws -> [PendingMobileAuthRequest] {
        var all: [PendingMobileAuthRequest] = []
        for profile in try store.profiles(server: server)
        where try store.mobileAuthEnrolment(profile: profile.id) != nil {
            guard let stored = try store.profile(profile.id, server: server) else { continue }
            let list: PendingMobileAuthList = try await deregisteringOnRefusal(profile) {
                try await self.calls.call(
                    "GET",
                    Endpoint.mobileAuthPending + "?profile=" + profile.id,
                    key: stored.key,
                    errors: .mobileAuthRequest
                )
            }
            all += list.requests.map {
                PendingMobileAuthRequest(
                    transactionID: $0.transactionID,
                    profile: profile,
                    date: Date(timeIntervalSince1970: $0.createdAt),
                    timeToLive: $0.timeToLive,
                    message: $0.message
                )
            }
        }
        return all.sorted { $0.date > $1.date }
    }

    /// The requests for `profile` as the server announces them on its events channel: first the
    /// pending ones, then each new one as it is started. The channel reconnects by itself (with
    /// the last event's id, so nothing is missed or repeated) until the stream is dropped.
    public nonisolated func mobileAuthRequests(
        for profile: UserProfile,
        reconnectDelay: Duration = .seconds(1)
    ) -> AsyncThrowingStream<PendingMobileAuthRequest, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var lastEventID: String?
                var parser = ServerSentEventParser()
                // Doubles after each failed connection, up to a minute; a connection that
                // delivered an event starts it again from `reconnectDelay`.
                var delay = reconnectDelay
                while !Task.isCancelled {
                    do {
                        guard let stored = try store.profile(profile.id, server: server) else {
                            throw GenericError(.userDeregistered)
                        }
                        var request = try calls.request(
                            "GET",
                            Endpoint.mobileAuthEvents + "?profile=" + profile.id,
                            key: stored.key
                        )
                        request.setHeader("Accept", "text/event-stream")
                        request.setHeader("Last-Event-ID", lastEventID)
                        let (head, chunks) = try await configuration.transport.open(request)
                        calls.nonce.remember(head)
                        guard head.status == 200 else {
                            throw calls.refusal(head, errors: .mobileAuthRequest).error
                        }
                        for try await chunk in chunks {
                            for event in parser.feed(chunk) where event.name == "mobile-auth" {
                                guard
                                    let received = try? WireCoding.decode(
                                        MobileAuthEvent.self,
                                        from: Data(event.data.utf8)
                                    )
                                else { continue }
                                if let id = event.id { lastEventID = id }
                                delay = reconnectDelay
                                if let sealed = received.sealed {
                                    await self.keep(sealed, for: received.request.transactionID)
                                }
                                continuation.yield(PendingMobileAuthRequest(received.request, userInfo: [:]))
                            }
                        }
                    } catch let error as any DomainError where Self.endsChannel(error) {
                        continuation.finish(throwing: error)
                        return
                    } catch {
                        // A dropped connection or an unreachable server: reconnect after a pause.
                    }
                    parser = ServerSentEventParser()
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(60))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Errors after which reconnecting cannot help.
    private nonisolated static func endsChannel(_ error: any DomainError) -> Bool {
        let final: Set<String> = [
            GenericError.Code.userDeregistered.name, GenericError.Code.deviceDeregistered.name,
            MobileAuthRequestError.Code.userDisenrolled.name, MobileAuthRequestError.Code.notEnrolled.name,
            MobileAuthEnrollmentError.Code.enrollmentNotAvailable.name,
            GenericError.Code.requestInvalid.name, GenericError.Code.configurationInvalid.name,
        ]
        // Gatehouse's own codes only: a plugin's code of the same name says nothing about the channel.
        return error.codePlugin == nil && final.contains(error.codeName)
    }

    /// Keeps a payload the events channel brought, for the handling that follows (a bounded few).
    func keep(_ sealed: SealedBox, for transactionID: String) {
        if receivedPayloads.count >= 64 { receivedPayloads.removeAll() }
        receivedPayloads[transactionID] = sealed
    }

    // MARK: - Handling a request

    /// Handles a request: fetches its sealed payload, opens it, asks the delegate with the
    /// challenge its type needs (confirmation, PIN, biometric or custom authenticator, with PIN
    /// fallback), and sends the answer sealed for the server, bound to the transaction and its
    /// nonce. The delegate hears `didHandle` or `didFail`; the result says the same.
    @discardableResult
    public func handlePushMobileAuthRequest(
        _ pending: PendingMobileAuthRequest,
        delegate: any MobileAuthRequestDelegate
    ) async -> MobileAuthHandlingResult {
        await handling(delegate) { pending }
    }

    /// Handles the request `receive` brings (a push's, or a claimed code's): opens it, asks the
    /// delegate, answers; the delegate hears how it ended, and the result says the same.
    private func handling(
        _ delegate: any MobileAuthRequestDelegate,
        receive: () async throws -> PendingMobileAuthRequest
    ) async -> MobileAuthHandlingResult {
        var opened: MobileAuthRequest?
        do {
            try begin()
            defer { end() }
            let (request, payload, keys) = try await openRequest(try await receive())
            opened = request
            let result = try await answer(request, payload: payload, keys: keys, delegate: delegate)
            switch result {
            case .approved(let info): await delegate.didHandle(request, info: info)
            case .denied: await delegate.didHandle(request, info: nil)
            case .failed: break
            }
            return result
        } catch {
            await delegate.didFail(opened, error: error)
            return .failed(error)
        }
    }

    // MARK: - OTP mobile authentication

    /// Whether `otp` has the form of a mobile authentication code (what a portal shows as a QR
    /// code): the seed SDK's `canHandleOTPMobileAuthRequest`. It asks nothing of the server.
    public nonisolated func canHandleOTPMobileAuthRequest(otp: String) -> Bool {
        MobileAuthOTP(otp) != nil
    }

    /// Handles a scanned or typed OTP: claims its transaction for `profile` (by default the
    /// authenticated user's, else the only enrolled profile on this device), then asks the
    /// delegate and answers exactly as for a push: the type's method, on the same attempt counter.
    /// The server refuses a code that was used, expired, or is another user's (the seed's
    /// `alreadyHandled` and `notFound`), and a profile that is not enrolled (`notEnrolled`).
    @discardableResult
    public func handleOTPMobileAuthRequest(
        otp: String,
        profile: UserProfile? = nil,
        delegate: any MobileAuthRequestDelegate
    ) async -> MobileAuthHandlingResult {
        await handling(delegate) {
            guard let code = MobileAuthOTP(otp) else {
                throw MobileAuthRequestError(.notHandleable, message: "This is not a mobile authentication code.")
            }
            let chosen = try otpProfile(profile)
            guard let stored = try store.profile(chosen.id, server: server) else {
                throw GenericError(.userDeregistered, message: "The profile \(chosen.id) is not on this device.")
            }
            let claimed: MobileAuthEvent = try await deregisteringOnRefusal(chosen) {
                try await self.calls.call(
                    "POST",
                    Endpoint.mobileAuthOTP + "?profile=" + chosen.id,
                    body: MobileAuthOTPClaim(otp: code.text),
                    key: stored.key,
                    errors: .mobileAuthRequest
                )
            }
            guard let sealed = claimed.sealed, claimed.request.transactionID == code.transactionID,
                claimed.request.profileID == chosen.id
            else {
                throw MobileAuthRequestError(.notHandleable, message: "The server answered for another request.")
            }
            keep(sealed, for: code.transactionID)
            return PendingMobileAuthRequest(claimed.request, userInfo: [:])
        }
    }

    /// The profile an OTP is handled for when the app names none.
    private func otpProfile(_ named: UserProfile?) throws -> UserProfile {
        if let named { return named }
        if let current = session?.profile, try store.mobileAuthEnrolment(profile: current.id) != nil {
            return current
        }
        let enrolled = try store.profiles(server: server).filter {
            try store.mobileAuthEnrolment(profile: $0.id) != nil
        }
        guard enrolled.count == 1, let only = enrolled.first else {
            throw MobileAuthRequestError(
                enrolled.isEmpty ? .notEnrolled : .userNotAuthenticated,
                message: enrolled.isEmpty
                    ? "No profile on this device is enrolled for mobile authentication."
                    : "Several profiles here are enrolled: authenticate one, or name it."
            )
        }
        return only
    }

    private struct RequestKeys {
        var profileKey: P256.Signing.PrivateKey
        var enrolment: ClientStore.MobileAuthEnrolment
    }

    private func openRequest(
        _ pending: PendingMobileAuthRequest
    ) async throws -> (MobileAuthRequest, MobileAuthPayload, RequestKeys) {
        let profile = pending.profile
        guard let stored = try store.profile(profile.id, server: server) else {
            throw GenericError(.userDeregistered, message: "The profile \(profile.id) is not on this device.")
        }
        guard let enrolment = try store.mobileAuthEnrolment(profile: profile.id) else {
            throw MobileAuthRequestError(.notEnrolled)
        }
        // The events channel brought the payload along; otherwise fetch it.
        var sealed = receivedPayloads.removeValue(forKey: pending.transactionID)
        if sealed == nil {
            do {
                let response: MobileAuthPayloadResponse = try await deregisteringOnRefusal(profile) {
                    try await self.calls.call(
                        "GET",
                        Endpoint.mobileAuthTransaction(pending.transactionID, profile: profile.id),
                        key: stored.key,
                        errors: .mobileAuthRequest
                    )
                }
                sealed = response.sealed
            } catch let error as MobileAuthRequestError where error.code == .userDisenrolled {
                try store.removeMobileAuthEnrolment(profile: profile.id)
                throw error
            }
        }
        guard
            let plaintext = try? sealed?.open(
                with: enrolment.key,
                purpose: .payload,
                transactionID: pending.transactionID
            ),
            let payload = try? WireCoding.decode(MobileAuthPayload.self, from: plaintext),
            payload.transactionID == pending.transactionID, payload.profileID == profile.id
        else {
            throw MobileAuthRequestError(.notHandleable, message: "The request's payload could not be opened here.")
        }
        let request = MobileAuthRequest(
            transactionID: payload.transactionID,
            profile: profile,
            type: payload.type,
            method: payload.method,
            message: payload.message,
            secureMessage: payload.secureMessage,
            signingData: payload.signingData,
            numberMatching: payload.numberMatching,
            userInfo: pending.userInfo
        )
        return (request, payload, RequestKeys(profileKey: stored.key, enrolment: enrolment))
    }

    private func answer(
        _ request: MobileAuthRequest,
        payload: MobileAuthPayload,
        keys: RequestKeys,
        delegate: any MobileAuthRequestDelegate
    ) async throws -> MobileAuthHandlingResult {
        var number: Int?
        // Confirmation asks the user directly; with number matching, the other methods ask for
        // the number (or a denial) before their authenticator's challenge.
        if request.method == .confirmation || request.numberMatching {
            switch await delegate.confirmation(MobileAuthConfirmationChallenge(request: request)) {
            case .deny(let reason):
                return try await send(.deny, reason: reason, number: nil, request, payload, keys, delegate)
            case .accept(let typed):
                number = typed
            }
        }
        return try await send(.accept, reason: nil, number: number, request, payload, keys, delegate)
    }

    private func send(
        _ decision: MobileAuthAnswer.Decision,
        reason: MobileAuthDenialReason?,
        number: Int?,
        _ request: MobileAuthRequest,
        _ payload: MobileAuthPayload,
        _ keys: RequestKeys,
        _ delegate: any MobileAuthRequestDelegate
    ) async throws -> MobileAuthHandlingResult {
        var answer = MobileAuthAnswer(
            transactionID: request.transactionID,
            nonce: payload.nonce.data,
            decision: decision,
            reason: reason,
            number: number
        )
        if let signingData = request.signingData {
            let content = MobileAuthAnswer.signedContent(
                transactionID: request.transactionID,
                signingData: signingData,
                decision: decision
            )
            answer.signature = Base64URLData(try keys.profileKey.signature(for: content).rawRepresentation)
            answer.publicKey = PublicJWK(keys.profileKey.publicKey)
        }
        let sealed = try SealedBox.seal(
            try WireCoding.encode(answer),
            for: keys.enrolment.serverKey,
            purpose: .answer,
            transactionID: request.transactionID
        )
        let response: MobileAuthAnswerResponse = try await deregisteringOnRefusal(request.profile) {
            try await self.calls.call(
                "POST",
                Endpoint.mobileAuthAnswer(request.transactionID, profile: request.profile.id),
                body: MobileAuthAnswerRequest(sealed: sealed),
                key: keys.profileKey,
                errors: .mobileAuthRequest
            )
        }
        guard let flow = response.flow else {
            switch response.status {
            case .approved: return .approved(info: nil)
            case .denied where decision == .deny: return .denied
            case .denied:
                throw MobileAuthRequestError(.alreadyHandled, message: "The server refused the answer (wrong number?).")
            case .pending, .expired: throw MobileAuthRequestError(.notFound, message: "The request is no longer open.")
            }
        }
        // The method needs an authenticator: run the flow the server started for it.
        let outcome = try await deregisteringOnRefusal(request.profile) {
            try await self.runFlow(
                self.runner(
                    key: keys.profileKey,
                    responder: ChallengeResponders.mobileAuthentication(delegate, request: request)
                ),
                flow,
                profile: request.profile
            )
        }
        try store.save(outcome.changes, profile: request.profile.id, server: server)
        return .approved(info: outcome.info ?? outcome.final.info)
    }
}
