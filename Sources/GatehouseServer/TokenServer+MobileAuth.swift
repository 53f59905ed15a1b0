import Crypto
import Foundation
import GatehouseKernel
import GatehouseOutbound
import GatehouseProtocol
import Logging
import Synchronization

// Mobile authentication with push: the device's enrolments, its pending list, sealed payloads
// and answers, the events channel, and the portal API. The rules of approving with an
// authenticator are the flow machine's: an answer that needs one starts a flow.

extension TokenServer {
    func mobileAuthConfiguration() throws -> MobileAuthConfiguration {
        guard let configured = configuration.mobileAuth else {
            throw ServerError(MobileAuthEnrollmentError(.enrollmentNotAvailable), status: 404)
        }
        return configured
    }

    // MARK: - Enrolment (access token)

    func enrolMobileAuth(_ request: WireRequest) async throws -> WireResponse {
        let mode = try mobileAuthConfiguration().enrolment
        let token = try bearerToken(request)
        let proof = try proof(request, accessToken: token)
        let body = try decodeBody(MobileAuthEnrolmentRequest.self, request)
        guard body.publicKey.data.count == 32,
            let key = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: body.publicKey.data)
        else {
            throw ServerError.invalidRequest("Invalid field public_key: not an X25519 public key (32 bytes).")
        }
        guard !key.isLowOrder else {
            throw ServerError.invalidRequest(
                "Invalid field public_key: a low-order X25519 point; anyone could read what is sealed to it."
            )
        }
        let serverKey = try await store.enrolMobileAuth(
            token: token,
            proof: proof,
            deviceKey: body.publicKey.data,
            mode: mode
        )
        return try json(MobileAuthEnrolmentResponse(serverPublicKey: serverKey))
    }

    func enrolPush(_ request: WireRequest) async throws -> WireResponse {
        _ = try mobileAuthConfiguration()
        let token = try bearerToken(request)
        let proof = try proof(request, accessToken: token)
        let body = try decodeBody(PushEnrolmentRequest.self, request)
        guard (8...512).contains(body.pushToken.utf8.count),
            body.pushToken.unicodeScalars.allSatisfy({
                $0.isASCII && $0.properties.isAlphabetic || "0123456789-_:.".unicodeScalars.contains($0)
            })
        else {
            throw ServerError.invalidRequest(
                "Invalid field push_token: 8 to 512 letters, digits, '-', '_', ':' or '.'."
            )
        }
        let status = try await store.enrolPush(
            token: token,
            proof: proof,
            pushToken: body.pushToken,
            platform: body.platform,
            refresh: request.path.hasPrefix(Endpoint.pushToken)
        )
        return try json(status)
    }

    func mobileAuthStatus(_ request: WireRequest) async throws -> WireResponse {
        let token = try bearerToken(request)
        let proof = try proof(request, accessToken: token)
        return try json(try await store.enrolmentStatus(token: token, proof: proof))
    }

    // MARK: - The device (DPoP with the profile key, no session needed)

    /// The profile named in the query (`?profile=ID`).
    private func profileParameter(_ request: WireRequest) throws -> String {
        let query = request.path.split(separator: "?", maxSplits: 1).dropFirst().first ?? ""
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == "profile", (1...64).contains(parts[1].utf8.count),
                parts[1].allSatisfy({ $0.isLetter || $0.isNumber })
            {
                return String(parts[1])
            }
        }
        throw ServerError.invalidRequest("Name the profile: ?profile=ID.")
    }

    func pendingMobileAuth(_ request: WireRequest) async throws -> WireResponse {
        _ = try mobileAuthConfiguration()
        let profileID = try profileParameter(request)
        let proof = try proof(request)
        let pending = try await store.pending(profileID, proof: proof)
        return try json(
            PendingMobileAuthList(
                requests: pending.map {
                    PendingMobileAuthItem(
                        transactionID: $0.notification.transactionID,
                        profileID: profileID,
                        createdAt: $0.notification.createdAt,
                        timeToLive: $0.notification.timeToLive,
                        message: $0.notification.message
                    )
                }
            )
        )
    }

    func mobileAuthPayload(_ transactionID: String, _ request: WireRequest) async throws -> WireResponse {
        _ = try mobileAuthConfiguration()
        let profileID = try profileParameter(request)
        let proof = try proof(request)
        let sealed = try await store.payload(transactionID, profileID: profileID, proof: proof)
        return WireResponse(
            status: 200,
            headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: try WireCoding.encode(
                MobileAuthPayloadResponse(sealed: try WireCoding.decode(SealedBox.self, from: sealed))
            )
        )
    }

    func answerMobileAuth(_ transactionID: String, _ request: WireRequest) async throws -> WireResponse {
        let mobileAuth = try mobileAuthConfiguration()
        let profileID = try profileParameter(request)
        let body = try decodeBody(MobileAuthAnswerRequest.self, request)
        let proof = try proof(request)
        let pin = pinAuthenticator.descriptor.id
        let outcome = try await store.answer(
            transactionID,
            profileID: profileID,
            sealed: body.sealed,
            proof: proof,
            plan: { typeName, pinOnly in
                guard let type = mobileAuth.types.first(where: { $0.name == typeName }) else { return nil }
                let authenticator = pinOnly ? pin : type.authenticator ?? pin
                return .mobileAuthentication(with: authenticator, fallback: pin)
            },
            flowLifetime: Double(configuration.flowLifetime)
        )
        callbacks?.wake()
        switch outcome {
        case .ended(let status):
            return try json(MobileAuthAnswerResponse(status: status))
        case .flow(let applied):
            guard case .reply(let reply) = applied.outcome else { return try respond(applied) }
            record(applied)
            return try json(MobileAuthAnswerResponse(status: .pending, flow: flowResponse(reply, applied)))
        }
    }

    /// `GET /v1/mobile-auth/events?profile=ID`: server-sent events, one per pending request with
    /// its sealed payload, from the one after `Last-Event-ID` on; a comment every 15 seconds keeps
    /// proxies from closing it.
    func mobileAuthEvents(_ request: WireRequest) async throws -> WireResponse {
        _ = try mobileAuthConfiguration()
        let profileID = try profileParameter(request)
        let proof = try proof(request)
        let lastSeen = request.header("Last-Event-ID").flatMap { Int64($0) } ?? 0
        // Checks the device now, so a refused channel gets an error instead of an empty stream.
        _ = try await store.pending(profileID, proof: proof, after: lastSeen)
        // Unbounded: what is queued is bounded by the profile's pending transactions, and a dropped
        // chunk would be a missed request (its id is already past `Last-Event-ID`).
        let (stream, continuation) = AsyncStream<Data>.makeStream()
        let wakes: AsyncStream<Void>
        do {
            wakes = try hub.listen(profileID)
        } catch .profileFull {
            var busy = ServerError(
                429,
                "temporarily_unavailable",
                "This profile has \(EventChannelHub.maxChannelsPerProfile) event channels open already; close one."
            )
            busy.headers["Retry-After"] = "5"
            throw busy
        } catch .serverFull {
            var busy = ServerError(
                503,
                "temporarily_unavailable",
                "The server has as many event channels open as it keeps; try again later, or fetch pending requests."
            )
            busy.headers["Retry-After"] = "30"
            throw busy
        }
        let tasks = Mutex<[Task<Void, Never>]>([])
        continuation.onTermination = { _ in tasks.withLock { for task in $0 { task.cancel() } } }
        let heartbeat = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(15))
                if case .terminated = continuation.yield(Data(": keep-alive\n\n".utf8)) { return }
            }
        }
        let pump = Task { [store, clock] in
            var sent = lastSeen
            continuation.yield(Data("retry: 1000\n\n".utf8))
            for await _ in wakes {
                // The device may stop listening meanwhile (deregistered, disenrolled): end the channel.
                guard
                    let fresh = try? await store.unsentDeliveries(
                        profileID,
                        keyThumbprint: proof.keyThumbprint,
                        after: sent,
                        now: clock.now.timeIntervalSince1970
                    )
                else { break }
                for delivery in fresh.sorted(by: { $0.seq < $1.seq }) {
                    let event = MobileAuthEvent(
                        request: delivery.notification,
                        sealed: try? WireCoding.decode(SealedBox.self, from: delivery.sealed)
                    )
                    guard let data = try? WireCoding.encode(event) else { continue }
                    let text =
                        "id: \(delivery.seq)\nevent: mobile-auth\ndata: \(String(decoding: data, as: UTF8.self))\n\n"
                    continuation.yield(Data(text.utf8))
                    sent = max(sent, delivery.seq)
                }
            }
            continuation.finish()
        }
        tasks.withLock { $0 = [heartbeat, pump] }
        // A stream that ended before the tasks were listed still stops them.
        if case .terminated = continuation.yield(Data()) {
            heartbeat.cancel()
            pump.cancel()
        }
        return WireResponse(
            status: 200,
            headers: ["Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"],
            body: Data(),
            stream: stream
        )
    }

    // MARK: - Portal API (HTTP Basic, an API client)

    private func apiClient(
        _ request: WireRequest,
        _ mobileAuth: MobileAuthConfiguration
    ) throws -> MobileAuthConfiguration.APIClient {
        let index = try basicCredential(
            request,
            among: mobileAuth.apiClients.map { ($0.id, $0.secret) },
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
        let client = try apiClient(request, mobileAuth)
        let body = try decodeBody(PortalMobileAuthRequest.self, request)
        guard body.type.utf8.count <= 64, let type = mobileAuth.types.first(where: { $0.name == body.type }) else {
            throw ServerError(
                404,
                "invalid_request",
                "There is no mobile authentication type \"\(body.type.prefix(64))\".",
                code: 3005
            )
        }
        guard (1...256).contains(body.userID.utf8.count) else {
            throw ServerError.invalidRequest("Invalid field user_id: 1 to 256 bytes.")
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
                "The message has \(message.count) characters; a push shows at most \(MobileAuthConfiguration.maxMessageLength).",
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
        // One moment for the stored transaction and its pushes, so both state the same expiry.
        let started = now
        let deliveries = try await store.startTransaction(
            ServerStore.NewTransaction(
                id: id,
                apiClient: client.id,
                user: MobileAuthUser(identityProvider: provider, subject: body.userID),
                type: type,
                message: message,
                secureMessage: body.secureMessage,
                signingData: type.transactionSigning ? body.signingData : nil,
                callbackURI: body.callbackURI,
                number: number,
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
                devices: deliveries.count
            ),
            status: 201
        )
    }

    /// Sends each device its push (its events channel, on whichever instance holds it, was woken
    /// when the transaction committed), all at once, each given at most `pushTimeout`: a stalled push
    /// service delays the portal's answer by that much at worst. A push that fails or times out is
    /// logged; the device still finds the request on its events channel or in its pending list.
    private func push(_ deliveries: [ServerStore.Delivery], _ notification: (String) -> PushNotification) async {
        await withTaskGroup(of: Void.self) { group in
            for delivery in deliveries {
                guard let token = delivery.pushToken, let platform = delivery.platform, platform != .events,
                    let transport = pushTransports[platform]
                else { continue }
                let message = notification(delivery.profileID)
                group.addTask { [logger] in
                    let outcome = await withTaskGroup(of: String?.self) { race in
                        race.addTask {
                            do {
                                try await transport.deliver(message, token: token, platform: platform)
                                return nil
                            } catch {
                                return String(describing: error)
                            }
                        }
                        race.addTask {
                            try? await Task.sleep(for: Self.pushTimeout)
                            return "no answer within \(Self.pushTimeout)"
                        }
                        let first = await race.next() ?? nil
                        race.cancelAll()
                        return first
                    }
                    if let problem = outcome {
                        logger.warning(
                            "Push failed",
                            metadata: ["platform": "\(platform.rawValue)", "error": "\(problem)"]
                        )
                    }
                }
            }
        }
    }

    /// How long the portal's request waits for a push service.
    static let pushTimeout = Duration.seconds(2)

    func portalTransaction(_ id: String, _ request: WireRequest) async throws -> WireResponse {
        let client = try apiClient(request, try mobileAuthConfiguration())
        guard (16...64).contains(id.utf8.count), Data(base64URLEncoded: id) != nil,
            let result = try await store.transactionResult(id, apiClient: client.id, now: now)
        else {
            throw ServerError(404, "not_found", "There is no such transaction for this API client.", code: 3004)
        }
        return try json(result)
    }
}
