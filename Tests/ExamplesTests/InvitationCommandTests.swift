import Foundation
import Testing

@Suite("The invitation-code example identity provider over HTTP")
struct InvitationCommandTests {
    @Test("totp-gatehouse registers with a code from Examples/manifests/invitation.yaml; the code works once")
    func registersOnce() async throws {
        let directory = try scratchDirectory("gatehouse-invitation-test")
        defer { try? FileManager.default.removeItem(at: directory) }
        let manifest = ["--manifest", "Examples/manifests/invitation.yaml"]
        let (server, url) = try await startServer(in: directory, binary: "totp-gatehouse", manifest: manifest)
        defer { server.process.terminate() }
        func register(on device: String) async throws -> Session {
            let data = directory.appendingPathComponent(device).path
            let session = try Session(
                ["register", "--server", url, "--data-dir", data] + manifest,
                binary: "totp-gatehouse"
            )
            _ = try await session.waitFor("Code: ")
            session.type("7QF4-K2MX-9TZD")
            return session
        }

        let phone = try await register(on: "phone")
        _ = try await phone.waitFor("Choose a PIN of 6 digits: ")
        phone.type("258147")
        #expect(try await phone.finish() == 0, "\(phone.errors.withLock { $0 })")
        #expect(phone.output.withLock { $0 }.hasPrefix("Registered profile "))

        // Someone else with the same code is refused before any PIN is asked.
        let laptop = try await register(on: "laptop")
        #expect(try await laptop.finish() != 0)
        #expect(
            laptop.errors.withLock { $0 }.contains("That invitation code is not valid."),
            "\(laptop.errors.withLock { $0 })"
        )
        #expect(!laptop.output.withLock { $0 }.contains("Choose a PIN"))
    }
}
