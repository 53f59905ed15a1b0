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
    func profileParameter(_ request: WireRequest) throws -> String {
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
        // An answer that ended the transaction: its callback continues this request's trace.
        if case .ended = outcome { callbacks?.wake(endedBy: transactionID) } else { callbacks?.wake() }
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
        let profileFull = {
            var busy = ServerError(
                429,
                "temporarily_unavailable",
                "This profile has \(EventChannelHub.maxChannelsPerProfile) event channels open already; close one."
            )
            busy.headers["Retry-After"] = "5"
            return busy
        }
        let channel: EventChannelHub.Channel
        do {
            channel = try hub.listen(profileID)
        } catch .profileFull {
            throw profileFull()
        } catch .serverFull {
            var busy = ServerError(
                503,
                "temporarily_unavailable",
                "The server has as many event channels open as it keeps; try again later, or fetch pending requests."
            )
            busy.headers["Retry-After"] = "30"
            throw busy
        }
        // The profile's channels at every instance together stay within the cap: a slot leased
        // in the database for as long as this one is open.
        do {
            guard
                try await store.leaseEventChannel(
                    channel.id,
                    profileID: profileID,
                    slots: EventChannelHub.maxChannelsPerProfile,
                    now: now
                )
            else { throw profileFull() }
        } catch {
            hub.close(channel)
            throw error
        }
        let wakes = channel.wakes
        let tasks = Mutex<[Task<Void, Never>]>([])
        continuation.onTermination = { [store, channelID = channel.id] _ in
            tasks.withLock { for task in $0 { task.cancel() } }
            Task { try? await store.releaseEventChannels([channelID]) }
        }
        let heartbeat = Task { [hub, store, clock] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(15))
                if case .terminated = continuation.yield(Data(": keep-alive\n\n".utf8)) { return }
                if let due = hub.leasesDue(now: clock.now.timeIntervalSince1970) {
                    hub.renewed(try? await store.renewEventChannels(due, now: clock.now.timeIntervalSince1970), of: due)
                }
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
}
