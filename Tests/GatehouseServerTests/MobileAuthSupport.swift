import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@testable import GatehouseServer

/// What the portal of the tests sends and reads, through the raw wire (it is no SDK user).
struct Portal {
    let fixture: Fixture
    var id = "portal"
    var secret = Fixture.portalSecret

    var authorization: String { "Basic " + Data("\(id):\(secret)".utf8).base64EncodedString() }

    func start(_ request: PortalMobileAuthRequest) async throws -> WireResponse {
        try await fixture.send(
            "POST",
            Endpoint.portalMobileAuth,
            body: try WireCoding.encode(request),
            headers: ["Authorization": authorization]
        )
    }

    /// Starts a transaction that must be accepted by the server.
    func started(
        _ type: String,
        user: String = "jane@example.com",
        message: String? = nil,
        secureMessage: String? = nil,
        signingData: String? = nil,
        callbackURI: String? = nil
    ) async throws -> PortalMobileAuthResponse {
        let response = try await start(
            PortalMobileAuthRequest(
                userID: user,
                type: type,
                message: message,
                secureMessage: secureMessage,
                signingData: signingData,
                callbackURI: callbackURI
            )
        )
        #expect(response.status == 201, "\(String(decoding: response.body, as: UTF8.self))")
        return try WireCoding.decode(PortalMobileAuthResponse.self, from: response.body)
    }

    func result(_ transactionID: String) async throws -> PortalTransactionResult {
        let response = try await fixture.send(
            "GET",
            Endpoint.portalTransaction(transactionID),
            headers: ["Authorization": authorization]
        )
        #expect(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        return try WireCoding.decode(PortalTransactionResult.self, from: response.body)
    }
}

/// A registered, logged-in device enrolled for mobile authentication and for push with `token`.
func enrolledDevice(
    _ fixture: Fixture,
    name: String = "device",
    email: String = "jane@example.com",
    token: String? = "apns-token-0001"
) async throws -> (UserClient, UserProfile) {
    let client = try fixture.client(name)
    let profile = try await register(client, email: email)
    try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
    try await client.enrollForMobileAuth()
    if let token { try await client.enrollForPushMobileAuth(deviceToken: token, platform: .apns) }
    return (client, profile)
}

/// The last push the server sent to `token`.
func lastPush(_ fixture: Fixture, token: String = "apns-token-0001") -> PushNotification? {
    fixture.pushes.delivered(to: token).last
}

/// The request as the app reads it from the push's payload, as APNs hands it over.
func pending(_ client: UserClient, from push: PushNotification?) throws -> PendingMobileAuthRequest {
    let push = try #require(push)
    let payload = try #require(try JSONSerialization.jsonObject(with: push.apnsPayload()) as? [String: Any])
    return try #require(client.pendingMobileAuthRequest(fromUserInfo: payload))
}

func transactionRow(_ fixture: Fixture, _ id: String) async throws -> SQLRow? {
    try await fixture.read { db in
        try SQLRow.fetchOne(db, sql: "SELECT * FROM mobile_transactions WHERE id = ?", arguments: [id])
    }
}
