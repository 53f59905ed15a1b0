import Foundation
import GatehouseKernel
public import GatehouseProtocol

/// The portal API's client, for a service written in Swift that starts mobile authentications:
/// a confidential API client with HTTP Basic credentials. Works over any transport (HTTP, or an
/// embedded server in tests and examples).
public struct PortalClient: Sendable {
    /// How the token server is reached.
    public let transport: any TokenServerTransport
    private let authorization: String

    /// A client that authenticates as the API client `clientID` with its `secret` (HTTP Basic).
    public init(transport: any TokenServerTransport, clientID: String, secret: String) {
        self.transport = transport
        authorization = "Basic " + Data("\(clientID):\(secret)".utf8).base64EncodedString()
    }

    /// Starts a transaction; the response has its id and, with number matching, the number to
    /// show the user.
    public func start(_ request: PortalMobileAuthRequest) async throws -> PortalMobileAuthResponse {
        try await call("POST", Endpoint.portalMobileAuth, body: try WireCoding.encode(request))
    }

    /// Where the transaction stands.
    public func result(_ transactionID: String) async throws -> PortalTransactionResult {
        try await call("GET", Endpoint.portalTransaction(transactionID), body: Data())
    }

    /// Polls until the transaction is no longer pending, or `timeout` passes (then the last
    /// pending result).
    public func waitForResult(
        _ transactionID: String,
        timeout: Duration = .seconds(130),
        interval: Duration = .milliseconds(200)
    ) async throws -> PortalTransactionResult {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            let current = try await result(transactionID)
            guard current.status == .pending, clock.now < deadline else { return current }
            try await Task.sleep(for: interval)
        }
    }

    private func call<Response: Decodable>(_ method: String, _ path: String, body: Data) async throws -> Response {
        var headers = ["Authorization": authorization, "Accept": "application/json"]
        if !body.isEmpty { headers["Content-Type"] = "application/json" }
        let response = try await transport.send(WireRequest(method: method, path: path, headers: headers, body: body))
        guard (200..<300).contains(response.status) else {
            let error = try? WireCoding.decode(ErrorBody.self, from: response.body)
            throw GenericError(
                response.status == 401 ? .configurationInvalid : .requestInvalid,
                message: "\(error?.errorDescription ?? "HTTP \(response.status)")"
                    + (error?.gatehouseCode.map { " (code \($0))" } ?? "")
            )
        }
        return try WireCoding.decode(Response.self, from: response.body)
    }
}
