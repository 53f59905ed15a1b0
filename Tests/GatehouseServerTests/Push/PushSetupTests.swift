import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import GatehousePush
import GatehouseTesting
import GatehouseYAML
import Testing
import _CryptoExtras

@testable import GatehouseServer

/// `server.mobileAuth.push` as the manifest holds it, and the key files the senders read at
/// start: refused in one line naming the file and the fix, never showing the key.
@Suite("Push senders' settings and key files")
struct PushSetupTests {
    /// A folder with an APNs key and a service account file, both private.
    private struct Files {
        let directory: URL
        let apnsKey = P256.Signing.PrivateKey()
        let fcm: FCMStandIn
        let keyFile: String
        let serviceAccountFile: String

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "gatehouse-push-\(UUID().uuidString)"
            )
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            fcm = try FCMStandIn()
            fcm.served(at: "https://127.0.0.1:9")
            keyFile = try writeKeyFile(Data(apnsKey.pemRepresentation.utf8), "AuthKey.p8", in: directory)
            serviceAccountFile = try writeKeyFile(try fcm.serviceAccountFile(), "service-account.json", in: directory)
        }

        func apns(_ extra: [String: ConfigValue] = [:]) -> ConfigValue {
            .object([
                "apns": .object(
                    [
                        "keyFile": .string(keyFile), "keyID": .string("ABC123DEFG"), "teamID": .string("DEF123GHIJ"),
                        "topic": .string("com.example.gatehouse"),
                    ].merging(extra) { $1 }
                )
            ])
        }

        func fcmSection(_ extra: [String: ConfigValue] = [:]) -> ConfigValue {
            .object(["fcm": .object(["serviceAccountFile": .string(serviceAccountFile)].merging(extra) { $1 })])
        }
    }

    private func senders(_ section: ConfigValue) async throws -> PushSenders {
        try await PushSenders(
            configuration: try ConfigurationDecoder().decode(PushConfiguration.self, from: section),
            logger: RecordingLogger().logger
        )
    }

    /// The setup error for `section`; fails the test when there is none.
    private func refusal(_ section: ConfigValue) async throws -> PushSetupError {
        do {
            let made = try await senders(section)
            await made.shutdown()
        } catch let error as PushSetupError {
            return error
        }
        Issue.record("the senders were made")
        return PushSetupError(key: "", problem: "")
    }

    @Test("private key files make senders for both platforms, production APNs by default")
    func made() async throws {
        let files = try Files()
        defer { try? FileManager.default.removeItem(at: files.directory) }
        let configuration = try ConfigurationDecoder().decode(PushConfiguration.self, from: files.apns())
        #expect(configuration.apns?.baseURL == "https://api.push.apple.com")
        #expect(configuration.attempts == 4)
        let apns = try #require(files.apns().objectValue?["apns"])
        let fcm = try #require(files.fcmSection().objectValue?["fcm"])
        let both = try await senders(.object(["apns": apns, "fcm": fcm]))
        #expect(Set(both.transports.keys) == [.apns, .fcm])
        await both.shutdown()
    }

    @Test("a key file its group or others may read is refused, naming the file and chmod 600")
    func openKeyFile() async throws {
        let files = try Files()
        defer { try? FileManager.default.removeItem(at: files.directory) }
        for mode in [0o644, 0o640, 0o604, 0o660] {
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: files.keyFile)
            let error = try await refusal(files.apns())
            #expect(error.key == "server.mobileAuth.push.apns.keyFile")
            #expect(error.problem.contains(files.keyFile))
            #expect(error.problem.contains("chmod 600 \(files.keyFile)"))
            #expect(error.problem.contains(String(mode, radix: 8)))
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: files.serviceAccountFile)
        let error = try await refusal(files.fcmSection())
        #expect(error.key == "server.mobileAuth.push.fcm.serviceAccountFile")
        #expect(error.problem.contains("chmod 600 \(files.serviceAccountFile)"))
    }

    @Test("a missing key file, a file that is no key, and a CA file that is none are refused without the key")
    func unusableFiles() async throws {
        let files = try Files()
        defer { try? FileManager.default.removeItem(at: files.directory) }
        let missing = files.directory.appendingPathComponent("AuthKey_missing.p8").path
        let absent = try await refusal(files.apns(["keyFile": .string(missing)]))
        #expect(absent.description.contains("\(missing) does not exist; download the key"))

        let notAKey = try writeKeyFile(Data("not a key\n".utf8), "notakey.p8", in: files.directory)
        let garbage = try await refusal(files.apns(["keyFile": .string(notAKey)]))
        #expect(garbage.problem.contains("\(notAKey) is not a PKCS#8 P-256 private key"))

        // An RSA key where the P-256 key belongs: refused, and its PEM never repeated.
        let rsa = files.fcm.serviceAccountKey.pkcs8PEMRepresentation
        let wrongKind = try writeKeyFile(Data(rsa.utf8), "rsa.p8", in: files.directory)
        let wrong = try await refusal(files.apns(["keyFile": .string(wrongKind)]))
        #expect(wrong.problem.contains("is not a PKCS#8 P-256 private key"))
        #expect(!wrong.description.contains("PRIVATE KEY-----\n"))

        let account =
            try JSONSerialization.jsonObject(with: try files.fcm.serviceAccountFile()) as? [String: Any] ?? [:]
        let noKey = try writeKeyFile(
            try JSONSerialization.data(withJSONObject: account.filter { $0.key != "private_key" }),
            "no-key.json",
            in: files.directory
        )
        let incomplete = try await refusal(files.fcmSection(["serviceAccountFile": .string(noKey)]))
        #expect(incomplete.problem.contains("\(noKey) is not a service account key file: no private_key"))

        let caFile = try writeKeyFile(Data("nothing here".utf8), "ca.pem", in: files.directory, permissions: 0o644)
        let ca = try await refusal(files.apns(["caFile": .string(caFile)]))
        #expect(ca.key == "server.mobileAuth.push.apns.caFile")
        #expect(ca.problem.contains(caFile))
    }

    @Test("the manifest's push section: one line naming the manifest, the key and the file")
    func manifestLine() async throws {
        let files = try Files()
        defer { try? FileManager.default.removeItem(at: files.directory) }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: files.keyFile)
        let manifest = try ManifestLoader.jsonAndYAML.parse(
            Data(
                """
                server:
                  mobileAuth:
                    apiClients: [{id: portal, secret: portal-secret-0123456789}]
                    types: [{name: login, method: confirmation}]
                    push:
                      apns: {keyFile: \(files.keyFile), keyID: ABC123DEFG, teamID: DEF123GHIJ, topic: com.example.app}
                """.utf8
            ),
            format: YAMLManifestFormat(),
            source: "server.yaml",
            additionalSections: ["server"]
        )
        do {
            let made = try await PushSenders(manifest: manifest, logger: RecordingLogger().logger)
            await made.shutdown()
            Issue.record("a key file others may read was accepted")
        } catch let error as ManifestError {
            #expect(
                error.message
                    == "server.yaml: server.mobileAuth.push.apns.keyFile: \(files.keyFile) holds a private key but "
                    + "its group or others may read it (mode 644); make it private to the user running gatehouse: "
                    + "chmod 600 \(files.keyFile)"
            )
        }
    }

    @Test("the section is checked: a service named, https URLs, ids without spaces, attempts in range")
    func decoding() throws {
        func problem(_ value: ConfigValue) -> String? {
            do {
                _ = try ConfigurationDecoder().decode(PushConfiguration.self, from: value)
                return nil
            } catch {
                return error.description
            }
        }
        let apns: [String: ConfigValue] = [
            "keyFile": .string("k.p8"), "keyID": .string("ABC123DEFG"), "teamID": .string("DEF123GHIJ"),
            "topic": .string("com.example.app"),
        ]
        #expect(problem(.object([:]))?.contains("name apns, fcm or both") == true)
        #expect(problem(.object(["apns": .object(apns)])) == nil)
        #expect(
            problem(.object(["apns": .object(apns.merging(["url": .string("http://127.0.0.1:8443")]) { $1 })]))?
                .contains("expected an https URL") == true
        )
        #expect(problem(.object(["apns": .object(apns.merging(["teamID": .string("DEF 123")]) { $1 })])) != nil)
        #expect(problem(.object(["apns": .object(apns.merging(["environment": .string("staging")]) { $1 })])) != nil)
        #expect(problem(.object(["apns": .object(apns), "attempts": .integer(11)])) != nil)
        #expect(
            problem(
                .object(["fcm": .object(["serviceAccountFile": .string("a.json"), "tokenURL": .string("ftp://x/")])])
            ) != nil
        )
        let sandbox = try ConfigurationDecoder().decode(
            PushConfiguration.self,
            from: .object(["apns": .object(apns.merging(["environment": .string("sandbox")]) { $1 })])
        )
        #expect(sandbox.apns?.baseURL == "https://api.sandbox.push.apple.com")
    }

    @Test("retry delays double from one second with jitter, at most 30 s; Retry-After wins")
    func retryPolicy() {
        let policy = PushRetryPolicy(attempts: 4)
        #expect(policy.delay(after: 1, retryAfter: nil, random: 0) == .milliseconds(500))
        #expect(policy.delay(after: 1, retryAfter: nil, random: 0.999) <= .seconds(1))
        #expect(policy.delay(after: 3, retryAfter: nil, random: 0) == .seconds(2))
        #expect(policy.delay(after: 12, retryAfter: nil, random: 0.999) <= .seconds(30))
        #expect(policy.delay(after: 1, retryAfter: .seconds(7), random: 0) == .seconds(7))
    }
}

extension ConfigValue {
    /// The members of an object; nil for anything else.
    fileprivate var objectValue: [String: ConfigValue]? {
        if case .object(let members) = self { return members }
        return nil
    }
}
