import Foundation
import GatehouseClient
import GatehouseKernel
import GatehouseProtocol
import GatehousePush
import GatehouseTesting
import Logging
import Testing

@testable import GatehouseServer

/// APNs and FCM stand-ins on loopback HTTP/2 servers with a test CA, and the push senders
/// `gatehouse serve` would make for them from a `server.mobileAuth.push` section.
struct PushStandIns {
    let apns: APNsStandIn
    let fcm: FCMStandIn
    let apnsServer: LoopbackHTTP2Server
    let fcmServer: LoopbackHTTP2Server
    /// What the senders logged.
    let log: RecordingLogger

    static let apnsToken = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
    static let fcmToken = "fcm-registration-token:APA91bH-0123456789_abcdefghij"

    /// The pushes APNs received for `transactionID`.
    func apnsPushes(about transactionID: String) -> [APNsStandIn.Received] {
        apns.received.filter { $0.request.headers["apns-collapse-id"] == transactionID }
    }

    /// The messages FCM received for `transactionID`.
    func fcmMessages(about transactionID: String) -> [FCMStandIn.Received] {
        fcm.received.filter { received in
            let object = try? JSONSerialization.jsonObject(with: received.request.body) as? [String: Any]
            let data = (object?["message"] as? [String: Any])?["data"] as? [String: String]
            return data?[PushNotification.transactionKey] == transactionID
        }
    }
}

/// Writes `contents` to `name` in `directory` with `permissions`; returns its path.
func writeKeyFile(_ contents: Data, _ name: String, in directory: URL, permissions: Int = 0o600) throws -> String {
    let path = directory.appendingPathComponent(name).path
    guard FileManager.default.createFile(atPath: path, contents: contents, attributes: [.posixPermissions: permissions])
    else { throw CocoaError(.fileWriteUnknown) }
    // The umask may have taken bits away, never added them: set them as asked.
    try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: path)
    return path
}

/// The `server.mobileAuth.push` section for the stand-ins, as a manifest would hold it.
func pushSection(
    _ standIns: (apns: APNsStandIn, apnsURL: String, fcmURL: String),
    keyFile: String,
    serviceAccountFile: String,
    caFile: String,
    attempts: Int = 4
) -> ConfigValue {
    .object([
        "attempts": .integer(attempts),
        "apns": .object([
            "keyFile": .string(keyFile), "keyID": .string(standIns.apns.keyID), "teamID": .string(standIns.apns.teamID),
            "topic": .string(standIns.apns.topic), "environment": .string("sandbox"), "url": .string(standIns.apnsURL),
            "caFile": .string(caFile),
        ]),
        "fcm": .object([
            "serviceAccountFile": .string(serviceAccountFile), "url": .string(standIns.fcmURL),
            "caFile": .string(caFile),
        ]),
    ])
}

/// Runs `body` against a fresh server (embedded, SQLite or PostgreSQL as the suite runs) whose
/// pushes go through real senders to the stand-ins; tears everything down afterwards, the
/// server's pushes first.
func withPushStandIns(
    enrolment: String = "single",
    attempts: Int = 4,
    _ body: (Fixture, PushStandIns) async throws -> Void
) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-push-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let authority = try TestCertificateAuthority()
    let caFile = try authority.writeCAFile(in: directory)
    let apns = APNsStandIn()
    let fcm = try FCMStandIn()
    let apnsServer = try await LoopbackHTTP2Server.start(authority: authority) { apns.answer($0) }
    let fcmServer = try await LoopbackHTTP2Server.start(authority: authority) { fcm.answer($0) }
    fcm.served(at: fcmServer.url)
    let log = RecordingLogger(label: "push", level: .trace)
    let senders: PushSenders
    do {
        let section = pushSection(
            (apns, apnsServer.url, fcmServer.url),
            keyFile: try writeKeyFile(Data(apns.keyFileContents.utf8), "AuthKey_\(apns.keyID).p8", in: directory),
            serviceAccountFile: try writeKeyFile(try fcm.serviceAccountFile(), "service-account.json", in: directory),
            caFile: caFile,
            attempts: attempts
        )
        senders = try await PushSenders(
            configuration: try ConfigurationDecoder().decode(PushConfiguration.self, from: section),
            logger: log.logger
        )
    } catch {
        await apnsServer.stop()
        await fcmServer.stop()
        throw error
    }
    let standIns = PushStandIns(apns: apns, fcm: fcm, apnsServer: apnsServer, fcmServer: fcmServer, log: log)
    do {
        try await withFixture(.embedded, enrolment: enrolment, pushTransports: senders.transports) { fixture in
            try await body(fixture, standIns)
        }
    } catch {
        await senders.shutdown()
        await apnsServer.stop()
        await fcmServer.stop()
        throw error
    }
    await senders.shutdown()
    await apnsServer.stop()
    await fcmServer.stop()
}

/// A registered, logged-in device enrolled for mobile authentication and for push on `platform`.
func enrolledDevice(
    _ fixture: Fixture,
    name: String = "device",
    email: String = "jane@example.com",
    platform: PushPlatform,
    token: String
) async throws -> (UserClient, UserProfile) {
    let (client, profile) = try await enrolledDevice(fixture, name: name, email: email, token: nil)
    try await client.enrollForPushMobileAuth(deviceToken: token, platform: platform)
    return (client, profile)
}
