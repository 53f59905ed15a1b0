import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Synchronization
import Testing

@testable import GatehouseServer

@Suite("A PIN change whose answer is lost")
struct PinChangeRecoveryTests {
    @Test(
        "the server committed, the device never heard: the old PIN still works and undoes the change",
        arguments: Mode.allCases
    )
    func answerLost(mode: Mode) async throws {
        try await withFixture(mode) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            let original = try await pinRegistration(fixture, profile.id)

            // The commit of the new PIN reaches the server; its answer does not reach the device.
            fixture.transport.losesAnswer.withLock { $0 = { isPinCommit($0) } }
            await #expect(throws: (any Error).self) {
                try await client.changePin(delegate: ScriptedResponder([.pin("258147"), .createPin("914736")]))
            }
            fixture.transport.losesAnswer.withLock { $0 = nil }
            #expect(try await pinRegistration(fixture, profile.id) != original)

            // The device still holds the old key: the old PIN works, and the change is undone.
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("258147")]))
            #expect(try await pinRegistration(fixture, profile.id) == original)
            await client.logout()
            let new = ScriptedResponder([.pin("914736")])
            await #expect(throws: (any Error).self) { try await client.authenticateUser(profile, delegate: new) }
            #expect(await new.received.count == 2)
            #expect(await new.received.last?.error?.codeName == "invalidPin")
        }
    }

    @Test("a change the device learnt of drops the old registration at the next authentication")
    func answerArrived() async throws {
        try await withFixture(.embedded) { fixture in
            let client = try fixture.client()
            let profile = try await register(client)
            try await client.changePin(delegate: ScriptedResponder([.pin("258147"), .createPin("914736")]))
            #expect(try await pinRegistration(fixture, profile.id).keepsPrevious)
            try await client.authenticateUser(profile, delegate: ScriptedResponder([.pin("914736")]))
            #expect(!(try await pinRegistration(fixture, profile.id).keepsPrevious))
            // The old PIN does not work, before or after.
            await client.logout()
            let old = ScriptedResponder([.pin("258147")])
            await #expect(throws: (any Error).self) { try await client.authenticateUser(profile, delegate: old) }
            #expect(await old.received.last?.error?.codeName == "invalidPin")
        }
    }
}

/// The server's PIN registration of `profile`: its keys, and whether it keeps a replaced one.
private func pinRegistration(_ fixture: Fixture, _ profile: String) async throws -> PinKeys {
    let data = try await fixture.read { db in
        try Data.fetchOne(
            db,
            sql: "SELECT data FROM registrations WHERE profile_id = ? AND authenticator = 'pin'",
            arguments: [profile]
        )
    }
    let object = try #require(try JSONSerialization.jsonObject(with: data ?? Data()) as? [String: Any])
    return PinKeys(
        oprfKey: object["oprfKey"] as? String,
        pinPublicKey: object["pinPublicKey"] as? String,
        keepsPrevious: object["previous"] != nil
    )
}

private struct PinKeys: Equatable {
    var oprfKey: String?
    var pinPublicKey: String?
    var keepsPrevious: Bool
}

/// Whether `request` is the flow message that commits a new PIN.
private func isPinCommit(_ request: WireRequest) -> Bool {
    guard request.path.hasPrefix(Endpoint.flowPrefix),
        let body = try? WireCoding.decode(FlowMessageRequest.self, from: request.body),
        let message = body.message?.data
    else { return false }
    return String(decoding: message, as: UTF8.self).contains(#""op":"commit""#)
}
